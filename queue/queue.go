package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/rxgate/rxgate/config"
	"github.com/rxgate/rxgate/storage"
)

const (
	// idlePoll is the longest the dispatcher waits without looking for due
	// work. Notify and finished attempts wake it sooner.
	idlePoll = 2 * time.Second
	// errorPause is the wait after the store failed a claim.
	errorPause = time.Second
	// persistTimeout bounds recording an attempt's outcome and releasing
	// leases; both run detached from any cancelled context.
	persistTimeout = 30 * time.Second
	// claimAhead is how many jobs per allowed attempt in flight are
	// claimed: 2 keeps one claimed job waiting behind each attempt.
	claimAhead = 2
	// claimWindow bounds how long before the last claim a job it could not
	// see yet may be due (storage.ClaimRequest.Since): far more than a
	// transaction takes from reading the clock to committing.
	claimWindow = 250 * time.Millisecond
	// fullClaimEvery is how often a claim looks at every pending job: for
	// one committed later than claimWindow, or queued for an endpoint
	// since deleted. Start's first claim is full too.
	fullClaimEvery = 10 * time.Second
)

// Options are a Queue's dependencies.
type Options struct {
	// Store holds the jobs and events. One Queue per Store: two would take
	// each other's leases for dead ones at Start.
	Store *storage.Store
	// Config is the webhooks section.
	Config config.Webhooks
	// Logger receives delivery logs; nil discards them.
	Logger *slog.Logger
	// Clock is the queue's time; nil means SystemClock.
	Clock Clock
	// Backoff spaces attempts; nil means Exponential from Config with
	// random jitter.
	Backoff Backoff
	// UserAgent is sent with every delivery; "" means "rxgate".
	UserAgent string
	// Observe, when set, is called after each attempt's outcome is
	// recorded, from the worker that made it.
	Observe func(Result)
}

// Result is a recorded attempt, as Options.Observe sees it.
type Result struct {
	Job     storage.Job
	Attempt storage.Attempt
	// Outcome is "delivered", "retry" or "failed".
	Outcome string
	// RetryAt is when the next attempt is due, for Outcome "retry".
	RetryAt time.Time
	// Event is the event after the attempt was recorded.
	Event *storage.Event
}

// Queue delivers events: a dispatcher claims due jobs and hands them to a
// pool of workers. Start it once and Stop it once.
type Queue struct {
	store     *storage.Store
	cfg       config.Webhooks
	log       *slog.Logger
	clock     Clock
	backoff   Backoff
	userAgent string
	observe   func(Result)
	client    *http.Client
	leaseFor  time.Duration
	// perEndpoint is the most attempts one endpoint may have in flight.
	perEndpoint int

	// runCtx is cancelled when Stop gives up waiting: in-flight attempts
	// are then abandoned and their jobs released.
	runCtx    context.Context
	cancelRun context.CancelFunc
	wake      chan struct{}
	stop      chan struct{}
	work      chan storage.ClaimedJob
	dispDone  chan struct{}
	workers   sync.WaitGroup

	// Only the dispatcher goroutine touches these: jobs claimed ahead of a
	// free worker, by endpoint, in due order. Claiming ahead takes the
	// claim's disk write off the path from one attempt to the next.
	ahead      map[string][]storage.ClaimedJob
	aheadCount int
	lastServed string // the endpoint last handed a job: turns start after it
	// low is, per endpoint, the earliest due time a pending job of it may
	// have, as the last claim saw it: storage.ClaimRequest.Since.
	low map[string]time.Time

	// mu guards the fields below. No other lock is taken while it is held.
	mu        sync.Mutex
	started   bool
	stopping  bool
	inflight  map[string]int // endpoint id -> jobs handed to workers, unfinished
	total     int            // sum of inflight
	unstarted []storage.Job  // claimed, never attempted: released by Stop
}

