// Package signature signs and verifies rxgate webhook deliveries (spec
// section 6.4). Partners import it to check that a delivery came from
// rxgate; rxgate signs with it.
//
// A delivery carries the header
//
//	X-Webhook-Signature: t=<unix seconds>,v1=<hex>[,v1=<hex>]
//
// where each v1 is the lowercase hex HMAC-SHA256 of "<t>.<raw body>" keyed
// with a webhook secret (the secret string's bytes, exactly as shown on
// registration). During the grace period after a secret rotation a
// delivery carries two v1 entries, the old secret's first, so a receiver
// holding either secret verifies.
//
// Verify checks, in this order: the header's format, the signatures (in
// constant time), then the 300-second timestamp tolerance. Checking the
// signature first means ErrTimestampOutOfTolerance reports an authentic
// but stale delivery (a replay, or a receiver clock that is off), which is
// worth telling apart from a forgery.
package signature

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// HeaderName is the header that carries the signature.
const HeaderName = "X-Webhook-Signature"

// Tolerance is how far the signed timestamp may be from the receiver's
// clock, either way (spec 6.4.3).
const Tolerance = 300 * time.Second

// maxHeaderLen bounds the header Verify parses.
const maxHeaderLen = 4096

// Error is a verification failure. Each failure is one of the Err values
// below, possibly wrapped with detail: test with errors.Is.
type Error struct {
	code string
	msg  string
}

func (e *Error) Error() string { return "signature: " + e.msg }

// Code is a stable, machine-readable name of the failure.
func (e *Error) Code() string { return e.code }

// The failures Verify reports.
var (
	// ErrNoSecret: Verify was given no secret to verify with.
	ErrNoSecret = &Error{"no_secret", "no secret to verify with"}
	// ErrMissingHeader: the header is absent or empty.
	ErrMissingHeader = &Error{"missing_header", "missing " + HeaderName + " header"}
	// ErrMalformedHeader: the header is not a comma-separated list of
	// key=value pairs with one t and well-formed v1 values.
	ErrMalformedHeader = &Error{"malformed_header", "malformed " + HeaderName + " header"}
	// ErrMissingTimestamp: the header has no t.
	ErrMissingTimestamp = &Error{"missing_timestamp", "no timestamp (t=) in the header"}
	// ErrInvalidTimestamp: t is not a non-negative integer of seconds.
	ErrInvalidTimestamp = &Error{"invalid_timestamp", "the timestamp (t=) is not a number of seconds"}
	// ErrMissingSignature: the header has no v1 signature.
	ErrMissingSignature = &Error{"missing_signature", "no v1 signature in the header"}
	// ErrSignatureMismatch: no v1 signature matches any secret: the body,
	// the timestamp or the secret differ from what was signed.
	ErrSignatureMismatch = &Error{"signature_mismatch", "no signature matches"}
	// ErrTimestampOutOfTolerance: the signature is valid but its timestamp
	// is more than Tolerance away from now.
	ErrTimestampOutOfTolerance = &Error{"timestamp_out_of_tolerance", "the timestamp is more than 300 seconds from now"}
)

// Compute returns the lowercase hex HMAC-SHA256 of "<timestamp>.<body>"
// keyed with secret.
func Compute(secret string, timestamp int64, body []byte) string {
	return hex.EncodeToString(mac(secret, timestamp, body))
}

func mac(secret string, timestamp int64, body []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(strconv.AppendInt(nil, timestamp, 10))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// Header returns the header value for body sent at t, with one v1 per
// secret in the order given.
func Header(t time.Time, body []byte, secrets ...string) string {
	ts := t.Unix()
	var b strings.Builder
	b.WriteString("t=")
	b.WriteString(strconv.FormatInt(ts, 10))
	for _, s := range secrets {
		b.WriteString(",v1=")
		b.WriteString(Compute(s, ts, body))
	}
	return b.String()
}

// Parsed is a parsed signature header.
type Parsed struct {
	// Timestamp is t, in Unix seconds.
	Timestamp int64
	// Signatures are the decoded v1 values, in header order.
	Signatures [][]byte
}

// Parse reads a signature header. Whitespace around entries is ignored, as
// are entries of schemes other than t and v1 (a later scheme may be added
// beside v1). It rejects a header without exactly one t, with a t that is
// not a plain non-negative integer, with a v1 that is not 64 hex digits, or
// with an entry that is not key=value.
func Parse(header string) (*Parsed, error) {
	header = strings.TrimSpace(header)
	if header == "" {
		return nil, ErrMissingHeader
	}
	if len(header) > maxHeaderLen {
		return nil, fmt.Errorf("%w: longer than %d bytes", ErrMalformedHeader, maxHeaderLen)
	}
	p := &Parsed{Timestamp: -1}
	for _, part := range strings.Split(header, ",") {
		part = strings.TrimSpace(part)
		key, value, ok := strings.Cut(part, "=")
		if !ok || key == "" {
			return nil, fmt.Errorf("%w: entry %q is not key=value", ErrMalformedHeader, part)
		}
		switch key {
		case "t":
			if p.Timestamp >= 0 {
				return nil, fmt.Errorf("%w: more than one t", ErrMalformedHeader)
			}
			ts, err := parseTimestamp(value)
			if err != nil {
				return nil, err
			}
			p.Timestamp = ts
		case "v1":
			if len(value) != sha256.Size*2 {
				return nil, fmt.Errorf("%w: v1 must be %d hex digits", ErrMalformedHeader, sha256.Size*2)
			}
			sig, err := hex.DecodeString(value)
			if err != nil {
				return nil, fmt.Errorf("%w: v1 must be %d hex digits", ErrMalformedHeader, sha256.Size*2)
			}
			p.Signatures = append(p.Signatures, sig)
		}
	}
	if p.Timestamp < 0 {
		return nil, ErrMissingTimestamp
	}
	if len(p.Signatures) == 0 {
		return nil, ErrMissingSignature
	}
	return p, nil
}

// parseTimestamp accepts 1 to 12 decimal digits and nothing else: no sign,
// no fraction, no exponent.
func parseTimestamp(v string) (int64, error) {
	if v == "" || len(v) > 12 {
		return 0, ErrInvalidTimestamp
	}
	for _, c := range []byte(v) {
		if c < '0' || c > '9' {
			return 0, ErrInvalidTimestamp
		}
	}
	ts, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, ErrInvalidTimestamp
	}
	return ts, nil
}

// Verify checks that header signs body with one of secrets and that its
// timestamp is within Tolerance of now. body must be the raw request body,
// unmodified. It returns nil or an error matching one of the Err values.
func Verify(secrets []string, header string, body []byte, now time.Time) error {
	return VerifyTolerance(secrets, header, body, now, Tolerance)
}

// VerifyTolerance is Verify with another tolerance.
func VerifyTolerance(secrets []string, header string, body []byte, now time.Time, tolerance time.Duration) error {
	if len(secrets) == 0 {
		return ErrNoSecret
	}
	p, err := Parse(header)
	if err != nil {
		return err
	}
	matched := false
	for _, s := range secrets {
		want := mac(s, p.Timestamp, body)
		for _, got := range p.Signatures {
			// hmac.Equal takes time independent of where the values differ.
			if hmac.Equal(got, want) {
				matched = true
			}
		}
	}
	if !matched {
		return ErrSignatureMismatch
	}
	skew := now.Sub(time.Unix(p.Timestamp, 0))
	if skew > tolerance || skew < -tolerance {
		return fmt.Errorf("%w (%s)", ErrTimestampOutOfTolerance, skew.Round(time.Second))
	}
	return nil
}
