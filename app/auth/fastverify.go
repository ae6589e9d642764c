package auth

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/lestrrat-go/jwx/v2/jwa"
)

// The fast path of a token's first use (issue 31, item 3; measured by
// BenchmarkFirstUse in app/auth). jwt.ParseString decodes the header and
// the claims through jwx's generic machinery (a token object, a map per
// header, reflection over every claim, a validator chain); beyond the
// signature itself that costs as much as an RS256 signature check. The
// fast path decodes the segments into a map of raw JSON values, checks
// the signature with the standard library and validates the claims it
// needs itself, applying jwx's own rules.
//
// It only ever accepts a subset of what the full path (verify's jwx path)
// accepts: a token of the common shape (a header of alg, kid and typ; the
// registered claims in their plain JSON forms, NumericDates as positive
// whole numbers) that passes every check jwx and entry make. Anything
// else, a refused token included, goes to the full path, which decides,
// and with its reason, as it always did. The two exceptions give the full
// path's own answer without running it: a key lookup failure (the key
// provider's error, which the full path returns as is) and a signature
// that does not verify (errSignature, the full path's classification),
// so that neither an unknown kid nor a forged signature costs two
// lookups or two signature checks.

// registeredClaims are the claims jwx decodes into typed fields; a scope
// claim configured under one of these names leaves the fast path off.
var registeredClaims = map[string]bool{"iss": true, "sub": true, "aud": true, "exp": true, "nbf": true, "iat": true, "jti": true}

// fastClaims is a verified token's payload, member by member.
type fastClaims struct {
	raw           map[string]json.RawMessage
	sub, jti      string
	exp, nbf, iat time.Time
}

func (c *fastClaims) Subject() string       { return c.sub }
func (c *fastClaims) JwtID() string         { return c.jti }
func (c *fastClaims) Expiration() time.Time { return c.exp }
func (c *fastClaims) NotBefore() time.Time  { return c.nbf }
func (c *fastClaims) IssuedAt() time.Time   { return c.iat }

// Get decodes a private claim as jwx does (encoding/json into any).
func (c *fastClaims) Get(name string) (any, bool) {
	raw, ok := c.raw[name]
	if !ok {
		return nil, false
	}
	if s, ok := plainString(raw); ok {
		return s, true
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return nil, false
	}
	return v, true
}

// verifyFast is the fast path. done is false when the full path must
// decide; otherwise the entry or the error is the answer.
func (v *Verifier) verifyFast(ctx context.Context, token string, now time.Time) (_ cacheEntry, done bool, _ error) {
	if !v.fast {
		return cacheEntry{}, false, nil
	}
	// checkCompact has run: three non-empty base64url segments.
	i := strings.IndexByte(token, '.')
	j := i + 1 + strings.IndexByte(token[i+1:], '.')
	alg, kid, ok := v.fastHeader(token[:i])
	if !ok {
		return cacheEntry{}, false, nil
	}
	payload, ok := decodeSegment(token[i+1 : j])
	if !ok {
		return cacheEntry{}, false, nil
	}
	sig, ok := decodeSegment(token[j+1:])
	if !ok {
		return cacheEntry{}, false, nil
	}
	k, gen, err := v.lookupKey(ctx, kid, alg)
	if err != nil {
		return cacheEntry{}, true, err
	}
	if !signatureValid(alg, k.raw, token[:j], sig) {
		return cacheEntry{}, true, errSignature
	}
	c, ok := v.fastClaims(payload, now)
	if !ok {
		return cacheEntry{}, false, nil
	}
	e, err := v.entry(c, v.builtin != nil && v.builtin.signedWith(k.raw))
	if err != nil {
		return cacheEntry{}, false, nil
	}
	e.gen = gen
	if !now.Before(e.until) || now.Before(e.from) {
		return cacheEntry{}, false, nil
	}
	return e, true, nil
}

// fastHeader decodes a token's header segment for the fast path: its alg
// (one the fast path checks) and kid. ok is false when the full path must
// decide. The last header accepted is remembered by its segment: the
// tokens of one identity provider's key share it, and decoding it again
// was a tenth of a token's first use beyond the signature (make
// bench-read's rotating measure, perf profile).
func (v *Verifier) fastHeader(seg string) (alg jwa.SignatureAlgorithm, kid string, ok bool) {
	if m := v.lastHeader.Load(); m != nil && m.seg == seg {
		return m.alg, m.kid, true
	}
	header, ok := decodeSegment(seg)
	if !ok {
		return "", "", false
	}
	var h map[string]json.RawMessage
	if json.Unmarshal(header, &h) != nil {
		return "", "", false
	}
	var algName string
	for name, raw := range h {
		var s string
		if !jsonString(raw, &s) {
			return "", "", false
		}
		switch name {
		case "alg":
			algName = s
		case "kid":
			kid = s
		case "typ":
		default: // crit, b64, cty, jwk, x5c...: the full path's business
			return "", "", false
		}
	}
	alg = jwa.SignatureAlgorithm(algName)
	if kid == "" || !allowedAlg(alg) || !fastAlg(alg) {
		return "", "", false
	}
	v.lastHeader.Store(&headerMemo{seg: strings.Clone(seg), alg: alg, kid: kid})
	return alg, kid, true
}

// headerMemo is the header fastHeader accepted last.
type headerMemo struct {
	seg string
	alg jwa.SignatureAlgorithm
	kid string
}

