package receiver_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/queue/receiver"
	"github.com/rxgate/rxgate/queue/signature"
)

func TestReceiver(t *testing.T) {
	t.Parallel()
	now := time.Unix(1767225600, 0)
	body := `{"event_type":"prescription.created","event_id":"e1"}`
	tests := []struct {
		name    string
		method  string
		header  string
		body    string
		respond func(*receiver.Delivery) int
		status  int
		wantErr error
	}{
		{name: "verified", method: http.MethodPost, header: signature.Header(now, []byte(body), "secret"), body: body, status: 200},
		{name: "verified with the old secret during a rotation", method: http.MethodPost,
			header: signature.Header(now, []byte(body), "newer", "secret"), body: body, status: 200},
		{name: "respond chooses the status", method: http.MethodPost, header: signature.Header(now, []byte(body), "secret"), body: body,
			respond: func(*receiver.Delivery) int { return 503 }, status: 503},
		{name: "bad signature is 400", method: http.MethodPost, header: signature.Header(now, []byte(body), "wrong"), body: body,
			status: 400, wantErr: signature.ErrSignatureMismatch},
		{name: "changed body is 400", method: http.MethodPost, header: signature.Header(now, []byte(body), "secret"), body: body + " ",
			status: 400, wantErr: signature.ErrSignatureMismatch},
		{name: "stale is 400", method: http.MethodPost, header: signature.Header(now.Add(-10*time.Minute), []byte(body), "secret"), body: body,
			status: 400, wantErr: signature.ErrTimestampOutOfTolerance},
		{name: "no header is 400", method: http.MethodPost, body: body, status: 400, wantErr: signature.ErrMissingHeader},
		{name: "GET is 405", method: http.MethodGet, status: 405},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var seen []receiver.Delivery
			r := &receiver.Receiver{Secrets: []string{"secret"}, Now: func() time.Time { return now }, Respond: tt.respond,
				OnDelivery: func(d receiver.Delivery) { seen = append(seen, d) }}
			req := httptest.NewRequest(tt.method, "/", strings.NewReader(tt.body))
			if tt.header != "" {
				req.Header.Set(signature.HeaderName, tt.header)
			}
			req.Header.Set("X-Webhook-Id", "e1")
			w := httptest.NewRecorder()
			r.ServeHTTP(w, req)
			assert.Equal(t, tt.status, w.Code)
			if tt.method != http.MethodPost {
				assert.Empty(t, r.Deliveries())
				return
			}
			require.Len(t, seen, 1)
			assert.Equal(t, r.Deliveries(), seen)
			assert.Equal(t, "e1", seen[0].EventID)
			assert.Equal(t, tt.body, string(seen[0].Body))
			assert.Equal(t, tt.status, seen[0].Status)
			if tt.wantErr != nil {
				assert.ErrorIs(t, seen[0].Err, tt.wantErr)
			} else {
				assert.NoError(t, seen[0].Err)
			}
		})
	}
}

func TestReceiverBodyLimit(t *testing.T) {
	t.Parallel()
	r := &receiver.Receiver{Secrets: []string{"s"}, MaxBody: 8, NoRecord: true}
	w := httptest.NewRecorder()
	r.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/", strings.NewReader("0123456789")))
	assert.Equal(t, http.StatusRequestEntityTooLarge, w.Code)
	assert.Empty(t, r.Deliveries(), "NoRecord keeps nothing")
}

// TestReceiverExplain: with Explain, a delivery that fails verification
// carries a local diagnosis; one that verifies, or a receiver without
// Explain, carries none.
func TestReceiverExplain(t *testing.T) {
	t.Parallel()
	now := time.Unix(1767225600, 0)
	body := `{"event_type":"prescription.created","event_id":"e1"}`
	tests := []struct {
		name    string
		explain bool
		header  string
		body    string
		codes   []string
	}{
		{name: "a trailing newline", explain: true, header: signature.Header(now, []byte(body), "secret"), body: body + "\n",
			codes: []string{signature.CodeBodyDiffers}},
		{name: "the second secret, a clock 10 minutes behind", explain: true, header: signature.Header(now.Add(10*time.Minute), []byte(body), "newer"), body: body,
			codes: []string{signature.CodeTimestampOutsideTolerance}},
		{name: "an unknown secret", explain: true, header: signature.Header(now, []byte(body), "wrong"), body: body,
			codes: []string{signature.CodeSecretUnknown}},
		{name: "verified", explain: true, header: signature.Header(now, []byte(body), "secret"), body: body},
		{name: "not asked", header: signature.Header(now, []byte(body), "secret"), body: body + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := &receiver.Receiver{Secrets: []string{"secret", "newer"}, Now: func() time.Time { return now }, Explain: tt.explain}
			req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(tt.body))
			req.Header.Set(signature.HeaderName, tt.header)
			r.ServeHTTP(httptest.NewRecorder(), req)
			ds := r.Deliveries()
			require.Len(t, ds, 1)
			if tt.codes == nil {
				assert.Nil(t, ds[0].Diagnosis)
				return
			}
			require.NotNil(t, ds[0].Diagnosis)
			var codes []string
			for _, f := range ds[0].Diagnosis.Findings {
				codes = append(codes, f.Code)
				assert.NotContains(t, f.Message, "secret\"", "a finding never shows a secret")
			}
			assert.Equal(t, tt.codes, codes, "%+v", ds[0].Diagnosis.Findings)
		})
	}
}

// TestReceiverStandard checks a delivery on the Standard Webhooks scheme:
// verified with the whsec_ secret, old and new during a rotation, and
// refused with another secret or another id.
func TestReceiverStandard(t *testing.T) {
	t.Parallel()
	now := time.Unix(1767225600, 0)
	body := []byte(`{"event_type":"prescription.created","event_id":"e1"}`)
	whsec, other := signature.StandardSecret("secret-one"), signature.StandardSecret("secret-two")
	key, err := signature.StandardKey(whsec)
	require.NoError(t, err)
	otherKey, err := signature.StandardKey(other)
	require.NoError(t, err)
	tests := []struct {
		name    string
		keys    [][]byte
		id      string
		status  int
		wantErr error
	}{
		{name: "verified", keys: [][]byte{key}, status: 200},
		{name: "verified during a rotation", keys: [][]byte{otherKey, key}, status: 200},
		{name: "another secret", keys: [][]byte{otherKey}, status: 400, wantErr: signature.ErrSignatureMismatch},
		{name: "another id", keys: [][]byte{key}, id: "e2", status: 400, wantErr: signature.ErrSignatureMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := &receiver.Receiver{Secrets: []string{whsec}, Now: func() time.Time { return now }}
			req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(string(body)))
			signature.StandardHeaders(req.Header, "e1", now, body, tt.keys...)
			if tt.id != "" {
				req.Header.Set(signature.StandardIDHeader, tt.id)
			}
			w := httptest.NewRecorder()
			r.ServeHTTP(w, req)
			assert.Equal(t, tt.status, w.Code)
			d := r.Deliveries()
			require.Len(t, d, 1)
			assert.True(t, d[0].Standard)
			assert.Equal(t, req.Header.Get("webhook-id"), d[0].EventID)
			if tt.wantErr != nil {
				assert.ErrorIs(t, d[0].Err, tt.wantErr)
			} else {
				assert.NoError(t, d[0].Err)
			}
		})
	}
}