// New prepares a Queue; Start runs it.
func New(opts Options) (*Queue, error) {
	if opts.Store == nil {
		return nil, errors.New("queue: a store is required")
	}
	cfg := opts.Config
	if cfg.Workers < 1 || cfg.Timeout <= 0 || cfg.MaxAttempts < 1 || cfg.BackoffBase <= 0 {
		return nil, errors.New("queue: invalid webhooks configuration")
	}
	client, err := newClient(cfg.CAFile, cfg.Workers, cfg.Timeout)
	if err != nil {
		return nil, err
	}
	q := &Queue{
		store:       opts.Store,
		cfg:         cfg,
		log:         opts.Logger,
		clock:       opts.Clock,
		backoff:     opts.Backoff,
		userAgent:   opts.UserAgent,
		observe:     opts.Observe,
		client:      client,
		leaseFor:    2*cfg.Timeout + time.Minute,
		perEndpoint: (cfg.Workers + 1) / 2,
		wake:        make(chan struct{}, 1),
		stop:        make(chan struct{}),
		work:        make(chan storage.ClaimedJob, cfg.Workers),
		dispDone:    make(chan struct{}),
		inflight:    make(map[string]int),
		ahead:       make(map[string][]storage.ClaimedJob),
		low:         make(map[string]time.Time),
	}
	if q.log == nil {
		q.log = slog.New(slog.DiscardHandler)
	}
	if q.clock == nil {
		q.clock = SystemClock{}
	}
	if q.backoff == nil {
		q.backoff = Exponential{Base: cfg.BackoffBase, Max: max(cfg.BackoffMax, cfg.BackoffBase), Rand: rand.Float64}
	}
	if q.userAgent == "" {
		q.userAgent = "rxgate"
	}
	q.runCtx, q.cancelRun = context.WithCancel(context.Background())
	return q, nil
}

// Start makes every leased job due again and starts the dispatcher and the
// workers. A lease found at Start belongs to a process that died (Badger's
// directory lock keeps any other live process off the store), so its
// attempt is made again: delivery is at least once. Start after Stop does
// nothing.
func (q *Queue) Start(ctx context.Context) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.started || q.stopping {
		return nil
	}
	now := q.clock.Now()
	n, err := q.store.ReclaimJobs(ctx, now.Add(100*365*24*time.Hour), now)
	if err != nil {
		return fmt.Errorf("queue: start: %w", err)
	}
	if n > 0 {
		q.log.Info("webhook attempts interrupted by the last shutdown are due again", "jobs", n)
	}
	q.started = true
	for range q.cfg.Workers {
		q.workers.Add(1)
		go q.worker()
	}
	go q.dispatch()
	return nil
}

// Notify tells the dispatcher that jobs may have been queued, so that it
// looks now instead of at its next poll. It never blocks.
func (q *Queue) Notify() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// Stop stops claiming, lets the workers finish the attempts in flight and
// returns the jobs they never started to pending. When ctx ends first,
// attempts still in flight are abandoned and their jobs returned too,
// without counting them. Stop returns when every goroutine of the queue has
// ended; the store may then be closed.
func (q *Queue) Stop(ctx context.Context) error {
	q.mu.Lock()
	if q.stopping {
		q.mu.Unlock()
		return nil
	}
	q.stopping = true
	started := q.started
	q.mu.Unlock()
	defer q.cancelRun()
	if !started {
		return nil
	}
	// 1. Stop claiming; the dispatcher closes the work channel as it ends.
	close(q.stop)
	<-q.dispDone
	// 2. Wait for the workers: they finish what is in flight and set aside
	// what they had not started.
	done := make(chan struct{})
	go func() { q.workers.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		q.cancelRun()
		<-done
	}
	if c, ok := q.client.Transport.(schemeRouter); ok {
		c.closeIdle()
	}
	// 3. Release the leases of unstarted jobs, even if ctx has ended.
	q.mu.Lock()
	unstarted := q.unstarted
	q.unstarted = nil
	q.mu.Unlock()
	if len(unstarted) == 0 {
		return nil
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), persistTimeout)
	defer cancel()
	if err := q.store.ReleaseJobs(rctx, unstarted); err != nil {
		return fmt.Errorf("queue: stop: %w", err)
	}
	return nil
}

// Limits. An endpoint has at most perEndpoint attempts in flight and as
// many claimed ahead; the queue has at most Workers in flight and as many
// ahead.

// allowAhead is how many more jobs of the endpoint may be claimed now. The
// dispatcher calls it (through ClaimJobs) from its own goroutine.
func (q *Queue) allowAhead(endpointID string) int {
	q.mu.Lock()
	in := q.inflight[endpointID]
	q.mu.Unlock()
	return claimAhead*q.perEndpoint - in - len(q.ahead[endpointID])
}

// since is where a bounded claim starts looking at an endpoint's jobs: the
// earlier of the first job the last claim left pending and that claim's
// time less claimWindow; from its first job for an endpoint no claim has
// looked at yet.
func (q *Queue) since(endpointID string) time.Time {
	return q.low[endpointID] // zero when absent
}

