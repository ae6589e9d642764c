package signature_test

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/queue/signature"
)

// The example of the Standard Webhooks specification (and of Svix's
// documentation), so that a mistake shared by this package and the
// reference library cannot hide.
func TestStandardSpecExample(t *testing.T) {
	key, err := signature.StandardKey("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	require.NoError(t, err)
	got := signature.StandardCompute(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`))
	require.Equal(t, "g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", got)
}

// A delivery rxgate signs verifies with the reference Go library, given
// the whsec_ form of the stored secret; during a rotation with either
// secret; and what the library signs verifies here.
func TestStandardAgainstReferenceLibrary(t *testing.T) {
	stored := []string{"fgh8yfNs0E7dPhtbYjtwXUjm-WoH8-gWm0dRZRW6Fck", "not-base64 secret!", "short"}
	body := []byte(`{"event_type":"prescription.created","event_id":"0193a0e0-0000-7000-8000-0000000000e1","note":"café"}`)
	now := time.Now()
	for _, s := range stored {
		whsec := signature.StandardSecret(s)
		require.True(t, strings.HasPrefix(whsec, "whsec_"), whsec)
		key, err := signature.StandardKey(whsec)
		require.NoError(t, err)

		h := http.Header{}
		signature.StandardHeaders(h, "evt-1", now, body, key)
		wh, err := standardwebhooks.NewWebhook(whsec)
		require.NoError(t, err)
		require.NoError(t, wh.Verify(body, h), "the reference library verifies rxgate's delivery (%q)", s)
		require.Error(t, wh.Verify(append(body, '\n'), h), "and not another body")

		sig, err := wh.Sign("msg_2", now, body)
		require.NoError(t, err)
		req := signature.StandardRequest{ID: "msg_2", Timestamp: strconv.FormatInt(now.Unix(), 10), Signature: sig, Body: body}
		require.NoError(t, signature.VerifyStandard([]string{whsec}, req, now), "the library's signature verifies here")
	}

	// A rotation: the old secret's signature first, then the new one's.
	oldW, newW := signature.StandardSecret(stored[0]), signature.StandardSecret("2nd"+stored[0][3:])
	oldK, _ := signature.StandardKey(oldW)
	newK, _ := signature.StandardKey(newW)
	h := http.Header{}
	signature.StandardHeaders(h, "evt-2", now, body, oldK, newK)
	require.Len(t, strings.Fields(h.Get("webhook-signature")), 2)
	for _, w := range []string{oldW, newW} {
		wh, err := standardwebhooks.NewWebhook(w)
		require.NoError(t, err)
		require.NoError(t, wh.Verify(body, h), "either secret verifies during the rotation")
	}
	other, _ := standardwebhooks.NewWebhook(signature.StandardSecret("third"))
	require.Error(t, other.Verify(body, h))
}

func TestVerifyStandard(t *testing.T) {
	whsec := signature.StandardSecret("fgh8yfNs0E7dPhtbYjtwXUjm-WoH8-gWm0dRZRW6Fck")
	key, err := signature.StandardKey(whsec)
	require.NoError(t, err)
	body := []byte(`{"a":1}`)
	at := time.Unix(1767225600, 0)
	good := func() signature.StandardRequest {
		h := http.Header{}
		signature.StandardHeaders(h, "evt", at, body, key)
		return signature.StandardRequestOf(h, body)
	}
	sig := good().Signature
	zeros := "v1," + base64.StdEncoding.EncodeToString(make([]byte, sha256.Size))
	tests := []struct {
		name    string
		secrets []string
		mutate  func(r *signature.StandardRequest)
		now     time.Time
		want    error
	}{
		{name: "valid", mutate: func(*signature.StandardRequest) {}},
		{name: "valid without the prefix", secrets: []string{strings.TrimPrefix(whsec, "whsec_")}, mutate: func(*signature.StandardRequest) {}},
		{name: "a second signature of another version is skipped", mutate: func(r *signature.StandardRequest) { r.Signature = "v1a,abcd " + r.Signature }},
		{name: "the second of two", mutate: func(r *signature.StandardRequest) { r.Signature = zeros + " " + r.Signature }},
		{name: "no secret", secrets: []string{}, mutate: func(*signature.StandardRequest) {}, want: signature.ErrNoSecret},
		{name: "bad secret", secrets: []string{"whsec_!!"}, mutate: func(*signature.StandardRequest) {}, want: signature.ErrBadSecret},
		{name: "no headers", mutate: func(r *signature.StandardRequest) { *r = signature.StandardRequest{Body: body} }, want: signature.ErrMissingHeader},
		{name: "no id", mutate: func(r *signature.StandardRequest) { r.ID = "" }, want: signature.ErrMalformedHeader},
		{name: "no timestamp", mutate: func(r *signature.StandardRequest) { r.Timestamp = "" }, want: signature.ErrMissingTimestamp},
		{name: "timestamp in ms", mutate: func(r *signature.StandardRequest) { r.Timestamp += "000" }, want: signature.ErrInvalidTimestamp},
		{name: "timestamp not a number", mutate: func(r *signature.StandardRequest) { r.Timestamp = "-1" }, want: signature.ErrInvalidTimestamp},
		{name: "no signature", mutate: func(r *signature.StandardRequest) { r.Signature = "" }, want: signature.ErrMissingHeader},
		{name: "only another version", mutate: func(r *signature.StandardRequest) { r.Signature = "v2,abcd" }, want: signature.ErrMissingSignature},
		{name: "v1 not base64", mutate: func(r *signature.StandardRequest) { r.Signature = "v1,@@@" }, want: signature.ErrMalformedHeader},
		{name: "v1 cut short", mutate: func(r *signature.StandardRequest) { r.Signature = sig[:20] }, want: signature.ErrMalformedHeader},
		{name: "an entry without a comma", mutate: func(r *signature.StandardRequest) { r.Signature = "v1=" + sig[3:] }, want: signature.ErrMalformedHeader},
		{name: "another id", mutate: func(r *signature.StandardRequest) { r.ID = "evt2" }, want: signature.ErrSignatureMismatch},
		{name: "another body", mutate: func(r *signature.StandardRequest) { r.Body = []byte(`{"a": 1}`) }, want: signature.ErrSignatureMismatch},
		{name: "too late", mutate: func(*signature.StandardRequest) {}, now: at.Add(301 * time.Second), want: signature.ErrTimestampOutOfTolerance},
		{name: "too early", mutate: func(*signature.StandardRequest) {}, now: at.Add(-301 * time.Second), want: signature.ErrTimestampOutOfTolerance},
		{name: "at the tolerance", mutate: func(*signature.StandardRequest) {}, now: at.Add(300 * time.Second)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			secrets := tc.secrets
			if secrets == nil {
				secrets = []string{whsec}
			}
			now := tc.now
			if now.IsZero() {
				now = at
			}
			r := good()
			tc.mutate(&r)
			err := signature.VerifyStandard(secrets, r, now)
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tc.want)
			var coded interface{ Code() string }
			require.True(t, errors.As(err, &coded), "a coded failure")
		})
	}
}

func TestIsStandard(t *testing.T) {
	h := http.Header{}
	require.False(t, signature.IsStandard(h))
	h.Set("Webhook-Signature", "v1,x")
	require.True(t, signature.IsStandard(h))
	h.Set(signature.HeaderName, "t=1,v1=00")
	require.False(t, signature.IsStandard(h), "the rxgate header wins")
}
