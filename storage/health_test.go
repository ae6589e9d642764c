package storage_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage"
)

func TestApplyHealth(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { v := t0.Add(d); return &v }
	tests := []struct {
		name         string
		since        *time.Time
		c            storage.HealthChange
		wantSince    *time.Time
		changed, dis bool
	}{
		{name: "first failure", c: storage.HealthChange{Since: t0, Last: t0, DisableAfter: time.Hour}, wantSince: at(0), changed: true},
		{name: "later failure", since: at(0), c: storage.HealthChange{Since: t0.Add(time.Minute), Last: t0.Add(time.Minute), DisableAfter: time.Hour}, wantSince: at(0)},
		{name: "success", since: at(0), c: storage.HealthChange{Reset: true}, changed: true},
		{name: "success when healthy", c: storage.HealthChange{Reset: true}},
		{name: "success then failure", since: at(0), c: storage.HealthChange{Reset: true, Since: t0.Add(time.Hour), Last: t0.Add(time.Hour)}, wantSince: at(time.Hour), changed: true},
		{name: "period reached", since: at(0), c: storage.HealthChange{Since: t0.Add(time.Hour), Last: t0.Add(time.Hour), DisableAfter: time.Hour}, wantSince: at(0), changed: true, dis: true},
		{name: "period reached, off", since: at(0), c: storage.HealthChange{Since: t0.Add(time.Hour), Last: t0.Add(time.Hour)}, wantSince: at(0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := storage.WebhookEndpoint{FailingSince: tt.since}
			changed, dis := e.ApplyHealth(tt.c)
			require.Equal(t, tt.changed, changed)
			require.Equal(t, tt.dis, dis)
			require.Equal(t, tt.wantSince, e.FailingSince)
			require.Equal(t, tt.dis, e.Disabled())
		})
	}
}

func TestHealthChanges(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	o := func(ep string, d time.Duration, next string) storage.Outcome {
		return storage.Outcome{Job: storage.Job{EndpointID: ep}, Attempt: storage.Attempt{AttemptedAt: t0.Add(d)}, Next: next, DisableAfter: time.Hour}
	}
	outcomes := []storage.Outcome{
		o("a", 0, storage.EventPending),
		o("b", 0, storage.EventDelivered),
		o("a", time.Second, storage.EventDelivered),
		o("a", 2*time.Second, storage.EventFailed),
		o("a", 3*time.Second, storage.EventPending),
		o("c", 0, storage.EventPending), // lease lost: not recorded
	}
	got := storage.HealthChanges(outcomes, func(i int) bool { return i != 5 })
	require.Equal(t, []storage.HealthChange{
		{Endpoint: "a", Reset: true, Since: t0.Add(2 * time.Second), Last: t0.Add(3 * time.Second), DisableAfter: time.Hour},
		{Endpoint: "b", Reset: true, DisableAfter: time.Hour},
	}, got)
}
