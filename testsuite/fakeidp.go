package testsuite

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jwk"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/config"
)

// Key ids the FakeIdP publishes.
const (
	FakeRSAKeyID = "fake-idp-rsa"
	FakeECKeyID  = "fake-idp-ec"
)

// Signing keys are made once per test binary: RSA key generation is slow
// under -race, and every FakeIdP may share them.
var (
	keysOnce sync.Once
	rsaKey   *rsa.PrivateKey
	ecKey    *ecdsa.PrivateKey
	keysErr  error
)

func fakeKeys() (*rsa.PrivateKey, *ecdsa.PrivateKey, error) {
	keysOnce.Do(func() {
		if rsaKey, keysErr = rsa.GenerateKey(rand.Reader, 2048); keysErr != nil {
			return
		}
		ecKey, keysErr = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	})
	return rsaKey, ecKey, keysErr
}

// FakeIdP is an external identity provider: an httptest server publishing a
// JWKS (an RS256 key, and an ES256 key with WithES256), and a minter of
// tokens with any claims and headers, well-formed or hostile.
type FakeIdP struct {
	// URL is the JWKS URL, for WithJWKS.
	URL string
	// Issuer, Audience and ScopeClaim shape Claims. They default to
	// config.Defaults()'s auth.issuer, auth.audience and auth.scope_claim.
	Issuer, Audience, ScopeClaim string
	// Now is the clock of Claims and the time-shifting helpers.
	Now func() time.Time

	rsa     *rsa.PrivateKey
	ec      *ecdsa.PrivateKey
	fetches atomic.Int64
}

// IdPOption adjusts NewFakeIdP.
type IdPOption func(*idpOptions)

type idpOptions struct{ es256 bool }

// WithES256 also publishes the ES256 (P-256) key, kid FakeECKeyID.
func WithES256() IdPOption { return func(o *idpOptions) { o.es256 = true } }

// NewFakeIdP starts a FakeIdP; t.Cleanup stops it.
func NewFakeIdP(t testing.TB, opts ...IdPOption) *FakeIdP {
	t.Helper()
	var o idpOptions
	for _, opt := range opts {
		opt(&o)
	}
	rk, ek, err := fakeKeys()
	require.NoError(t, err, "testsuite: generating the FakeIdP keys")
	defaults := config.Defaults()
	f := &FakeIdP{
		Issuer: defaults.Auth.Issuer, Audience: defaults.Auth.Audience, ScopeClaim: defaults.Auth.ScopeClaim,
		Now: time.Now, rsa: rk, ec: ek,
	}

	set := jwk.NewSet()
	addKey := func(pub any, kid string, alg jwa.SignatureAlgorithm) {
		k, err := jwk.FromRaw(pub)
		require.NoError(t, err)
		require.NoError(t, k.Set(jwk.KeyIDKey, kid))
		require.NoError(t, k.Set(jwk.AlgorithmKey, alg))
		require.NoError(t, k.Set(jwk.KeyUsageKey, jwk.ForSignature))
		require.NoError(t, set.AddKey(k))
	}
	addKey(&rk.PublicKey, FakeRSAKeyID, jwa.RS256)
	if o.es256 {
		addKey(&ek.PublicKey, FakeECKeyID, jwa.ES256)
	}
	jwks, err := json.Marshal(set)
	require.NoError(t, err)

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/.well-known/jwks.json" {
			http.NotFound(w, r)
			return
		}
		f.fetches.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(jwks)
	}))
	t.Cleanup(srv.Close)
	f.URL = srv.URL + "/.well-known/jwks.json"
	return f
}

// PublicJWK returns the public key of alg ("RS256" or "ES256") as a JWK
// object with the given kid, e.g. to embed it in a token header.
func (f *FakeIdP) PublicJWK(alg, kid string) map[string]any {
	var pub any = &f.rsa.PublicKey
	if alg == "ES256" {
		pub = &f.ec.PublicKey
	}
	k, err := jwk.FromRaw(pub)
	if err == nil {
		err = k.Set(jwk.KeyIDKey, kid)
	}
	var out map[string]any
	if err == nil {
		var b []byte
		if b, err = json.Marshal(k); err == nil {
			err = json.Unmarshal(b, &out)
		}
	}
	if err != nil {
		panic(fmt.Sprintf("testsuite: public key as JWK: %v", err))
	}
	return out
}

// Fetches is how often the JWKS has been fetched.
func (f *FakeIdP) Fetches() int64 { return f.fetches.Load() }

