package queue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/rxgate/rxgate/queue/signature"
	"github.com/rxgate/rxgate/storage"
)

const (
	// idlePoll is the longest the dispatcher waits without looking for due
	// work. The job store's watch and recorded outcomes wake it sooner.
	idlePoll = 2 * time.Second
	// errorPause is the wait after the store failed a claim.
	errorPause = time.Second
	// persistTimeout bounds recording an attempt's outcome and releasing
	// leases; both run detached from any cancelled context.
	persistTimeout = 30 * time.Second
	// claimAhead is how many jobs per allowed attempt in flight are
	// claimed: 2 keeps one claimed job waiting behind each attempt, which
	// takes the claim's write off the path from one attempt to the next.
	// A queue that shares its store with other processes claims none ahead
	// (Options.Shared).
	claimAhead = 2
	// renewals is how many times a lease is renewed within its length:
	// a lease outlives two missed renewals.
	renewals = 3
	// slowOutcomeWrite is how long an outcome write may take and still
	// count as one that rides a busy store's batches (busy): a few of its
	// commits, well under a memtable swap's stall.
	slowOutcomeWrite = 20 * time.Millisecond
)

// Options configure a Queue.
type Options struct {
	// Workers is how many attempts may be in flight at once; one endpoint
	// gets at most half of them, rounded up.
	Workers int
	// Timeout bounds one attempt (spec 6.3: 10 seconds).
	Timeout time.Duration
	// MaxAttempts is how many attempts a delivery gets (spec 6.3: 3).
	MaxAttempts int
	// LeaseFor is how long a claim lasts unless renewed; 0 means twice
	// Timeout plus a minute. It is renewed every third of it.
	LeaseFor time.Duration
	// BackoffBase is the wait after the first failed attempt; each further
	// one doubles it, up to BackoffMax.
	BackoffBase, BackoffMax time.Duration
	// CAFile names PEM certificates trusted besides the system roots.
	CAFile string
	// AllowInsecureLoopback allows plain-http endpoints on loopback
	// addresses; without it no delivery connects to a loopback address,
	// over https either (see Destinations).
	AllowInsecureLoopback bool
	// AllowedNetworks are networks deliveries may connect to although
	// they are private, link-local or otherwise not public (see
	// Destinations): an on-premise operator's own receivers.
	AllowedNetworks []netip.Prefix
	// Logger receives delivery logs; nil discards them.
	Logger *slog.Logger
	// Clock is the queue's time; nil means SystemClock.
	Clock Clock
	// SignatureNow, when set, is the clock a signature's timestamp is read
	// from instead of Clock. rxgate sandbox sets the real time: its Clock
	// is moved forward, but a receiver judges the timestamp against its
	// own clock, which nothing moves.
	SignatureNow func() time.Time
	// Backoff spaces attempts; nil means Exponential from BackoffBase and
	// BackoffMax with random jitter.
	Backoff Backoff
	// UserAgent is sent with every delivery; "" means "rxgate".
	UserAgent string
	// Observe, when set, is called after each attempt's outcome is
	// recorded, from the worker that made it.
	Observe func(Result)
	// Shared says that queues of other processes work the same job store
	// (replicas on one database). The queue then claims no job ahead of
	// its attempts: every lease is an attempt in flight, so the store's
	// per-endpoint limit, which counts the leases of every process, bounds
	// the attempts in flight to an endpoint across all of them.
	Shared bool
	// DisableAfter is how long an endpoint's every attempt may fail before
	// it is disabled and its deliveries held; 0 never disables one.
	DisableAfter time.Duration
	// OperatorURL, when set, receives an endpoint.disabled event signed
	// with OperatorSecret (operator.go) when an endpoint is disabled.
	OperatorURL, OperatorSecret string
}

