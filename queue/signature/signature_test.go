package signature_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/queue/signature"
)

// vectors were computed outside Go, with Python's hmac module and checked
// with `printf '<t>.<body>' | openssl dgst -sha256 -hmac <secret>`, so
// that a mistake shared by Compute and this test's own HMAC cannot hide.
var vectors = []struct {
	name   string
	secret string
	t      int64
	body   string
	want   string
}{
	{name: "event body", secret: "whsec_test_secret", t: 1767225600,
		body: `{"event_type":"prescription.created","event_id":"0193a0e0-0000-7000-8000-0000000000e1"}`,
		want: "ab801c232efa2f0fdb09793f6ba0e34b6e137dc0a1d4f44236b1a394a284032b"},
	{name: "empty body", secret: "s3cr3t", t: 1700000000, body: "",
		want: "f63f1341b06e485fe1fe78cbfd5f6d4cee0d492c21bbc3333af817254d0db38a"},
	{name: "zero timestamp", secret: "k", t: 0, body: "hello",
		want: "219a8453b42a28e66f1b837e89bd58fd0caa50b9c7f09f682ebe5267c0eb826d"},
	{name: "rxgate-style secret, non-ASCII body", secret: "fgh8yfNs0E7dPhtbYjtwXUjm-WoH8-gWm0dRZRW6Fck", t: 1767225600,
		body: `{"note":"café – ½"}`,
		want: "323c0a9c743f1f313989ef75dcddefea8e258e43ba9b767ccf25cffdb6f55fb4"},
}

// independent is spec 6.4.2 written out: HMAC-SHA256 of "<t>.<body>".
func independent(secret string, t int64, body string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(fmt.Sprintf("%d.%s", t, body)))
	return hex.EncodeToString(m.Sum(nil))
}

func TestComputeVectors(t *testing.T) {
	t.Parallel()
	for _, tt := range vectors {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, independent(tt.secret, tt.t, tt.body), "the test's own HMAC drifted from the vector")
			assert.Equal(t, tt.want, signature.Compute(tt.secret, tt.t, []byte(tt.body)))
			h := signature.Header(time.Unix(tt.t, 0), []byte(tt.body), tt.secret)
			assert.Equal(t, fmt.Sprintf("t=%d,v1=%s", tt.t, tt.want), h)
			assert.NoError(t, signature.Verify([]string{tt.secret}, h, []byte(tt.body), time.Unix(tt.t, 0)))
		})
	}
}

func TestHeaderWithTwoSecrets(t *testing.T) {
	t.Parallel()
	body := []byte(`{"a":1}`)
	at := time.Unix(1767225600, 999_000_000) // sub-second part is dropped
	h := signature.Header(at, body, "old", "new")
	assert.Equal(t, "t=1767225600,v1="+independent("old", 1767225600, `{"a":1}`)+",v1="+independent("new", 1767225600, `{"a":1}`), h)
	for _, secret := range []string{"new", "old"} {
		assert.NoError(t, signature.Verify([]string{secret}, h, body, at), "a receiver holding %q verifies", secret)
	}
	// A receiver that reads only the first v1 (6.4's single-signature
	// format) and still holds the old secret verifies during the grace.
	first := h[:strings.Index(h, ",v1=")+len(",v1=")+64]
	assert.NoError(t, signature.Verify([]string{"old"}, first, body, at))
	assert.ErrorIs(t, signature.Verify([]string{"other"}, h, body, at), signature.ErrSignatureMismatch)
}

func TestParse(t *testing.T) {
	t.Parallel()
	sig := strings.Repeat("ab", 32)
	tests := []struct {
		name    string
		header  string
		wantErr error
		wantT   int64
		wantN   int
	}{
		{name: "plain", header: "t=1700000000,v1=" + sig, wantT: 1700000000, wantN: 1},
		{name: "two signatures", header: "t=1,v1=" + sig + ",v1=" + sig, wantT: 1, wantN: 2},
		{name: "order does not matter", header: "v1=" + sig + ",t=5", wantT: 5, wantN: 1},
		{name: "spaces around entries", header: "  t=5 , v1=" + sig + "  ", wantT: 5, wantN: 1},
		{name: "unknown schemes are ignored", header: "t=5,v0=zz,v2=whatever,v1=" + sig, wantT: 5, wantN: 1},
		{name: "uppercase hex", header: "t=5,v1=" + strings.ToUpper(sig), wantT: 5, wantN: 1},
		{name: "empty", header: "", wantErr: signature.ErrMissingHeader},
		{name: "blank", header: "   ", wantErr: signature.ErrMissingHeader},
		{name: "no timestamp", header: "v1=" + sig, wantErr: signature.ErrMissingTimestamp},
		{name: "no signature", header: "t=5", wantErr: signature.ErrMissingSignature},
		{name: "only other schemes", header: "t=5,v0=" + sig, wantErr: signature.ErrMissingSignature},
		{name: "two timestamps", header: "t=5,t=6,v1=" + sig, wantErr: signature.ErrMalformedHeader},
		{name: "entry without =", header: "t=5,v1", wantErr: signature.ErrMalformedHeader},
		{name: "trailing comma", header: "t=5,v1=" + sig + ",", wantErr: signature.ErrMalformedHeader},
		{name: "empty key", header: "=5,t=5,v1=" + sig, wantErr: signature.ErrMalformedHeader},
		{name: "semicolons", header: "t=5;v1=" + sig, wantErr: signature.ErrInvalidTimestamp},
		{name: "negative timestamp", header: "t=-5,v1=" + sig, wantErr: signature.ErrInvalidTimestamp},
		{name: "signed timestamp", header: "t=+5,v1=" + sig, wantErr: signature.ErrInvalidTimestamp},
		{name: "fractional timestamp", header: "t=5.5,v1=" + sig, wantErr: signature.ErrInvalidTimestamp},
		{name: "exponent timestamp", header: "t=1e9,v1=" + sig, wantErr: signature.ErrInvalidTimestamp},
		{name: "milliseconds timestamp is too long", header: "t=1700000000000,v1=" + sig, wantErr: signature.ErrInvalidTimestamp},
		{name: "empty timestamp", header: "t=,v1=" + sig, wantErr: signature.ErrInvalidTimestamp},
		{name: "short signature", header: "t=5,v1=" + sig[:62], wantErr: signature.ErrMalformedHeader},
		{name: "long signature", header: "t=5,v1=" + sig + "00", wantErr: signature.ErrMalformedHeader},
		{name: "non-hex signature", header: "t=5,v1=" + strings.Repeat("zz", 32), wantErr: signature.ErrMalformedHeader},
		{name: "empty signature", header: "t=5,v1=", wantErr: signature.ErrMalformedHeader},
		{name: "huge header", header: "t=5,v1=" + sig + strings.Repeat(",x=y", 2000), wantErr: signature.ErrMalformedHeader},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := signature.Parse(tt.header)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				var e *signature.Error
				require.True(t, errors.As(err, &e), "a typed error")
				assert.NotEmpty(t, e.Code())
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantT, p.Timestamp)
			assert.Len(t, p.Signatures, tt.wantN)
		})
	}
}