// Claims returns well-formed claims: iss, aud, sub, org_id (omitted when
// orgID is ""), the scope claim (omitted without scopes), iat and nbf now,
// exp in an hour, and a jti.
func (f *FakeIdP) Claims(sub, orgID string, scopes ...string) map[string]any {
	now := f.Now().Unix()
	c := map[string]any{
		"iss": f.Issuer, "aud": f.Audience, "sub": sub,
		"iat": now, "nbf": now, "exp": now + 3600,
		"jti": Unique("jti-"),
	}
	if orgID != "" {
		c["org_id"] = orgID
	}
	if len(scopes) > 0 {
		if f.ScopeClaim == "scope" {
			c["scope"] = strings.Join(scopes, " ")
		} else {
			c[f.ScopeClaim] = scopes
		}
	}
	return c
}

// MintOption adjusts Mint.
type MintOption func(*mintOptions)

type mintOptions struct {
	alg     string
	kid     *string
	headers map[string]any
}

// WithAlg signs with "RS256" (the default, RSA key) or "ES256" (EC key).
func WithAlg(alg string) MintOption { return func(o *mintOptions) { o.alg = alg } }

// WithKeyID sets the kid header; "" omits it.
func WithKeyID(kid string) MintOption { return func(o *mintOptions) { o.kid = &kid } }

// WithHeader sets a protected header member (after alg, kid and typ).
func WithHeader(name string, value any) MintOption {
	return func(o *mintOptions) {
		if o.headers == nil {
			o.headers = map[string]any{}
		}
		o.headers[name] = value
	}
}

// Mint signs claims exactly as given. By default the header is alg RS256,
// typ JWT and the kid of the signing key.
func (f *FakeIdP) Mint(claims map[string]any, opts ...MintOption) string {
	o := mintOptions{alg: "RS256"}
	for _, opt := range opts {
		opt(&o)
	}
	header := map[string]any{"alg": o.alg, "typ": "JWT"}
	kid := FakeRSAKeyID
	var sign func(input []byte) []byte
	switch o.alg {
	case "RS256":
		sign = f.signRS256
	case "ES256":
		kid, sign = FakeECKeyID, f.signES256
	default:
		panic(fmt.Sprintf("testsuite: Mint cannot sign %s; use the hostile token helpers", o.alg))
	}
	if o.kid != nil {
		kid = *o.kid
	}
	if kid != "" {
		header["kid"] = kid
	}
	maps.Copy(header, o.headers)
	return compact(header, claims, sign)
}

// compact serialises a JWS: base64url(header).base64url(claims).base64url(sig).
func compact(header, claims map[string]any, sign func([]byte) []byte) string {
	input := segment(header) + "." + segment(claims)
	return input + "." + base64.RawURLEncoding.EncodeToString(sign([]byte(input)))
}

func segment(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("testsuite: marshal token segment: %v", err))
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

func (f *FakeIdP) signRS256(input []byte) []byte {
	h := sha256.Sum256(input)
	sig, err := rsa.SignPKCS1v15(rand.Reader, f.rsa, crypto.SHA256, h[:])
	if err != nil {
		panic(fmt.Sprintf("testsuite: RS256 sign: %v", err))
	}
	return sig
}