// Result is a recorded attempt, as Options.Observe sees it.
type Result struct {
	Job     storage.Job
	Attempt storage.Attempt
	// Outcome is "delivered", "retry" or "failed".
	Outcome string
	// RetryAt is when the next attempt is due, for Outcome "retry".
	RetryAt time.Time
	// Event is the event after the attempt was recorded; nil when the
	// event is gone.
	Event *storage.Event
	// Disabled is the endpoint when recording this attempt disabled it.
	Disabled *storage.WebhookEndpoint
}

// Queue delivers events: a dispatcher claims due jobs from the job store
// and hands them to a pool of workers. Several queues may work one store
// (in one process or in several sharing a database): the store keeps their
// leases apart. Start it once and Stop it once.
type Queue struct {
	store     storage.JobStore
	opts      Options
	log       *slog.Logger
	clock     Clock
	backoff   Backoff
	userAgent string
	client    *http.Client
	// owner names this queue's leases.
	owner    string
	leaseFor time.Duration
	// perEndpoint is the most attempts one endpoint may have in flight.
	perEndpoint int
	// claimAhead is claimAhead, or 1 for a queue that shares its store.
	claimAhead int

	// runCtx is cancelled when Stop gives up waiting: in-flight attempts
	// are then abandoned and their jobs released.
	runCtx    context.Context
	cancelRun context.CancelFunc
	wake      chan struct{}
	freed     chan struct{} // a worker finished an attempt
	// handedWake: a write handed every place it freed on (commit); the
	// dispatcher hands the jobs out without a claim.
	handedWake chan struct{}
	stop       chan struct{}
	work       chan storage.ClaimedJob
	dispDone   chan struct{}
	workers    sync.WaitGroup
	// outcomes carries the workers' outcomes to the recorder, which
	// commits them in batches; recDone is closed when it has ended.
	outcomes chan storage.Outcome
	recDone  chan struct{}
	// operator carries operational events to postOperator, when
	// Options.OperatorURL is set; operatorDone is closed when it ends.
	operator     chan operatorPost
	operatorDone chan struct{}
	operatorCtx  context.Context
	stopOperator context.CancelFunc

	// Only the dispatcher goroutine touches these: jobs claimed ahead of a
	// free worker, in the order the claim's turns gave them, and the
	// endpoint of the last job claimed (where the next claim's turns
	// start).
	ahead []storage.ClaimedJob
	after string
	// handoff is the store's storage.JobHandoff, nil when it has none.
	handoff storage.JobHandoff
	// load is the store's storage.WriteLoad, nil when it has none (busy).
	load storage.WriteLoad

	// mu guards the fields below. No other lock is taken while it is held.
	mu        sync.Mutex
	started   bool
	stopping  bool
	inflight  map[string]int   // endpoint id -> attempts in flight
	total     int              // sum of inflight
	held      map[string]lease // leased by this queue, by id: ahead, in flight or being recorded
	unstarted []storage.Job    // claimed, never attempted: released by Stop
	// handed are jobs the store handed over with recorded outcomes
	// (commit), for the dispatcher to take into ahead (handOut).
	handed []storage.ClaimedJob
	// finished lists, per endpoint, the jobs whose attempt has ended and
	// whose outcome the recorder has not yet recorded. Their leases are
	// held until it has, but they are no attempts in flight: a claim tells
	// the store (ClaimRequest.Finished), whose per-endpoint limit then does
	// not count them, so that a slow outcome write (a sync, a memtable
	// Badger swaps) does not stop deliveries while its batch waits. Not
	// with a store that hands off: there the write hands the place on.
	finished map[string][]string
	// writing is when the outcome write under way began (zero when none
	// is), wrote how long the last one took, by the real clock: busy
	// tells a slow write from one that rides a busy store's batches.
	writing time.Time
	wrote   time.Duration
	// slowWrite is slowOutcomeWrite (tests change it).
	slowWrite time.Duration
}

