package signature

// Standard Webhooks (https://www.standardwebhooks.com), the scheme an
// endpoint may opt into instead of the spec's own. A delivery carries
//
//	webhook-id: <event id>
//	webhook-timestamp: <unix seconds>
//	webhook-signature: v1,<base64> [v1,<base64>]
//
// where each v1 is the standard base64 of the HMAC-SHA256 of
// "<id>.<timestamp>.<raw body>" keyed with the bytes of a secret shown as
// "whsec_<base64>". During a rotation's grace period a delivery carries
// two signatures, space-separated, the old secret's first.

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The Standard Webhooks headers.
const (
	StandardIDHeader        = "webhook-id"
	StandardTimestampHeader = "webhook-timestamp"
	StandardSignatureHeader = "webhook-signature"
)

// StandardSecretPrefix starts a Standard Webhooks secret.
const StandardSecretPrefix = "whsec_"

// maxStandardIDLen bounds the webhook-id Verify accepts.
const maxStandardIDLen = 256

// ErrBadSecret: a Standard Webhooks secret is not whsec_ and base64.
var ErrBadSecret = &Error{"bad_secret", "the secret is not whsec_ followed by base64"}

// StandardSecret is the Standard Webhooks form of a secret as rxgate stores
// it: "whsec_" and the standard base64 of its key. The key is what the
// stored secret encodes (rxgate's secrets are unpadded URL-safe base64 of
// 32 random bytes), or, for a secret that is not such base64, its bytes.
// StandardKey(StandardSecret(s)) is that key, whatever s.
func StandardSecret(stored string) string {
	key, err := base64.RawURLEncoding.DecodeString(stored)
	if err != nil || len(key) == 0 {
		key = []byte(stored)
	}
	return StandardSecretPrefix + base64.StdEncoding.EncodeToString(key)
}

// StandardKey decodes a Standard Webhooks secret ("whsec_" is optional, as
// in the reference libraries) into its HMAC key.
func StandardKey(secret string) ([]byte, error) {
	s := strings.TrimPrefix(strings.TrimSpace(secret), StandardSecretPrefix)
	key, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		key, err = base64.RawStdEncoding.DecodeString(s)
	}
	if err != nil || len(key) == 0 {
		return nil, ErrBadSecret
	}
	return key, nil
}

// StandardCompute returns the standard base64 of the HMAC-SHA256 of
// "<id>.<timestamp>.<body>" keyed with key.
func StandardCompute(key []byte, id string, timestamp int64, body []byte) string {
	return base64.StdEncoding.EncodeToString(standardMAC(key, id, timestamp, body))
}

