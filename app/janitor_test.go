package app

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage"
)

// purgeRecorder is a store that records PurgeEvents calls.
type purgeRecorder struct {
	storage.Store
	mu      sync.Mutex
	cutoffs []time.Time
}

func (p *purgeRecorder) PurgeEvents(_ context.Context, cutoff time.Time) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cutoffs = append(p.cutoffs, cutoff)
	return 1, nil
}

// TestJanitorPurge: a purge deletes what is older than the retention from
// now; a retention of 0 keeps everything; Stop returns, also before Start.
func TestJanitorPurge(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		retention time.Duration
		want      []time.Time
	}{
		{name: "30 days", retention: 30 * 24 * time.Hour, want: []time.Time{now.Add(-30 * 24 * time.Hour)}},
		{name: "kept forever", retention: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := &purgeRecorder{}
			j := NewJanitor(rec, JanitorOptions{Retention: tt.retention, Now: func() time.Time { return now }})
			j.purge(t.Context())
			require.Equal(t, tt.want, rec.cutoffs)
			j.Stop() // never started
		})
	}
	j := NewJanitor(&purgeRecorder{}, JanitorOptions{Retention: time.Hour, GC: func() error { return nil }, GCEvery: time.Millisecond})
	j.Start()
	j.Stop()
	j.Stop()
}
