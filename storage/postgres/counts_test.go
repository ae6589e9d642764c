package postgres_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage"
	"github.com/rxgate/rxgate/storage/postgres"
	"github.com/rxgate/rxgate/testsuite"
	"github.com/rxgate/rxgate/testsuite/storagetest"
)

// TestCountsEstimateBeyondTheCap: a figure below the exact counts' bound
// is exact; one that reaches it is estimated, flagged so, never below the
// bound nor above what is there; after ANALYZE the estimate is the
// statistics' figure; the oldest due time stays exact.
func TestCountsEstimateBeyondTheCap(t *testing.T) {
	testsuite.PostgresURL(t)
	t.Parallel()
	ctx := t.Context()
	const cap, n = 5, 12
	s := openPostgres(t, postgres.Options{})
	w := storagetest.NewWorld(t, s)
	w.Endpoint(t, s, "https://a.example/hook")
	for range n {
		prescribe(t, s, w)
	}
	pending, _, err := s.ListJobs(ctx)
	require.NoError(t, err)
	require.Len(t, pending, n)
	oldest := pending[0].Due
	for _, j := range pending {
		if j.Due.Before(oldest) {
			oldest = j.Due
		}
	}

	st, err := s.JobStats(ctx)
	require.NoError(t, err)
	require.Equal(t, storage.JobStats{Pending: n, OldestDue: oldest}, st, "below the bound: exact")
	c, err := s.Count(ctx)
	require.NoError(t, err)
	require.False(t, c.Estimated)
	require.Equal(t, n, c.Events[storage.EventPending])

	s.SetCountCap(cap)
	st, err = s.JobStats(ctx)
	require.NoError(t, err)
	require.True(t, st.Estimated)
	require.Equal(t, oldest, st.OldestDue, "the oldest due time is exact")
	require.Zero(t, st.Leased)
	require.GreaterOrEqual(t, st.Pending, cap)
	require.LessOrEqual(t, st.Pending, n)
	c, err = s.Count(ctx)
	require.NoError(t, err)
	require.True(t, c.Estimated)
	require.Equal(t, 1, c.Organizations)
	require.Equal(t, 1, c.Users)
	require.GreaterOrEqual(t, c.Events[storage.EventPending], cap)
	require.LessOrEqual(t, c.Events[storage.EventPending], n)
	require.Zero(t, c.Events[storage.EventDelivered])

	// The sessions that inserted report their rows to the statistics
	// within seconds; once they have, ANALYZE's figure is not moved again.
	require.Eventually(t, func() bool {
		var jobs, events int
		require.NoError(t, s.Pool().QueryRow(ctx, `SELECT
			(SELECT n_tup_ins FROM pg_stat_user_tables WHERE relid = 'jobs'::regclass),
			(SELECT n_tup_ins FROM pg_stat_user_tables WHERE relid = 'events'::regclass)`).Scan(&jobs, &events))
		return jobs == n && events == n
	}, time.Minute, 50*time.Millisecond)
	_, err = s.Pool().Exec(ctx, `ANALYZE jobs, events`)
	require.NoError(t, err)
	st, err = s.JobStats(ctx)
	require.NoError(t, err)
	require.Equal(t, storage.JobStats{Pending: n, OldestDue: oldest, Estimated: true}, st, "the statistics' figure")
	c, err = s.Count(ctx)
	require.NoError(t, err)
	require.Equal(t, n, c.Events[storage.EventPending], "the statistics' figure")
}