// lease is a job the queue holds, with when its lease ends by the queue's
// own reckoning: the time the claim or the last renewal was sent, plus
// the lease's length. The store's lease began no earlier (the database
// wrote it after the request left), so the lease is surely live until
// then, whatever the store's clock says; the job's LeasedUntil, on the
// store's clock, is not compared with the queue's.
type lease struct {
	job   storage.Job
	until time.Time
}

// New prepares a Queue on store; Start runs it.
func New(store storage.JobStore, opts Options) (*Queue, error) {
	if store == nil {
		return nil, errors.New("queue: a job store is required")
	}
	if opts.Workers < 1 || opts.Timeout <= 0 || opts.MaxAttempts < 1 || opts.BackoffBase <= 0 {
		return nil, errors.New("queue: invalid options: workers, timeout, max attempts and backoff base must be positive")
	}
	dest := Destinations{AllowLoopback: opts.AllowInsecureLoopback, Allowed: opts.AllowedNetworks}
	client, err := newClient(opts.CAFile, opts.Workers, opts.Timeout, dest)
	if err != nil {
		return nil, err
	}
	q := &Queue{
		store:       store,
		opts:        opts,
		log:         opts.Logger,
		clock:       opts.Clock,
		backoff:     opts.Backoff,
		userAgent:   opts.UserAgent,
		client:      client,
		owner:       storage.NewID(),
		leaseFor:    cmp.Or(opts.LeaseFor, 2*opts.Timeout+time.Minute),
		perEndpoint: (opts.Workers + 1) / 2,
		claimAhead:  claimAhead,
		wake:        make(chan struct{}, 1),
		freed:       make(chan struct{}, 1),
		handedWake:  make(chan struct{}, 1),
		stop:        make(chan struct{}),
		work:        make(chan storage.ClaimedJob, opts.Workers),
		dispDone:    make(chan struct{}),
		outcomes:    make(chan storage.Outcome, 4*opts.Workers),
		recDone:     make(chan struct{}),
		inflight:    make(map[string]int),
		held:        make(map[string]lease),
		finished:    make(map[string][]string),
		slowWrite:   slowOutcomeWrite,
	}
	if opts.Shared {
		q.claimAhead = 1
	}
	q.handoff, _ = store.(storage.JobHandoff)
	q.load, _ = store.(storage.WriteLoad)
	if opts.OperatorURL != "" {
		q.operator = make(chan operatorPost, operatorBuffer)
		q.operatorDone = make(chan struct{})
		q.operatorCtx, q.stopOperator = context.WithCancel(context.Background())
	}
	if q.log == nil {
		q.log = slog.New(slog.DiscardHandler)
	}
	if q.clock == nil {
		q.clock = SystemClock{}
	}
	if q.backoff == nil {
		q.backoff = Exponential{Base: opts.BackoffBase, Max: max(opts.BackoffMax, opts.BackoffBase), Rand: rand.Float64}
	}
	if q.userAgent == "" {
		q.userAgent = "rxgate"
	}
	q.runCtx, q.cancelRun = context.WithCancel(context.Background())
	return q, nil
}

// Start takes back the leases that have expired (an attempt interrupted by
// a crash is made again: delivery is at least once) and starts the
// dispatcher and the workers. Start after Stop does nothing.
func (q *Queue) Start(ctx context.Context) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.started || q.stopping {
		return nil
	}
	n, err := q.store.ReclaimExpired(ctx, q.clock.Now())
	if err != nil {
		return fmt.Errorf("queue: start: %w", err)
	}
	if n > 0 {
		q.log.Info("webhook attempts interrupted by a shutdown or a crash are due again", "jobs", n)
	}
	q.started = true
	for range q.opts.Workers {
		q.workers.Add(1)
		go q.worker()
	}
	go q.record()
	if q.operator != nil {
		go q.postOperator()
	}
	watch, stopWatch := q.store.WatchJobs()
	go q.dispatch(watch, stopWatch)
	return nil
}

