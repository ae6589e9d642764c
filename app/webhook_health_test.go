package app

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage"
)

func TestWebhookRecoverRequest(t *testing.T) {
	tests := []struct {
		since string
		ok    bool
		want  time.Time
	}{
		{since: "2026-11-20T00:00:00Z", ok: true, want: time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)},
		{since: "2026-11-20T01:00:00.5+01:00", ok: true, want: time.Date(2026, 11, 20, 0, 0, 0, 5e8, time.UTC)},
		{since: ""},
		{since: "yesterday"},
		{since: "2026-11-20"},
		{since: "2026-11-20 00:00:00"},
	}
	for _, tt := range tests {
		t.Run(tt.since, func(t *testing.T) {
			r := &WebhookRecoverRequest{Since: tt.since}
			err := r.Validate()
			if !tt.ok {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.True(t, tt.want.Equal(r.since), "%s", r.since)
		})
	}
}

func TestFailedTo(t *testing.T) {
	ev := &storage.Event{Targets: []storage.EventTarget{
		{EndpointID: "a", Status: storage.EventFailed},
		{EndpointID: "b", Status: storage.EventDelivered},
	}}
	tests := []struct {
		endpoint string
		want     bool
	}{{"a", true}, {"b", false}, {"c", false}}
	for _, tt := range tests {
		require.Equal(t, tt.want, failedTo(ev, tt.endpoint), tt.endpoint)
	}
}
