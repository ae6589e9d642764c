package postgres_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/queue"
	"github.com/rxgate/rxgate/storage"
	"github.com/rxgate/rxgate/storage/postgres"
	"github.com/rxgate/rxgate/testsuite"
)

// openReplica opens a store in schema under replica id with the given
// heartbeat; the caller closes it (or crashes it).
func openReplica(t testing.TB, schema, id string, beat time.Duration) (*postgres.Store, error) {
	t.Helper()
	return postgres.Open(t.Context(), postgres.Options{
		URL: testsuite.PostgresURL(t), Schema: schema, MaxConns: 4, ConnectTimeout: 10 * time.Second,
		ReplicaID: id, Heartbeat: beat,
	})
}

// mustOpenReplica is openReplica that must succeed, closed when t ends.
func mustOpenReplica(t testing.TB, schema, id string, beat time.Duration) *postgres.Store {
	t.Helper()
	s, err := openReplica(t, schema, id, beat)
	require.NoError(t, err, "opening replica %s", id)
	t.Cleanup(func() { assert.NoError(t, s.Close()) })
	return s
}

// TestRestartedReplicaTakesBackItsLeases: a replica that crashed holding
// leases of an hour, restarted under its id, finds them pending at once
// and delivers them, while another replica's live lease stays its own.
// The heartbeat is an hour too, so it is the dead process's ended
// session, not a stale heartbeat, that lets the restart in; waiting for
// either would fail the test by its bound.
func TestRestartedReplicaTakesBackItsLeases(t *testing.T) {
	testsuite.PostgresURL(t)
	t.Parallel()
	const lease, beat, bound = time.Hour, time.Hour, time.Minute
	delivered := make(chan struct{}, 8)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		delivered <- struct{}{}
	}))
	t.Cleanup(receiver.Close)
	schema := testsuite.NewSchema()
	base := openPostgres(t, postgres.Options{Schema: schema}) // drops the schema at the end
	seedJobs(t, base, receiver.URL, 4)

	dead, err := openReplica(t, schema, "rx-1", beat)
	require.NoError(t, err)
	other := mustOpenReplica(t, schema, "rx-2", beat)
	claimed, err := dead.ClaimJobs(t.Context(), storage.ClaimRequest{Owner: "dead", Now: time.Now(), LeaseFor: lease, Max: 3})
	require.NoError(t, err)
	require.Len(t, claimed.Jobs, 3)
	kept, err := other.ClaimJobs(t.Context(), storage.ClaimRequest{Owner: "other", Now: time.Now(), LeaseFor: lease, Max: 3})
	require.NoError(t, err)
	require.Len(t, kept.Jobs, 1)
	dead.Crash()

	restarted := mustOpenReplica(t, schema, "rx-1", beat)
	pending, leased, err := restarted.ListJobs(t.Context())
	require.NoError(t, err)
	assert.Len(t, pending, 3, "the dead process's leases are pending again as the restart opens")
	require.Len(t, leased, 1)
	assert.Equal(t, kept.Jobs[0].ID, leased[0].ID, "another replica's live lease is not taken")
	for _, j := range pending {
		assert.Zero(t, j.Attempts, "no attempt is counted")
	}

	q, err := queue.New(restarted, queue.Options{
		// Four workers: one endpoint may have two attempts in flight, one
		// of which the other replica's lease takes.
		Workers: 4, Timeout: 5 * time.Second, MaxAttempts: 3, BackoffBase: 10 * time.Millisecond, LeaseFor: lease,
		AllowInsecureLoopback: true, Shared: true,
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	require.NoError(t, err)
	require.NoError(t, q.Start(t.Context()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		assert.NoError(t, q.Stop(ctx))
	})
	guard := time.After(bound)
	for i := range len(claimed.Jobs) {
		select {
		case <-delivered:
		case <-guard:
			t.Fatalf("the restarted replica delivered %d of %d jobs within %s; their leases last %s", i, len(claimed.Jobs), bound, lease)
		}
	}
}

// TestReplicaIDInUse: a second process under a replica id in use is
// refused with one line while the first lives, also when both start
// together, and accepted once the first has closed, or has crashed with
// its heartbeat still fresh. Other ids and anonymous stores share the
// database freely.
func TestReplicaIDInUse(t *testing.T) {
	testsuite.PostgresURL(t)
	t.Parallel()
	const beat = 100 * time.Millisecond
	schema := testsuite.NewSchema()
	openPostgres(t, postgres.Options{Schema: schema}) // drops the schema at the end

	first, err := openReplica(t, schema, "rx-1", beat)
	require.NoError(t, err)
	_, err = openReplica(t, schema, "rx-1", beat)
	require.ErrorIs(t, err, postgres.ErrReplicaInUse)
	assert.NotContains(t, err.Error(), "\n", "one line")
	assert.Contains(t, err.Error(), `"rx-1"`)
	assert.Contains(t, err.Error(), "storage.postgres.replica_id")
	mustOpenReplica(t, schema, "rx-2", beat)
	openPostgres(t, postgres.Options{Schema: schema})
	openPostgres(t, postgres.Options{Schema: schema})

	require.NoError(t, first.Close())
	second, err := openReplica(t, schema, "rx-1", beat)
	require.NoError(t, err, "accepted once the first has closed")
	second.Crash()
	third, err := openReplica(t, schema, "rx-1", time.Hour)
	require.NoError(t, err, "accepted once the first has crashed, its heartbeat still fresh")
	require.NoError(t, third.Close())

	// Two starting together: one runs, the other is refused.
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Go(func() {
			s, err := openReplica(t, schema, "rx-3", beat)
			errs[i] = err
			if err == nil {
				t.Cleanup(func() { assert.NoError(t, s.Close()) })
			}
		})
	}
	wg.Wait()
	if errs[0] == nil {
		errs[0], errs[1] = errs[1], errs[0]
	}
	require.ErrorIs(t, errs[0], postgres.ErrReplicaInUse)
	require.NoError(t, errs[1])
}

// TestReplicaStaleHeartbeat: behind a pooler the session a holder
// recorded may outlive it (a pooled server connection); a start then
// waits until the holder's heartbeat is staleBeats old and takes over.
func TestReplicaStaleHeartbeat(t *testing.T) {
	testsuite.PostgresURL(t)
	t.Parallel()
	const beat = 100 * time.Millisecond
	schema := testsuite.NewSchema()
	base := openPostgres(t, postgres.Options{Schema: schema})
	// A holder that died behind a pooler: its row names a session that
	// lives on (one of base's pooled connections), its heartbeat stopped.
	conn, err := base.Pool().Acquire(t.Context())
	require.NoError(t, err)
	t.Cleanup(conn.Release)
	_, err = conn.Exec(t.Context(), `INSERT INTO replicas (replica_id, process_id, backend_pid, backend_start, started_at, last_seen)
		SELECT 'rx-1', 'gone', pid, backend_start, now(), now() FROM pg_stat_activity WHERE pid = pg_backend_pid()`)
	require.NoError(t, err)

	s, err := openReplica(t, schema, "rx-1", beat)
	require.NoError(t, err, "a heartbeat that stopped is taken over")
	var process string
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT process_id FROM replicas WHERE replica_id = 'rx-1'`).Scan(&process))
	assert.NotEqual(t, "gone", process)
	require.NoError(t, s.Close())
	var n int
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT count(*) FROM replicas`).Scan(&n))
	assert.Zero(t, n, "a closed replica's row is deleted")
}
