package queue_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/queue"
	"github.com/rxgate/rxgate/storage"
)

// cutOff is a store the queue loses touch with while cut is set: claims,
// renewals and reclaims fail, as they would for a replica whose network to
// the database dropped. Releases go through and are reported on released.
type cutOff struct {
	storage.Backend
	cut      atomic.Bool
	released chan []storage.Job
}

var errCutOff = errors.New("the store cannot be reached")

func (c *cutOff) ClaimJobs(ctx context.Context, req storage.ClaimRequest) (storage.ClaimResult, error) {
	if c.cut.Load() {
		return storage.ClaimResult{}, errCutOff
	}
	return c.Backend.ClaimJobs(ctx, req)
}

func (c *cutOff) RenewLeases(ctx context.Context, jobs []storage.Job, until time.Time) ([]string, error) {
	if c.cut.Load() {
		return nil, errCutOff
	}
	return c.Backend.RenewLeases(ctx, jobs, until)
}

func (c *cutOff) ReclaimExpired(ctx context.Context, now time.Time) (int, error) {
	if c.cut.Load() {
		return 0, errCutOff
	}
	return c.Backend.ReclaimExpired(ctx, now)
}

func (c *cutOff) ReleaseJobs(ctx context.Context, jobs []storage.Job) error {
	err := c.Backend.ReleaseJobs(ctx, jobs)
	c.released <- jobs
	return err
}

// TestLapsedLeaseIsNotAttempted: a queue whose renewals fail lets the
// leases of the jobs it claimed ahead lapse, and a worker that gets one
// after its lease has lapsed (by the queue's own clock) does not attempt
// it, since another replica may have taken it back and be attempting it:
// it releases the job instead.
func TestLapsedLeaseIsNotAttempted(t *testing.T) {
	t.Parallel()
	entered, unblock, again := make(chan struct{}), make(chan struct{}), make(chan struct{}, 1)
	var once sync.Once
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if requests.Add(1) == 1 {
			close(entered)
			select {
			case <-unblock:
			case <-r.Context().Done():
			}
		} else {
			select {
			case again <- struct{}{}:
			default:
			}
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { once.Do(func() { close(unblock) }) })
	base := newHarness(t, withFakeClock(), withoutStart())
	store := &cutOff{Backend: base.store, released: make(chan []storage.Job, 16)}
	// One worker: the second job waits, claimed ahead, behind the first's
	// attempt. The attempt's timeout is real time, the lease (2 timeouts
	// and a minute) fake.
	h := newHarness(t, withStore(store), func(h *harness) { h.clock = base.clock },
		withOptions(func(o *queue.Options) { o.Workers, o.Timeout = 1, time.Minute }))
	h.endpoint(srv.URL)
	h.prescribe()
	<-entered
	second := h.prescribe()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, leased := h.jobs(); len(leased) == 2 {
			break
		}
		require.True(t, time.Now().Before(deadline), "the second job was not claimed ahead within 20s")
		time.Sleep(time.Millisecond)
	}

	store.cut.Store(true)
	h.clock.Advance(4 * time.Minute) // past both leases; no renewal gets through
	once.Do(func() { close(unblock) })
	select {
	case jobs := <-store.released:
		require.Len(t, jobs, 1)
		assert.Equal(t, second, jobs[0].EventID, "the lapsed job was released")
	case <-again:
		t.Fatal("the job whose lease lapsed was sent")
	case <-time.After(20 * time.Second):
		t.Fatal("the job whose lease lapsed was neither released nor attempted within 20s")
	}
	assert.EqualValues(t, 1, requests.Load(), "the job whose lease lapsed was not sent")
}
