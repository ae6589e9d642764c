package badger

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage"
)

// TestBoundedClaimsMissNothing creates prescriptions from several
// goroutines while one claims with bounded claims only and finishes what it
// gets: every job is claimed without a full claim.
func TestBoundedClaimsMissNothing(t *testing.T) {
	t.Parallel()
	s := openInMemory(t)
	ctx := t.Context()
	rx, _ := queueWorld(t, s)
	const writers, each = 8, 300
	var created atomic.Int64
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for range each {
				p := rx
				if err := s.CreatePrescription(ctx, &p); err != nil {
					t.Error(err)
					return
				}
				created.Add(1)
			}
		})
	}
	claimed := 0
	deadline := time.Now().Add(60 * time.Second)
	first := true
	for claimed < writers*each {
		require.True(t, time.Now().Before(deadline), "claimed %d of %d", claimed, writers*each)
		if !first {
			s.bounded(true)
		}
		first = false
		allCreated := created.Load() == writers*each // before the claim reads
		res, err := s.ClaimJobs(ctx, storage.ClaimRequest{Owner: "q", Now: time.Now(), LeaseFor: time.Minute, Max: 16})
		require.NoError(t, err)
		var out []storage.Outcome
		for _, j := range res.Jobs {
			out = append(out, storage.Outcome{Job: j.Job, Next: storage.EventDelivered})
		}
		if len(out) > 0 {
			_, err := s.RecordOutcomes(ctx, out)
			require.NoError(t, err)
		}
		claimed += len(res.Jobs)
		if len(res.Jobs) == 0 && allCreated {
			pending, _, err := s.ListJobs(ctx)
			require.NoError(t, err)
			if len(pending) > 0 {
				s.jobs.mu.Lock()
				t.Logf("low %v lowered %v committed %d leases %d", s.jobs.low, s.jobs.lowered, s.ts.committed.Load(), len(s.jobs.leases))
				s.jobs.mu.Unlock()
			}
			require.Empty(t, pending, "bounded claims left %d jobs", len(pending))
		}
	}
	wg.Wait()
}