// notify makes the dispatcher look for work now instead of at its next
// poll. It never blocks.
func (q *Queue) notify() {
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
		if q.operator != nil {
			q.stopOperator()
		}
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
	// 3. The recorder commits the outcomes the workers made, even if ctx
	// has ended (each batch within persistTimeout).
	close(q.outcomes)
	<-q.recDone
	if q.operator != nil {
		// An event still waiting is logged, not posted: Stop does not wait
		// on the operator's receiver.
		q.stopOperator()
		<-q.operatorDone
	}
	// 4. Release the leases of unstarted jobs, even if ctx has ended.
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

// handOut gives jobs claimed ahead to free workers in the order the claim's
// turns gave them (the store's claim is where endpoints take turns), none
// past perEndpoint attempts in flight. The last free worker goes only to an
// endpoint with nothing in flight: however many endpoints hang, one worker
// stays for the others, so their backlog never waits behind a hang.
func (q *Queue) handOut() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.handed) > 0 {
		q.ahead = append(q.ahead, q.handed...)
		clear(q.handed)
		q.handed = q.handed[:0]
	}
	kept := q.ahead[:0]
	for _, j := range q.ahead {
		e := j.EndpointID
		if q.total >= q.opts.Workers || q.inflight[e] >= q.perEndpoint ||
			(q.inflight[e] > 0 && q.total == q.opts.Workers-1) {
			kept = append(kept, j)
			continue
		}
		q.inflight[e]++
		q.total++
		q.work <- j // never blocks: the channel holds Workers jobs
	}
	clear(q.ahead[len(kept):])
	q.ahead = kept
}

// dispatch claims due jobs ahead of the workers and hands them out, and
// otherwise waits for the next due time, the store's watch, a finished
// attempt or Stop. It renews the leases the queue holds and takes back
// expired ones (a crashed process's, in a store several share) every third
// of a lease. It owns the work channel: when it ends it sets aside the jobs
// it holds and closes the channel.
func (q *Queue) dispatch(watch <-chan struct{}, stopWatch func()) {
	defer close(q.dispDone)
	defer stopWatch()
	defer func() {
		q.mu.Lock()
		for _, j := range append(q.ahead, q.handed...) {
			q.unstarted = append(q.unstarted, j.Job)
		}
		q.ahead, q.handed = nil, nil
		q.mu.Unlock()
		close(q.work)
	}()
	maintainAt := q.clock.Now().Add(q.leaseFor / renewals)
	// nextDue is the last claim's NextDue; retryAt, after a failed claim,
	// when to try again; claim says whether this turn claims.
	var nextDue, retryAt time.Time
	claim := true
	for {
		select {
		case <-q.stop:
			return
		default:
		}
		now := q.clock.Now()
		if !now.Before(maintainAt) {
			q.maintain(now)
			maintainAt = now.Add(q.leaseFor / renewals)
		}
		wait := min(idlePoll, maintainAt.Sub(now))
		q.handOut()
		if claim {
			var err error
			retryAt = time.Time{}
			if nextDue, err = q.claim(now); err != nil {
				q.log.Error("claiming webhook jobs failed", "error", err)
				retryAt = now.Add(errorPause)
			}
		}
		if !nextDue.IsZero() {
			wait = min(wait, nextDue.Sub(now))
		}
		if !retryAt.IsZero() {
			wait = min(wait, retryAt.Sub(now))
		}
		claim = true
		if wait <= 0 {
			continue
		}
		// While the store is busy, the outcome write under way turning
		// slow lets finished attempts leave their limit (busy): a claim
		// then, not at the next job or poll.
		var slowTimer *time.Timer
		var slow <-chan time.Time
		if d, ok := q.untilSlow(); ok {
			slowTimer = time.NewTimer(d)
			slow = slowTimer.C
		}
		select {
		case <-q.stop:
			return
		case <-q.wake:
		case <-q.handedWake:
			claim = false
		case <-watch:
		case <-q.clock.Until(now.Add(wait)):
		case <-slow:
		case <-q.freed:
			// A finished attempt frees a worker, not a lease: its lease
			// is held until its outcome is recorded, which wakes the
			// dispatcher itself (commit), as new jobs do (the watch), and
			// a claim that stopped at Max with more due is followed by
			// another at once (NextDue is now). So the freed worker gets
			// a job claimed ahead, and no claim is made: one on every
			// finished attempt found nothing two times in three under
			// load. With nothing claimed ahead, though, the worker would
			// wait for that outcome's write: the attempt no longer counts
			// against its endpoint's limit (finished), so a claim now
			// finds that endpoint's next jobs, if any; unless the store
			// is busy (busy), when it still counts and a claim would find
			// nothing more for it. With a store that hands off, the
			// outcome's commit hands the attempt's place on to the
			// endpoint's next job, or wakes the dispatcher (commit): a
			// claim now would count the place as taken (no Finished).
			claim = len(q.ahead) == 0 && !q.busy() && q.handoff == nil
		}
		if slowTimer != nil {
			slowTimer.Stop()
		}
	}
}

