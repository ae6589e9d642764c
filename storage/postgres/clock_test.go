package postgres_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage"
	"github.com/rxgate/rxgate/storage/postgres"
	"github.com/rxgate/rxgate/testsuite"
	"github.com/rxgate/rxgate/testsuite/storagetest"
)

// seedJobs gives s a validated organization whose partner has an endpoint
// at url, and n prescriptions: n pending jobs.
func seedJobs(t testing.TB, s storage.Store, url string, n int) {
	t.Helper()
	w := storagetest.NewWorld(t, s)
	w.Endpoint(t, s, url)
	for i := range n {
		rx := w.Prescription()
		rx.PrescriptionItem = storage.PrescriptionItem{ItemName: fmt.Sprint("Item ", i), Quantity: "1"}
		require.NoError(t, s.CreatePrescription(t.Context(), &rx))
	}
}

// dbNow reads the database's clock.
func dbNow(t testing.TB, s *postgres.Store) time.Time {
	t.Helper()
	var now time.Time
	require.NoError(t, s.Pool().QueryRow(t.Context(), `SELECT clock_timestamp()`).Scan(&now))
	return now
}

// TestLeasesOnTheDatabaseClock: two replicas whose clocks disagree by an
// hour agree on leases, because leases are written and judged on the
// database's clock: the lease a replica whose clock lags takes is not
// expired for the others, a replica whose clock runs ahead does not take
// back a live lease, and a lease that has lapsed by the database's clock
// is taken back whatever the replicas' clocks say.
func TestLeasesOnTheDatabaseClock(t *testing.T) {
	testsuite.PostgresURL(t)
	t.Parallel()
	tests := []struct {
		name                   string
		claimerSkew, otherSkew time.Duration
	}{
		{name: "the claimer's clock lags", claimerSkew: -time.Hour},
		{name: "the other's clock runs ahead", otherSkew: time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			schema := testsuite.NewSchema()
			claimer := openPostgres(t, postgres.Options{Schema: schema})
			other := openPostgres(t, postgres.Options{Schema: schema})
			claimer.SkewClock(tt.claimerSkew)
			other.SkewClock(tt.otherSkew)
			seedJobs(t, claimer, "https://receiver.example", 1)

			const leaseFor = time.Minute
			before := dbNow(t, claimer)
			res, err := claimer.ClaimJobs(ctx, storage.ClaimRequest{Owner: "claimer", Now: time.Now().Add(tt.claimerSkew + time.Minute), LeaseFor: leaseFor, Max: 1})
			require.NoError(t, err)
			after := dbNow(t, claimer)
			require.Len(t, res.Jobs, 1)
			job := res.Jobs[0].Job
			// The claim asked for jobs due a minute ahead: the lease runs
			// from the database's now, a minute ahead too.
			start := job.LeasedUntil.Add(-leaseFor - time.Minute)
			assert.False(t, start.Before(before.Truncate(time.Microsecond)) || start.After(after),
				"the lease runs from the database's clock: it ends at %s, the database read %s to %s", job.LeasedUntil, before, after)

			n, err := other.ReclaimExpired(ctx, time.Now().Add(tt.otherSkew))
			require.NoError(t, err)
			assert.Zero(t, n, "a live lease was taken back")

			// Renewed to end now: lapsed by the database's clock.
			lost, err := claimer.RenewLeases(ctx, []storage.Job{job}, time.Now().Add(tt.claimerSkew))
			require.NoError(t, err)
			require.Empty(t, lost)
			n, err = other.ReclaimExpired(ctx, time.Now().Add(tt.otherSkew))
			require.NoError(t, err)
			assert.Equal(t, 1, n, "the lapsed lease was taken back")
		})
	}
}
