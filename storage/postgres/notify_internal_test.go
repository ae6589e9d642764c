package postgres

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestListenerSkipsOwnNotify: PostgreSQL delivers a NOTIFY to every
// listener, the sender's own process's too, whose queues were woken
// already (queued). A store's listener passes on the NOTIFYs of another
// process and skips its own: sent first, the store's own never reaches
// its queues, while the other's, sent after it on the same channel, does.
func TestListenerSkipsOwnNotify(t *testing.T) {
	ctx := t.Context()
	schema := fmt.Sprintf("rxgate_notify_%016x", rand.Uint64())
	a := openInternal(t, Options{Schema: schema})
	b := openInternal(t, Options{Schema: schema})
	var mu sync.Mutex
	var seen []string
	got := make(chan struct{}, 16)
	f := func(payload string) {
		mu.Lock()
		seen = append(seen, payload)
		mu.Unlock()
		got <- struct{}{}
	}
	a.onWake.Store(&f)
	// Both listeners are up once a NOTIFY of b's reaches a.
	for ready := false; !ready; {
		require.NoError(t, b.notify(ctx, "ready"))
		select {
		case <-got:
			ready = true
		case <-time.After(100 * time.Millisecond): // a's listener is still connecting: send again
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
	}
	mu.Lock()
	seen = nil
	mu.Unlock()
	for len(got) > 0 {
		<-got
	}

	require.NoError(t, a.notify(ctx, "own"))
	require.NoError(t, b.notify(ctx, "other"))
	for {
		select {
		case <-got:
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
		mu.Lock()
		done := slices.Contains(seen, "other")
		s := slices.Clone(seen)
		mu.Unlock()
		if done {
			require.NotContains(t, s, "own", "a's own NOTIFY is skipped")
			return
		}
	}
}

// TestWakeTargetsTakeTurns: a commit's NOTIFY names one other live
// replica, each in turn, never this process's own id nor a replica whose
// heartbeat is stale; with no other live replica it names none, which
// wakes every listener.
func TestWakeTargetsTakeTurns(t *testing.T) {
	ctx := t.Context()
	s := openInternal(t, Options{ReplicaID: "r1"})
	_, err := s.pool.Exec(ctx, `INSERT INTO replicas (replica_id, process_id, backend_pid, started_at, last_seen) VALUES
		('r2', 'p2', 0, now(), now()), ('r3', 'p3', 0, now(), now()), ('r4', 'p4', 0, now(), now() - interval '1 hour')`)
	require.NoError(t, err)

	var w wakeTargets
	var named []string
	for range 4 {
		named = append(named, w.next(ctx, s))
	}
	require.Contains(t, [][]string{{"r2", "r3", "r2", "r3"}, {"r3", "r2", "r3", "r2"}}, named)

	_, err = s.pool.Exec(ctx, `DELETE FROM replicas WHERE replica_id <> 'r1'`)
	require.NoError(t, err)
	w.at = time.Time{} // read the replicas again
	require.Empty(t, w.next(ctx, s), "no other live replica: every listener wakes")
}

// openInternal opens a store in the database RXGATE_TEST_POSTGRES_URL
// names, on opts.Schema or a schema of its own, and drops the schema and
// closes the store at the test's end; without the URL the test skips.
func openInternal(t *testing.T, opts Options) *Store {
	t.Helper()
	url := os.Getenv("RXGATE_TEST_POSTGRES_URL")
	if url == "" {
		t.Skip("needs PostgreSQL: set RXGATE_TEST_POSTGRES_URL (e.g. postgres://postgres@127.0.0.1:5432/test)")
	}
	opts.URL, opts.ConnectTimeout = url, 10*time.Second
	if opts.Schema == "" {
		opts.Schema = fmt.Sprintf("rxgate_internal_%016x", rand.Uint64())
	}
	s, err := Open(t.Context(), opts)
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = s.DropSchema(context.Background())
		_ = s.Close()
	})
	return s
}