func standardMAC(key []byte, id string, timestamp int64, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write(strconv.AppendInt(nil, timestamp, 10))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// StandardHeaders sets the three Standard Webhooks headers of a delivery
// of body with id sent at t on h, one signature per key in the order
// given.
func StandardHeaders(h http.Header, id string, t time.Time, body []byte, keys ...[]byte) {
	ts := t.Unix()
	sigs := make([]string, len(keys))
	for i, k := range keys {
		sigs[i] = "v1," + StandardCompute(k, id, ts, body)
	}
	h.Set(StandardIDHeader, id)
	h.Set(StandardTimestampHeader, strconv.FormatInt(ts, 10))
	h.Set(StandardSignatureHeader, strings.Join(sigs, " "))
}

// StandardParsed is a parsed webhook-signature header.
type StandardParsed struct {
	// Signatures are the decoded v1 values, in header order.
	Signatures [][]byte
}

// ParseStandard reads a webhook-signature header: space-separated
// "<version>,<base64>" entries. Entries of other versions (v1a, a later
// one) are skipped; a v1 whose value is not the base64 of 32 bytes is
// malformed.
func ParseStandard(header string) (*StandardParsed, error) {
	header = strings.TrimSpace(header)
	if header == "" {
		return nil, &restated{ErrMissingHeader, "missing " + StandardSignatureHeader + " header"}
	}
	if len(header) > maxHeaderLen {
		return nil, fmt.Errorf("%w: longer than %d bytes", ErrMalformedHeader, maxHeaderLen)
	}
	p := &StandardParsed{}
	for _, entry := range strings.Fields(header) {
		version, value, ok := strings.Cut(entry, ",")
		if !ok || version == "" {
			return nil, fmt.Errorf("%w: entry %q is not version,signature", ErrMalformedHeader, entry)
		}
		if version != "v1" {
			continue
		}
		sig, err := base64.StdEncoding.DecodeString(value)
		if err != nil || len(sig) != sha256.Size {
			return nil, fmt.Errorf("%w: a v1 signature must be the base64 of %d bytes", ErrMalformedHeader, sha256.Size)
		}
		p.Signatures = append(p.Signatures, sig)
	}
	if len(p.Signatures) == 0 {
		return nil, ErrMissingSignature
	}
	return p, nil
}

// StandardRequest is what a receiver got: the three headers as received
// and the raw body.
type StandardRequest struct {
	ID, Timestamp, Signature string
	Body                     []byte
}

// StandardRequestOf reads the headers of r and takes body as the raw body.
func StandardRequestOf(h http.Header, body []byte) StandardRequest {
	return StandardRequest{
		ID: h.Get(StandardIDHeader), Timestamp: h.Get(StandardTimestampHeader),
		Signature: h.Get(StandardSignatureHeader), Body: body,
	}
}

// VerifyStandard checks a Standard Webhooks delivery against secrets (each
// "whsec_..."), in the order Verify checks: the headers' format, the
// signatures (constant time), then the 300-second tolerance. It returns nil
// or an error matching one of the Err values (ErrBadSecret for a secret
// that does not decode).
func VerifyStandard(secrets []string, r StandardRequest, now time.Time) error {
	return VerifyStandardTolerance(secrets, r, now, Tolerance)
}

// VerifyStandardTolerance is VerifyStandard with another tolerance.
func VerifyStandardTolerance(secrets []string, r StandardRequest, now time.Time, tolerance time.Duration) error {
	if len(secrets) == 0 {
		return ErrNoSecret
	}
	keys := make([][]byte, len(secrets))
	for i, s := range secrets {
		k, err := StandardKey(s)
		if err != nil {
			return err
		}
		keys[i] = k
	}
	if r.ID == "" && r.Timestamp == "" && strings.TrimSpace(r.Signature) == "" {
		return &restated{ErrMissingHeader, "missing " + StandardIDHeader + ", " + StandardTimestampHeader + " and " + StandardSignatureHeader + " headers"}
	}
	if r.ID == "" || len(r.ID) > maxStandardIDLen {
		return fmt.Errorf("%w: %s must hold 1 to %d bytes", ErrMalformedHeader, StandardIDHeader, maxStandardIDLen)
	}
	if strings.TrimSpace(r.Timestamp) == "" {
		return &restated{ErrMissingTimestamp, "no " + StandardTimestampHeader + " header"}
	}
	ts, err := parseTimestamp(strings.TrimSpace(r.Timestamp))
	if err != nil {
		return err
	}
	p, err := ParseStandard(r.Signature)
	if err != nil {
		return err
	}
	matched := false
	for _, k := range keys {
		want := standardMAC(k, r.ID, ts, r.Body)
		for _, got := range p.Signatures {
			if hmac.Equal(got, want) {
				matched = true
			}
		}
	}
	if !matched {
		return ErrSignatureMismatch
	}
	skew := now.Sub(time.Unix(ts, 0))
	if skew > tolerance || skew < -tolerance {
		return fmt.Errorf("%w (%s)", ErrTimestampOutOfTolerance, skew.Round(time.Second))
	}
	return nil
}

// IsStandard reports whether h carries a Standard Webhooks signature and
// no rxgate one: a receiver that accepts both schemes picks by it.
func IsStandard(h http.Header) bool {
	return h.Get(HeaderName) == "" && h.Get(StandardSignatureHeader) != ""
}

// restated is a failure under another message: errors.Is still matches
// its Err value, whose message names the rxgate header.
type restated struct {
	base *Error
	msg  string
}

func (e *restated) Error() string { return "signature: " + e.msg }
func (e *restated) Unwrap() error { return e.base }

// Code is the base failure's code.
func (e *restated) Code() string { return e.base.code }