// claim leases due jobs ahead of the workers, as many as they have room
// for, hands out what it can and returns the claim's NextDue.
func (q *Queue) claim(now time.Time) (time.Time, error) {
	busy := q.busy()
	q.mu.Lock()
	room := q.claimAhead*q.opts.Workers - q.total - len(q.ahead)
	var finished map[string][]string
	// Not with a store that hands off: the outcomes' writes hand those
	// places on, and a place must not be given twice (storage.JobHandoff).
	if len(q.finished) > 0 && !busy && q.handoff == nil {
		// A copy: the store reads it while commit changes q.finished.
		finished = make(map[string][]string, len(q.finished))
		for e, ids := range q.finished {
			finished[e] = slices.Clone(ids)
		}
	}
	q.mu.Unlock()
	// Hanging endpoints can fill the queue-wide room with jobs they will
	// not start soon; the store's per-endpoint limit still bounds each
	// endpoint, so always claim at least one, which only an endpoint below
	// its limit can get.
	res, err := q.store.ClaimJobs(q.runCtx, storage.ClaimRequest{
		Owner: q.owner, Now: now, LeaseFor: q.leaseFor, Max: max(room, 1),
		PerEndpoint: q.claimAhead * q.perEndpoint, Finished: finished, After: q.after,
	})
	if err != nil {
		return time.Time{}, err
	}
	if n := len(res.Jobs); n > 0 {
		q.after = res.Jobs[n-1].EndpointID
		q.mu.Lock()
		for _, j := range res.Jobs {
			q.held[j.ID] = lease{job: j.Job, until: now.Add(q.leaseFor)}
		}
		q.mu.Unlock()
		q.ahead = append(q.ahead, res.Jobs...)
		q.handOut()
	}
	return res.NextDue, nil
}