// handOut gives jobs claimed ahead to free workers, endpoints taking turns,
// none past perEndpoint attempts in flight. The last free worker goes only
// to an endpoint with nothing in flight: however many endpoints hang, one
// worker stays for the others, so their backlog never waits behind a hang.
func (q *Queue) handOut() {
	if q.aheadCount == 0 {
		return
	}
	turns := make([]string, 0, len(q.ahead))
	for e := range q.ahead {
		turns = append(turns, e)
	}
	slices.Sort(turns)
	first, _ := slices.BinarySearch(turns, q.lastServed+"\x00")
	turns = append(turns[first:], turns[:first]...)
	q.mu.Lock()
	defer q.mu.Unlock()
	for progress := true; progress && q.total < q.cfg.Workers; {
		progress = false
		for _, e := range turns {
			if q.total >= q.cfg.Workers || q.inflight[e] >= q.perEndpoint || len(q.ahead[e]) == 0 {
				continue
			}
			if q.inflight[e] > 0 && q.total == q.cfg.Workers-1 {
				continue // the last worker is kept for an idle endpoint
			}
			j := q.ahead[e][0]
			if q.ahead[e] = q.ahead[e][1:]; len(q.ahead[e]) == 0 {
				delete(q.ahead, e)
			}
			q.aheadCount--
			q.inflight[e]++
			q.total++
			q.lastServed = e
			q.work <- j // never blocks: the channel holds Workers jobs
			progress = true
		}
	}
}

// dispatch claims due jobs ahead of the workers and hands them out, and
// otherwise waits for the next due time, a Notify, a finished attempt or
// Stop. It is the only claimer, and it owns the work channel: when it ends
// it sets aside the jobs it holds and closes the channel.
func (q *Queue) dispatch() {
	defer close(q.dispDone)
	defer func() {
		q.mu.Lock()
		for _, js := range q.ahead {
			for _, j := range js {
				q.unstarted = append(q.unstarted, j.Job)
			}
		}
		q.mu.Unlock()
		close(q.work)
	}()
	reclaimAt := q.clock.Now().Add(q.leaseFor)
	var fullAt time.Time // the next full claim; zero: the first is full
	for {
		select {
		case <-q.stop:
			return
		default:
		}
		now := q.clock.Now()
		if !now.Before(reclaimAt) {
			// Safety net: a lease outlives its attempt only if a worker
			// overran it; make such jobs due again.
			if n, err := q.store.ReclaimJobs(q.runCtx, now, now); err != nil {
				q.log.Error("reclaiming expired webhook leases failed", "error", err)
			} else if n > 0 {
				q.log.Warn("webhook leases expired; attempts are due again", "jobs", n)
			}
			reclaimAt = now.Add(q.leaseFor)
		}
		wait := min(idlePoll, reclaimAt.Sub(now))
		q.handOut()
		q.mu.Lock()
		room := claimAhead*q.cfg.Workers - q.total - q.aheadCount
		q.mu.Unlock()
		// Hanging endpoints can fill the queue-wide room with jobs they
		// will not start soon; the per-endpoint allowance (allowAhead)
		// still bounds each endpoint, so always claim at least one, which
		// only an endpoint below its allowance can get.
		room = max(room, 1)
		if room > 0 {
			since := q.since
			if !now.Before(fullAt) {
				since, fullAt = nil, now.Add(fullClaimEvery)
			}
			res, err := q.store.ClaimJobs(q.runCtx, storage.ClaimRequest{
				Now: now, LeaseFor: q.leaseFor, Max: room, Allow: q.allowAhead, After: q.lastServed, Since: since,
			})
			for e, first := range res.Pending {
				// The claim saw nothing of e pending before first. A job it
				// did not see commits after it read, so is due no earlier
				// than now less a transaction's time (claimWindow).
				from := now.Add(-claimWindow)
				if !first.IsZero() && first.Before(from) {
					from = first
				}
				q.low[e] = from
			}
			if err != nil {
				q.log.Error("claiming webhook jobs failed", "error", err)
				wait = errorPause
			}
			for _, j := range res.Jobs {
				q.ahead[j.EndpointID] = append(q.ahead[j.EndpointID], j)
				q.aheadCount++
			}
			q.handOut()
			if !res.NextDue.IsZero() {
				wait = min(wait, res.NextDue.Sub(now))
			}
		}
		if wait <= 0 {
			continue
		}
		select {
		case <-q.stop:
			return
		case <-q.wake:
		case <-q.clock.Until(now.Add(wait)):
		}
	}
}