func (f *FakeIdP) signES256(input []byte) []byte {
	h := sha256.Sum256(input)
	r, s, err := ecdsa.Sign(rand.Reader, f.ec, h[:])
	if err != nil {
		panic(fmt.Sprintf("testsuite: ES256 sign: %v", err))
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return sig
}

// with returns a copy of claims with the given members replaced.
func with(claims map[string]any, kv ...any) map[string]any {
	c := maps.Clone(claims)
	for i := 0; i+1 < len(kv); i += 2 {
		c[kv[i].(string)] = kv[i+1]
	}
	return c
}

// Without returns a copy of claims without the named members.
func Without(claims map[string]any, names ...string) map[string]any {
	c := maps.Clone(claims)
	for _, n := range names {
		delete(c, n)
	}
	return c
}

// Expired is claims, signed, with iat and nbf two hours ago and exp one hour
// ago: far outside any clock leeway.
func (f *FakeIdP) Expired(claims map[string]any) string {
	now := f.Now().Unix()
	return f.Mint(with(claims, "iat", now-7200, "nbf", now-7200, "exp", now-3600))
}

// NotYetValid is claims, signed, with nbf an hour from now.
func (f *FakeIdP) NotYetValid(claims map[string]any) string {
	now := f.Now().Unix()
	return f.Mint(with(claims, "iat", now, "nbf", now+3600, "exp", now+7200))
}

// WrongIssuer is claims, signed, with another iss.
func (f *FakeIdP) WrongIssuer(claims map[string]any) string {
	return f.Mint(with(claims, "iss", "https://evil.example.test/"))
}

// WrongAudience is claims, signed, with another aud.
func (f *FakeIdP) WrongAudience(claims map[string]any) string {
	return f.Mint(with(claims, "aud", "another-api"))
}

// UnknownKid is claims signed by the RSA key under a kid the JWKS does not
// publish.
func (f *FakeIdP) UnknownKid(claims map[string]any) string {
	return f.Mint(claims, WithKeyID("kid-nobody-published"))
}

// AlgNone is claims with header alg "none", the RSA kid, and an empty
// signature segment (RFC 7519 unsecured JWT). withSignature puts a
// non-empty bogus signature segment instead, which gets past a
// compact-format check to the algorithm check.
func (f *FakeIdP) AlgNone(claims map[string]any, withSignature bool) string {
	header := map[string]any{"alg": "none", "typ": "JWT", "kid": FakeRSAKeyID}
	input := segment(header) + "." + segment(claims)
	if withSignature {
		return input + "." + base64.RawURLEncoding.EncodeToString([]byte("no-signature"))
	}
	return input + "."
}

// PublicKeyForm is how the RSA public key is written when it is misused as
// an HMAC secret.
type PublicKeyForm int

// Public key encodings for HS256WithPublicKey.
const (
	PublicKeyPEM      PublicKeyForm = iota // PKIX, PEM-armoured ("-----BEGIN PUBLIC KEY-----")
	PublicKeyDER                           // PKIX, DER
	PublicKeyPKCS1PEM                      // PKCS #1, PEM-armoured ("-----BEGIN RSA PUBLIC KEY-----")
	PublicKeyJWK                           // the JWKS entry's JSON
)

// HS256WithPublicKey is the algorithm-confusion attack: claims signed with
// HMAC-SHA256 keyed with the published RSA public key's bytes, header alg
// HS256 and the RSA kid.
func (f *FakeIdP) HS256WithPublicKey(claims map[string]any, form PublicKeyForm) string {
	pub := &f.rsa.PublicKey
	var secret []byte
	switch form {
	case PublicKeyPEM, PublicKeyDER:
		der, err := x509.MarshalPKIXPublicKey(pub)
		if err != nil {
			panic(fmt.Sprintf("testsuite: marshal public key: %v", err))
		}
		secret = der
		if form == PublicKeyPEM {
			secret = pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
		}
	case PublicKeyPKCS1PEM:
		secret = pem.EncodeToMemory(&pem.Block{Type: "RSA PUBLIC KEY", Bytes: x509.MarshalPKCS1PublicKey(pub)})
	case PublicKeyJWK:
		k, err := jwk.FromRaw(pub)
		if err == nil {
			_ = k.Set(jwk.KeyIDKey, FakeRSAKeyID)
			secret, err = json.Marshal(k)
		}
		if err != nil {
			panic(fmt.Sprintf("testsuite: public key as JWK: %v", err))
		}
	}
	header := map[string]any{"alg": "HS256", "typ": "JWT", "kid": FakeRSAKeyID}
	return compact(header, claims, func(input []byte) []byte {
		m := hmac.New(sha256.New, secret)
		m.Write(input)
		return m.Sum(nil)
	})
}

// Tampered is a token signed for claims whose payload was then replaced by
// other's: the signature no longer matches.
func (f *FakeIdP) Tampered(claims, other map[string]any) string {
	parts := strings.Split(f.Mint(claims), ".")
	parts[1] = segment(other)
	return strings.Join(parts, ".")
}

// GarbageTokens are bearer values that are not JWTs at all, by name.
func GarbageTokens() map[string]string {
	return map[string]string{
		"word":               "not-a-jwt",
		"three segments":     "aaaa.bbbb.cccc",
		"two segments":       "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0",
		"empty segments":     "..",
		"not base64url":      "eyJhbGciOiJSUzI1NiJ9.e30.a+b/c=",
		"json serialization": `{"payload":"e30","signatures":[]}`,
	}
}

// PayloadOf decodes a compact JWT's claims without verifying anything, for
// inspecting what a server minted.
func PayloadOf(t testing.TB, token string) map[string]any {
	t.Helper()
	parts := strings.Split(token, ".")
	require.Len(t, parts, 3, "not a compact JWS: %q", token)
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	require.NoError(t, err)
	var claims map[string]any
	require.NoError(t, json.Unmarshal(raw, &claims))
	return claims
}