// busy reports whether the store has at least as many synchronous writes
// waiting for their commit as the queue has workers (storage.WriteLoad:
// creates whose callers wait for an answer, more of them than deliveries
// run at once) while the queue's outcome writes are quick: neither the
// last one nor the one under way has taken slowWrite. The queue then
// counts its finished attempts whose outcome is not yet written against
// their endpoint's limit again (claim: no ClaimRequest.Finished), as
// attempts in flight: deliveries pace with their outcome writes, which
// ride the busy store's batches, and leave the CPU to those writes rather
// than run as fast as the receiver answers and slow every create (make
// bench-load's creates at concurrency 64). A slow write (a slow disk, a
// memtable Badger swaps: the writes then wait on the disk, not on the
// CPU), or one with few writes waiting, still does not stop deliveries.
func (q *Queue) busy() bool {
	if q.load == nil || q.load.WaitingWrites() < q.opts.Workers {
		return false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	slow := q.wrote >= q.slowWrite || (!q.writing.IsZero() && time.Since(q.writing) >= q.slowWrite)
	return !slow
}

// untilSlow returns how long until the outcome write under way turns slow
// (busy), when one is under way, not yet slow, with finished attempts
// waiting on it and a store that tells its load.
func (q *Queue) untilSlow() (time.Duration, bool) {
	if q.load == nil {
		return 0, false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.writing.IsZero() || len(q.finished) == 0 || q.wrote >= q.slowWrite {
		return 0, false
	}
	d := q.slowWrite - time.Since(q.writing)
	return d, d > 0
}

// maintain renews the leases of every job the queue holds, drops the
// claimed-ahead jobs whose lease was lost, and takes back expired leases.
func (q *Queue) maintain(now time.Time) {
	q.mu.Lock()
	held := make([]storage.Job, 0, len(q.held))
	for _, h := range q.held {
		held = append(held, h.job)
	}
	q.mu.Unlock()
	if len(held) > 0 {
		lost, err := q.store.RenewLeases(q.runCtx, held, now.Add(q.leaseFor))
		if err != nil {
			q.log.Error("renewing webhook leases failed", "error", err)
		}
		// A job in flight whose lease was lost finds out when its outcome
		// is recorded (storage.ErrLeaseLost); one claimed ahead is dropped
		// here, left to whoever holds it now.
		gone := make(map[string]bool, len(lost))
		for _, id := range lost {
			gone[id] = true
		}
		q.mu.Lock()
		if err == nil {
			// Renewed from now on: a failed renewal extends nothing, so
			// a queue cut off from its store lets its leases lapse
			// rather than start attempts another may be making.
			for _, j := range held {
				if h, ok := q.held[j.ID]; ok && !gone[j.ID] {
					h.until = now.Add(q.leaseFor)
					q.held[j.ID] = h
				}
			}
		}
		kept := q.ahead[:0]
		for _, j := range q.ahead {
			if gone[j.ID] {
				delete(q.held, j.ID)
				continue
			}
			kept = append(kept, j)
		}
		dropped := len(q.ahead) - len(kept)
		clear(q.ahead[len(kept):])
		q.ahead = kept
		q.mu.Unlock()
		if dropped > 0 {
			q.log.Warn("webhook leases of claimed jobs were lost; the jobs are left to whoever holds them now", "jobs", dropped)
		}
	}
	if n, err := q.store.ReclaimExpired(q.runCtx, now); err != nil {
		q.log.Error("taking back expired webhook leases failed", "error", err)
	} else if n > 0 {
		q.log.Warn("webhook leases expired; their attempts are due again", "jobs", n)
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
		if stopping {
			delete(q.held, j.ID) // Stop releases it
		}
		q.inflight[j.EndpointID]--
		if q.inflight[j.EndpointID] <= 0 {
			delete(q.inflight, j.EndpointID)
		}
		q.total--
		q.mu.Unlock()
		select {
		case q.freed <- struct{}{}:
		default:
		}
	}
}

// attempt makes one attempt of j and hands its outcome to the recorder.
// A job whose lease has lapsed by the queue's reckoning (lease) is not
// attempted: another queue may have taken it back and be attempting it.
// It is released (a no-op when its lease was taken) and left to the next
// claim.
func (q *Queue) attempt(j storage.ClaimedJob) {
	now := q.clock.Now()
	q.mu.Lock()
	h, ok := q.held[j.ID]
	lapsed := !ok || !now.Before(h.until)
	q.mu.Unlock()
	if lapsed {
		q.log.Warn("a webhook job's lease lapsed before its attempt started; it is left to the next claim", "event_id", j.EventID, "endpoint_id", j.EndpointID)
		q.release(j.Job)
		q.mu.Lock()
		delete(q.held, j.ID)
		q.mu.Unlock()
		return
	}
	o := storage.Outcome{Job: j.Job, Attempt: storage.Attempt{AttemptedAt: now, EndpointID: j.EndpointID}, Next: storage.EventFailed,
		DisableAfter: q.opts.DisableAfter}
	var resp response
	switch {
	case j.Endpoint == nil:
		o.Attempt.Error, o.Attempt.ErrorClass = "webhook endpoint deleted", storage.AttemptGone
	case j.Payload == nil:
		o.Attempt.Error, o.Attempt.ErrorClass = "event not found", storage.AttemptGone
	default:
		if err := CheckURL(j.Endpoint.URL, q.opts.AllowInsecureLoopback); err != nil {
			// Registered under a configuration that has since changed.
			o.Attempt.Error, o.Attempt.ErrorClass = err.Error(), storage.AttemptRefused
			break
		}
		signAt := now
		if q.opts.SignatureNow != nil {
			signAt = q.opts.SignatureNow()
		}
		secrets := j.Endpoint.SigningSecrets(now)
		h := deliveryHeader(j.EventID, q.userAgent, signAt, j.Payload, j.Endpoint.Scheme(), secrets)
		o.Attempt.Signature = h.Get(signature.HeaderName)
		if j.Endpoint.Scheme() == storage.SchemeStandard {
			o.Attempt.Signature = h.Get(signature.StandardSignatureHeader)
		}
		o.Attempt.SecretIDs = make([]string, len(secrets))
		for i, sec := range secrets {
			o.Attempt.SecretIDs[i] = storage.SecretID(sec)
		}
		resp = send(q.runCtx, q.client, j.Endpoint.URL, j.Payload, h, q.opts.Timeout, now)
		if resp.status == 0 && q.runCtx.Err() != nil {
			// Stop gave up waiting: the endpoint did not fail; this attempt
			// does not count.
			q.release(j.Job)
			q.mu.Lock()
			delete(q.held, j.ID)
			q.mu.Unlock()
			return
		}
		o.Next = classify(resp).next()
		o.Attempt.StatusCode = resp.status
		o.Attempt.Error = describe(resp, q.opts.Timeout)
		o.Attempt.DurationMS = resp.duration.Milliseconds()
		o.Attempt.ErrorClass = errorClass(resp)
		o.Attempt.AttemptDetail = resp.detail()
	}
	if made := j.Attempts + 1; o.Next == storage.EventPending {
		if made >= q.opts.MaxAttempts {
			o.Next = storage.EventFailed
		} else {
			delay := q.backoff.Delay(made)
			if resp.retryAfter > delay {
				delay = min(resp.retryAfter, max(q.opts.BackoffMax, delay))
			}
			// The wait runs from the end of the attempt: a timed-out
			// attempt does not eat into it.
			o.RetryAt = q.clock.Now().Add(delay)
		}
	}
	q.mu.Lock()
	q.finished[j.EndpointID] = append(q.finished[j.EndpointID], j.ID)
	q.mu.Unlock()
	q.outcomes <- o
}

// record commits the workers' outcomes until the outcomes channel closes:
// whatever waits when a commit ends goes into the next one, so attempts
// made while one batch is written share the next write (group commit). A
// worker hands its outcome over and takes its next job without waiting.
func (q *Queue) record() {
	defer close(q.recDone)
	const maxBatch = 256
	for o := range q.outcomes {
		batch := []storage.Outcome{o}
	more:
		for len(batch) < maxBatch {
			select {
			case o, ok := <-q.outcomes:
				if !ok {
					break more
				}
				batch = append(batch, o)
			default:
				break more
			}
		}
		q.commit(batch)
	}
}

// commit records a batch of outcomes, then logs and reports each. With a
// store that hands off (storage.JobHandoff), the leases the batch ends go,
// in the transaction that records it, to their endpoints' next due jobs,
// as many as the batch freed workers (one each), within the same
// per-endpoint limit as the dispatcher's claims: the workers get their
// next jobs without a claim's transaction, and the jobs join those
// claimed ahead (handOut), where the same rules hand them out.
func (q *Queue) commit(batch []storage.Outcome) {
	ctx, cancel := context.WithTimeout(context.Background(), persistTimeout)
	q.mu.Lock()
	stopping := q.stopping
	q.mu.Unlock()
	var rec []storage.Recorded
	var handed []storage.ClaimedJob
	var err error
	sent := q.clock.Now()
	began := time.Now()
	q.mu.Lock()
	q.writing = began
	q.mu.Unlock()
	if q.handoff != nil && !stopping {
		rec, handed, err = q.handoff.RecordOutcomesHandoff(ctx, batch, storage.ClaimRequest{
			Owner: q.owner, Now: sent, LeaseFor: q.leaseFor, Max: len(batch), PerEndpoint: q.claimAhead * q.perEndpoint,
		})
	} else {
		rec, err = q.store.RecordOutcomes(ctx, batch)
	}
	cancel()
	q.mu.Lock()
	q.writing, q.wrote = time.Time{}, time.Since(began)
	for _, o := range batch {
		// Recorded, lost, or not recorded: either way the queue stops
		// renewing the lease. A lease whose outcome was not recorded
		// expires and its job is attempted again.
		delete(q.held, o.Job.ID)
		ids := slices.DeleteFunc(q.finished[o.Job.EndpointID], func(id string) bool { return id == o.Job.ID })
		if len(ids) == 0 {
			delete(q.finished, o.Job.EndpointID)
		} else {
			q.finished[o.Job.EndpointID] = ids
		}
	}
	for _, j := range handed {
		// As a claim's (claim): the lease began no earlier than sent.
		q.held[j.ID] = lease{job: j.Job, until: sent.Add(q.leaseFor)}
		if q.stopping {
			// The dispatcher has ended or is ending: Stop releases it.
			q.unstarted = append(q.unstarted, j.Job)
			delete(q.held, j.ID)
		} else {
			q.handed = append(q.handed, j)
		}
	}
	q.mu.Unlock()
	if q.handoff != nil && err == nil && len(handed) == len(batch) {
		// Every place the batch freed went to its endpoint's next job:
		// the dispatcher hands them out, and a claim would find nothing
		// these outcomes made room for (one per write found nothing,
		// every time, in make bench-backends).
		select {
		case q.handedWake <- struct{}{}:
		default:
		}
	} else {
		q.notify() // the endpoints' leases are freed
	}
	if err != nil {
		q.log.Error("recording webhook attempts failed; they are made again once their leases expire", "attempts", len(batch), "error", err)
		return
	}
	for i, o := range batch {
		j, a := o.Job, o.Attempt
		if rec[i].Err != nil {
			q.log.Error("recording a webhook attempt failed", "event_id", j.EventID, "endpoint_id", j.EndpointID, "error", rec[i].Err)
			continue
		}
		made := j.Attempts + 1
		switch o.Next {
		case storage.EventFailed:
			q.log.Warn("webhook delivery failed permanently; it is not re-sent unless replayed",
				"event_id", j.EventID, "endpoint_id", j.EndpointID, "attempts", made, "status_code", a.StatusCode, "error", a.Error)
		case storage.EventPending:
			q.log.Info("webhook attempt failed; retrying", "event_id", j.EventID, "endpoint_id", j.EndpointID,
				"attempt", made, "status_code", a.StatusCode, "error", a.Error, "retry_at", o.RetryAt)
		default:
			q.log.Debug("webhook delivered", "event_id", j.EventID, "endpoint_id", j.EndpointID, "attempt", made)
		}
		if rec[i].Disabled != nil {
			q.disabled(rec[i].Disabled)
		}
		if q.opts.Observe != nil {
			q.opts.Observe(Result{Job: j, Attempt: a, Outcome: outcomeName(o.Next), RetryAt: o.RetryAt, Event: rec[i].Event, Disabled: rec[i].Disabled})
		}
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