// worker makes the attempts the dispatcher hands it until the work channel
// closes. Once Stop has begun it starts none: it sets them aside for Stop
// to release.
func (q *Queue) worker() {
	defer q.workers.Done()
	for j := range q.work {
		q.mu.Lock()
		stopping := q.stopping
		if stopping {
			q.unstarted = append(q.unstarted, j.Job)
		}
		q.mu.Unlock()
		if !stopping {
			q.attempt(j)
		}
		q.mu.Lock()
		q.inflight[j.EndpointID]--
		if q.inflight[j.EndpointID] <= 0 {
			delete(q.inflight, j.EndpointID)
		}
		q.total--
		q.mu.Unlock()
		q.Notify()
	}
}

// attempt makes one attempt of j and records its outcome with the job's
// next state in one transaction.
func (q *Queue) attempt(j storage.ClaimedJob) {
	now := q.clock.Now()
	a := storage.Attempt{AttemptedAt: now, EndpointID: j.EndpointID}
	var resp response
	out := outcomeFailed
	switch {
	case j.Endpoint == nil:
		a.Error = "webhook endpoint deleted"
	case j.Payload == nil:
		a.Error = "event not found"
	default:
		if err := CheckURL(j.Endpoint.URL, q.cfg.AllowInsecureLoopback); err != nil {
			// Registered under a configuration that has since changed.
			a.Error = err.Error()
			break
		}
		h := deliveryHeader(j.EventID, q.userAgent, now, j.Payload, j.Endpoint.SigningSecrets(now))
		resp = send(q.runCtx, q.client, j.Endpoint.URL, j.Payload, h, q.cfg.Timeout, now)
		if resp.status == 0 && q.runCtx.Err() != nil {
			// Stop gave up waiting: the endpoint did not fail; this attempt
			// does not count.
			q.release(j.Job)
			return
		}
		out = classify(resp)
		a.StatusCode = resp.status
		a.Error = describe(resp, q.cfg.Timeout)
		a.DurationMS = resp.duration.Milliseconds()
	}
	made := j.Attempts + 1
	if out == outcomeRetry && made >= q.cfg.MaxAttempts {
		out = outcomeFailed
	}
	ctx, cancel := context.WithTimeout(context.Background(), persistTimeout)
	defer cancel()
	var (
		ev      *storage.Event
		err     error
		retryAt time.Time
	)
	switch out {
	case outcomeDelivered:
		ev, err = q.store.CompleteJob(ctx, &j.Job, a)
	case outcomeRetry:
		delay := q.backoff.Delay(made)
		if resp.retryAfter > delay {
			delay = min(resp.retryAfter, max(q.cfg.BackoffMax, delay))
		}
		// The wait runs from the end of the attempt: a timed-out attempt
		// does not eat into it.
		retryAt = q.clock.Now().Add(delay)
		ev, err = q.store.RetryJob(ctx, &j.Job, a, retryAt)
	default:
		ev, err = q.store.ArchiveJob(ctx, &j.Job, a)
	}
	if err != nil {
		// The job stays leased: it is attempted again after a restart or
		// when its lease expires.
		q.log.Error("recording a webhook attempt failed", "event_id", j.EventID, "endpoint_id", j.EndpointID, "error", err)
		return
	}
	switch out {
	case outcomeFailed:
		q.log.Warn("webhook delivery failed permanently; it is not re-sent unless replayed",
			"event_id", j.EventID, "endpoint_id", j.EndpointID, "attempts", made, "status_code", a.StatusCode, "error", a.Error)
	case outcomeRetry:
		q.log.Info("webhook attempt failed; retrying", "event_id", j.EventID, "endpoint_id", j.EndpointID,
			"attempt", made, "status_code", a.StatusCode, "error", a.Error, "retry_at", retryAt)
	default:
		q.log.Debug("webhook delivered", "event_id", j.EventID, "endpoint_id", j.EndpointID, "attempt", made)
	}
	if q.observe != nil {
		q.observe(Result{Job: j.Job, Attempt: a, Outcome: out.String(), RetryAt: retryAt, Event: ev})
	}
}

// release returns an abandoned job to pending without counting an attempt.
func (q *Queue) release(j storage.Job) {
	ctx, cancel := context.WithTimeout(context.Background(), persistTimeout)
	defer cancel()
	if err := q.store.ReleaseJobs(ctx, []storage.Job{j}); err != nil {
		q.log.Error("releasing an abandoned webhook attempt failed", "event_id", j.EventID, "error", err)
	}
}
