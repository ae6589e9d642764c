package postgres_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/queue"
	"github.com/rxgate/rxgate/storage/postgres"
	"github.com/rxgate/rxgate/testsuite"
	"github.com/rxgate/rxgate/testsuite/storagetest"
)

// listeners counts the sessions LISTENing on the store's channel.
func listeners(t testing.TB, s *postgres.Store) int {
	t.Helper()
	var n int
	require.NoError(t, s.Pool().QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
		WHERE query = 'LISTEN "' || $1 || '"' AND pid <> pg_backend_pid()`, s.Channel()).Scan(&n))
	return n
}

// TestDeliveriesWithoutListen: with the LISTEN connection off
// (storage.postgres.listen: false, for a pooler in transaction mode), a
// replica's queue still delivers the jobs another replica queues, found
// by polling; no session of theirs LISTENs, while a store with it on
// does.
func TestDeliveriesWithoutListen(t *testing.T) {
	testsuite.PostgresURL(t)
	t.Parallel()
	const n, bound = 5, time.Minute
	delivered := make(chan struct{}, 2*n)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		delivered <- struct{}{}
	}))
	t.Cleanup(receiver.Close)
	schema := testsuite.NewSchema()
	writer := openPostgres(t, postgres.Options{Schema: schema, NoListen: true})
	worker := openPostgres(t, postgres.Options{Schema: schema, NoListen: true})

	q, err := queue.New(worker, queue.Options{
		Workers: 2, Timeout: 5 * time.Second, MaxAttempts: 3, BackoffBase: 10 * time.Millisecond, LeaseFor: time.Minute,
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

	// Queued by the other replica: the second round after the worker's
	// queue has delivered the first and gone back to waiting, so that only
	// a poll finds it.
	w := storagetest.NewWorld(t, writer)
	w.Endpoint(t, writer, receiver.URL)
	guard := time.After(bound)
	for round := range 2 {
		for range n {
			prescribe(t, writer, w)
		}
		for i := range n {
			select {
			case <-delivered:
			case <-guard:
				t.Fatalf("round %d: the worker delivered %d of %d jobs within %s without LISTEN", round, i, n, bound)
			}
		}
	}
	require.Zero(t, listeners(t, worker), "no session LISTENs")

	// The count sees a listener when there is one.
	listening := openPostgres(t, postgres.Options{Schema: schema})
	require.Eventually(t, func() bool { return listeners(t, listening) == 1 }, bound, 10*time.Millisecond)
}