func TestVerify(t *testing.T) {
	t.Parallel()
	const secret = "fgh8yfNs0E7dPhtbYjtwXUjm-WoH8-gWm0dRZRW6Fck"
	body := []byte(`{"event_type":"prescription.created"}`)
	ts := int64(1767225600)
	at := time.Unix(ts, 0)
	good := fmt.Sprintf("t=%d,v1=%s", ts, independent(secret, ts, string(body)))
	tests := []struct {
		name    string
		secrets []string
		header  string
		body    []byte
		now     time.Time
		wantErr error
	}{
		{name: "valid", secrets: []string{secret}, header: good, body: body, now: at},
		{name: "valid with the secret second of two", secrets: []string{"other", secret}, header: good, body: body, now: at},
		{name: "300 s late is accepted", secrets: []string{secret}, header: good, body: body, now: at.Add(300 * time.Second)},
		{name: "300 s early is accepted", secrets: []string{secret}, header: good, body: body, now: at.Add(-300 * time.Second)},
		{name: "301 s late", secrets: []string{secret}, header: good, body: body, now: at.Add(301 * time.Second), wantErr: signature.ErrTimestampOutOfTolerance},
		{name: "301 s early", secrets: []string{secret}, header: good, body: body, now: at.Add(-301 * time.Second), wantErr: signature.ErrTimestampOutOfTolerance},
		{name: "wrong secret", secrets: []string{"not the secret"}, header: good, body: body, now: at, wantErr: signature.ErrSignatureMismatch},
		{name: "body changed", secrets: []string{secret}, header: good, body: []byte(`{"event_type":"prescription.created" }`), now: at, wantErr: signature.ErrSignatureMismatch},
		{name: "body re-encoded", secrets: []string{secret}, header: good, body: []byte("{\"event_type\": \"prescription.created\"}"), now: at, wantErr: signature.ErrSignatureMismatch},
		{name: "timestamp changed", secrets: []string{secret}, header: strings.Replace(good, "t=1767225600", "t=1767225601", 1), body: body, now: at, wantErr: signature.ErrSignatureMismatch},
		{name: "forged and stale is a mismatch", secrets: []string{"x"}, header: good, body: body, now: at.Add(time.Hour), wantErr: signature.ErrSignatureMismatch},
		{name: "no secret", secrets: nil, header: good, body: body, now: at, wantErr: signature.ErrNoSecret},
		{name: "missing header", secrets: []string{secret}, header: "", body: body, now: at, wantErr: signature.ErrMissingHeader},
		{name: "malformed header", secrets: []string{secret}, header: "sha256=abc", body: body, now: at, wantErr: signature.ErrMissingTimestamp},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := signature.Verify(tt.secrets, tt.header, tt.body, tt.now)
			if tt.wantErr == nil {
				assert.NoError(t, err)
				return
			}
			assert.ErrorIs(t, err, tt.wantErr)
		})
	}
}

func TestVerifyTolerance(t *testing.T) {
	t.Parallel()
	body := []byte("x")
	h := signature.Header(time.Unix(1000, 0), body, "s")
	assert.NoError(t, signature.VerifyTolerance([]string{"s"}, h, body, time.Unix(1010, 0), 10*time.Second))
	assert.ErrorIs(t, signature.VerifyTolerance([]string{"s"}, h, body, time.Unix(1011, 0), 10*time.Second), signature.ErrTimestampOutOfTolerance)
}

func FuzzParse(f *testing.F) {
	f.Add("t=1700000000,v1=" + strings.Repeat("ab", 32))
	f.Add("t=,v1=")
	f.Add(",,,")
	f.Fuzz(func(t *testing.T, header string) {
		p, err := signature.Parse(header)
		if err != nil {
			var e *signature.Error
			if !errors.As(err, &e) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if p.Timestamp < 0 || len(p.Signatures) == 0 {
			t.Fatalf("accepted %q as %+v", header, p)
		}
	})
}
