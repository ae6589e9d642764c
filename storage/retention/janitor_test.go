package retention

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage"
	"github.com/rxgate/rxgate/storage/backup"
	"github.com/rxgate/rxgate/storage/badger"
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

// noGC is a garbage collection that has nothing to do.
type noGC struct{}

func (noGC) CollectGarbage() error { return nil }

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
			j := New(rec, Options{Retention: tt.retention, Now: func() time.Time { return now }})
			j.purge(t.Context())
			require.Equal(t, tt.want, rec.cutoffs)
			j.Stop() // never started
		})
	}
	j := New(&purgeRecorder{}, Options{Retention: time.Hour, GC: noGC{}, GCEvery: time.Millisecond})
	j.Start()
	j.Stop()
	j.Stop()
}

// TestJanitorPurgeAudit: audit entries are purged by their own retention,
// apart from the events'; 0 keeps them forever.
func TestJanitorPurgeAudit(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name      string
		retention time.Duration
		want      []time.Time
	}{
		{name: "seven years", retention: 2555 * 24 * time.Hour, want: []time.Time{now.Add(-2555 * 24 * time.Hour)}},
		{name: "kept forever", retention: 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := &purgeRecorder{}
			var cutoffs []time.Time
			j := New(rec, Options{Retention: time.Hour, AuditRetention: tt.retention, Now: func() time.Time { return now },
				PurgeAudit: func(_ context.Context, cutoff time.Time) (int, error) {
					cutoffs = append(cutoffs, cutoff)
					return 1, nil
				}})
			j.purgeAudit(t.Context())
			require.Equal(t, tt.want, cutoffs)
			require.Empty(t, rec.cutoffs, "the events' purge is apart")
		})
	}
}

// TestJanitorBackups: each scheduled backup is a whole, verified file;
// only the newest BackupKeep stay; a failure is reported, not hidden.
func TestJanitorBackups(t *testing.T) {
	t.Parallel()
	store, err := badger.Open(badger.Options{InMemory: true})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, store.Close()) })
	dir := t.TempDir()
	at := time.Date(2026, 11, 25, 1, 0, 0, 0, time.UTC)
	var results []error
	j := New(store, Options{Backup: store, BackupDir: dir, BackupEvery: time.Hour, BackupKeep: 2,
		Now:      func() time.Time { at = at.Add(time.Hour); return at },
		OnBackup: func(_ time.Time, err error) { results = append(results, err) }})
	for range 3 {
		require.NoError(t, j.backup(t.Context()))
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
		f, err := os.Open(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		_, err = backup.Verify(f)
		require.NoError(t, f.Close())
		require.NoError(t, err, e.Name())
	}
	require.Equal(t, []string{backup.FileName(at.Add(-time.Hour)), backup.FileName(at)}, names, "the newest two, and no temporary file")
	require.Equal(t, []error{nil, nil, nil}, results)

	require.Equal(t, at, backup.Last(dir), "the schedule runs from the newest backup")
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".rxgate-backup-123.tmp"), []byte("half"), 0o600))
	require.NoError(t, j.backup(t.Context()))
	_, unfinished, err := backup.Scheduled(dir)
	require.NoError(t, err)
	require.Empty(t, unfinished, "what a killed backup left is removed")
	require.True(t, backup.Last(t.TempDir()).IsZero())

	j.opts.BackupDir = filepath.Join(dir, "missing")
	require.Error(t, j.backup(t.Context()))
	require.Len(t, results, 5)
	require.Error(t, results[4], "a failed backup is reported")
}
