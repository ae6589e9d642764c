package badger

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage"
)

// An endpoint stored before signature schemes existed reads as the
// spec's scheme, and one on the default scheme is stored exactly as
// before: the record encoding stays backward-compatible both ways.
func TestEndpointRecordScheme(t *testing.T) {
	old := []byte(`{"id":"e1","partner_id":"p1","url":"https://x.example","secret":"s","created_at":"2026-01-02T03:04:05Z"}`)
	var r endpointRecord
	require.NoError(t, decode(append([]byte{recordV1}, old...), &r))
	e := r.endpoint()
	require.Equal(t, storage.SchemeRxgate, e.SignatureScheme)

	for _, tc := range []struct {
		scheme string
		stored bool
	}{{"", false}, {storage.SchemeRxgate, false}, {storage.SchemeStandard, true}} {
		ep := storage.WebhookEndpoint{ID: "e1", PartnerID: "p1", URL: "https://x.example", Secret: "s",
			CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), SignatureScheme: tc.scheme}
		b, err := json.Marshal(fromEndpoint(&ep))
		require.NoError(t, err)
		require.Equal(t, tc.stored, json.Valid(b) && containsKey(t, b, "signature_scheme"), tc.scheme)
		if !tc.stored {
			require.JSONEq(t, string(old), string(b), "the default scheme's record is the old one")
		}
		var back endpointRecord
		require.NoError(t, json.Unmarshal(b, &back))
		want := tc.scheme
		if want == "" {
			want = storage.SchemeRxgate
		}
		require.Equal(t, want, back.endpoint().SignatureScheme)
	}
}

func containsKey(t *testing.T, b []byte, key string) bool {
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	_, ok := m[key]
	return ok
}

// An endpoint stored before health existed reads as enabled with no
// failing streak; a healthy endpoint's record is the old one, and a
// disabled one's round-trips.
func TestEndpointRecordHealth(t *testing.T) {
	old := []byte(`{"id":"e1","partner_id":"p1","url":"https://x.example","secret":"s","created_at":"2026-01-02T03:04:05Z"}`)
	var r endpointRecord
	require.NoError(t, decode(append([]byte{recordV1}, old...), &r))
	e := r.endpoint()
	require.False(t, e.Disabled())
	require.Nil(t, e.FailingSince)
	b, err := json.Marshal(fromEndpoint(&e))
	require.NoError(t, err)
	require.JSONEq(t, string(old), string(b), "a healthy endpoint's record is the old one")

	at := time.Date(2026, 1, 7, 3, 4, 5, 0, time.UTC)
	since := at.Add(-120 * time.Hour)
	e.FailingSince, e.DisabledAt, e.DisabledReason = &since, &at, storage.ReasonFailing
	b, err = json.Marshal(fromEndpoint(&e))
	require.NoError(t, err)
	var back endpointRecord
	require.NoError(t, json.Unmarshal(b, &back))
	got := back.endpoint()
	require.True(t, got.Disabled())
	require.Equal(t, at, *got.DisabledAt)
	require.Equal(t, since, *got.FailingSince)
	require.Equal(t, storage.ReasonFailing, got.DisabledReason)
}