// fastClaims decodes payload and validates it as the full path's options
// do (issuer, audience, required exp and sub, exp, iat and nbf with the
// leeway, on whole seconds as jwx compares them). ok is false when the
// payload is not of the common shape or fails a check.
func (v *Verifier) fastClaims(payload []byte, now time.Time) (*fastClaims, bool) {
	c := &fastClaims{}
	if json.Unmarshal(payload, &c.raw) != nil || c.raw == nil {
		return nil, false
	}
	var iss string
	if !rawString(c.raw, "iss", &iss) || iss != v.issuer {
		return nil, false
	}
	if !rawString(c.raw, "sub", &c.sub) || c.sub == "" {
		return nil, false
	}
	if _, ok := c.raw["jti"]; ok && !rawString(c.raw, "jti", &c.jti) {
		return nil, false
	}
	if !audienceHas(c.raw["aud"], v.audience) {
		return nil, false
	}
	var ok bool
	if c.exp, ok = rawDate(c.raw, "exp"); !ok || c.exp.IsZero() {
		return nil, false
	}
	if c.nbf, ok = rawDate(c.raw, "nbf"); !ok {
		return nil, false
	}
	if c.iat, ok = rawDate(c.raw, "iat"); !ok {
		return nil, false
	}
	secs := now.Truncate(time.Second)
	switch {
	case !secs.Before(c.exp.Add(v.leeway)):
		return nil, false
	case !c.iat.IsZero() && secs.Before(c.iat.Add(-v.leeway)):
		return nil, false
	case !c.nbf.IsZero() && secs.Before(c.nbf.Add(-v.leeway)):
		return nil, false
	}
	return c, true
}

// rawString decodes claim name, which must be present, as a string.
func rawString(m map[string]json.RawMessage, name string, dst *string) bool {
	raw, ok := m[name]
	return ok && len(raw) > 0 && raw[0] == '"' && jsonString(raw, dst)
}

// jsonString is json.Unmarshal(raw, dst) for dst a string: the common
// string with no escapes is taken as it is, the rest decoded by
// encoding/json. A call of json.Unmarshal per claim was about a tenth of
// a token's first use beyond the signature (make bench-read's rotating
// measure, perf profile).
func jsonString(raw []byte, dst *string) bool {
	if s, ok := plainString(raw); ok {
		*dst = s
		return true
	}
	return json.Unmarshal(raw, dst) == nil
}

// plainString returns the value of raw, a JSON value, when it is a string
// whose bytes need no decoding: no escape, no control character, valid
// UTF-8 (json.Unmarshal would replace invalid bytes). ok is false for
// any other value, which the caller decodes in full.
func plainString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	inner := raw[1 : len(raw)-1]
	for _, b := range inner {
		if b < 0x20 || b == '"' || b == '\\' {
			return "", false
		}
	}
	if !utf8.Valid(inner) {
		return "", false
	}
	return string(inner), true
}

// audienceHas reports whether raw, an "aud" of a string or an array of
// strings, holds want.
func audienceHas(raw json.RawMessage, want string) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return false
	}
	if raw[0] == '"' {
		var s string
		return jsonString(raw, &s) && s == want
	}
	var list []string
	if raw[0] != '[' || json.Unmarshal(raw, &list) != nil {
		return false
	}
	for _, s := range list {
		if s == want {
			return true
		}
	}
	return false
}

// rawDate reads NumericDate claim name: the zero time when it is absent,
// ok false unless it is a positive whole number of seconds written in
// digits.
func rawDate(m map[string]json.RawMessage, name string) (time.Time, bool) {
	raw, present := m[name]
	if !present {
		return time.Time{}, true
	}
	if len(raw) == 0 || len(raw) > 12 {
		return time.Time{}, false
	}
	for _, d := range raw {
		if d < '0' || d > '9' {
			return time.Time{}, false
		}
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil || n <= 0 {
		return time.Time{}, false
	}
	return time.Unix(n, 0).UTC(), true
}

// decodeSegment decodes one base64url segment.
func decodeSegment(s string) ([]byte, bool) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	return b, err == nil
}

// fastAlg reports whether signatureValid checks alg.
func fastAlg(alg jwa.SignatureAlgorithm) bool {
	switch alg {
	case jwa.RS256, jwa.RS384, jwa.RS512, jwa.ES256, jwa.ES384, jwa.ES512, jwa.EdDSA:
		return true
	}
	return false
}

// signatureValid checks sig over input with key as jwx's verifiers do for
// alg (one of fastAlg's): PKCS #1 v1.5, or ECDSA with r and s of the
// curve's size each, or Ed25519.
func signatureValid(alg jwa.SignatureAlgorithm, key any, input string, sig []byte) bool {
	var h crypto.Hash
	var digest []byte
	switch alg {
	case jwa.RS256, jwa.ES256:
		d := sha256.Sum256([]byte(input))
		h, digest = crypto.SHA256, d[:]
	case jwa.RS384, jwa.ES384:
		d := sha512.Sum384([]byte(input))
		h, digest = crypto.SHA384, d[:]
	case jwa.RS512, jwa.ES512:
		d := sha512.Sum512([]byte(input))
		h, digest = crypto.SHA512, d[:]
	}
	switch k := key.(type) {
	case *rsa.PublicKey:
		return digest != nil && rsa.VerifyPKCS1v15(k, h, digest, sig) == nil
	case *ecdsa.PublicKey:
		size := (k.Curve.Params().BitSize + 7) / 8
		if digest == nil || len(sig) != 2*size {
			return false
		}
		r, s := new(big.Int).SetBytes(sig[:size]), new(big.Int).SetBytes(sig[size:])
		return ecdsa.Verify(k, digest, r, s)
	case ed25519.PublicKey:
		return alg == jwa.EdDSA && ed25519.Verify(k, []byte(input), sig)
	}
	return false
}
