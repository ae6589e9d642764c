package badger

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	badgerdb "github.com/dgraph-io/badger/v4"

	"github.com/rxgate/rxgate/storage"
)

// Group commit. A write is acknowledged only once it is durable, and what
// makes a transaction durable is a sync of its record in the journal
// (package journal; Badger runs without SyncWrites): the disk's sync, not
// the work, bounds how many transactions a second one writer can make
// durable. Every write function therefore goes to one committer goroutine,
// which runs whatever functions are waiting, one after another, in one
// transaction and commits them together: one journal record and one sync
// for many writes, each acknowledged only once that sync is done. A
// function that fails leaves nothing in the transaction (tx keeps its
// writes apart until it succeeds), so the others commit.
//
// One writer also means no write ever conflicts with another, and a
// function reads what every function before it wrote: the batch is
// serializable by construction.
const (
	// maxBatchFuncs bounds how many write functions share a transaction.
	maxBatchFuncs = 256
	// maxBatchBytes bounds a transaction's writes, far below Badger's limit
	// (15% of the 64 MiB memtable).
	maxBatchBytes = 4 << 20
)

// errClosed answers a write to a closed store.
var errClosed = errors.New("storage: closed")

// writeReq is one write function waiting for the committer.
type writeReq struct {
	// later says the write need not start a batch (updateLater).
	later bool
	fn    func(*tx) error
	done  chan error // receives the function's error, or the commit's
}

// committer is the state of the group commit.
type committer struct {
	// mu guards closed: a write is queued only while closed is false, so
	// that Close can stop the loop knowing nothing more arrives.
	mu     sync.RWMutex
	closed bool
	reqs   chan *writeReq
	// coming counts the writers about to queue a write (expectWrite).
	coming atomic.Int64
	// waiting counts the writes queued by update whose answer has not
	// come yet (WaitingWrites).
	waiting atomic.Int64
	// flights hands a batch to the flusher; it holds the one in flight.
	flights chan *flight
	stop    chan struct{} // closed by Close
	flushed chan struct{} // closed when the flusher has ended
	done    chan struct{} // closed when the loop has ended
}

// startCommitter starts the committer goroutine and its flusher;
// closeCommitter stops them.
func (s *Store) startCommitter() {
	s.commit = committer{
		reqs: make(chan *writeReq, maxBatchFuncs), flights: make(chan *flight, 1),
		stop: make(chan struct{}), flushed: make(chan struct{}), done: make(chan struct{}),
	}
	go s.flushLoop()
	go s.commitLoop()
}

// closeCommitter refuses new writes, lets the committer finish those queued
// and waits for it.
func (s *Store) closeCommitter() {
	c := &s.commit
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	c.mu.Unlock()
	close(c.stop)
	<-c.done
}

// update runs fn in a write transaction, with other write functions
// waiting at the same time, and returns fn's error, or the commit's. fn
// may run more than once (when the batch's transaction must be rebuilt):
// it reads what it needs inside the transaction.
//
// A pending audit entry in ctx (storage.WithAudit) is appended after fn's
// writes, in its transaction (withAudit).
func (s *Store) update(ctx context.Context, fn func(txn *tx) error) error {
	fn, audit := withAudit(ctx, fn)
	err := s.enqueue(ctx, &writeReq{fn: fn, done: make(chan error, 1)})
	if err == nil && audit != nil {
		audit.MarkWritten()
	}
	return err
}

// updateLater is update for a write that need not start a sync of its own:
// it is committed with the next batch another write starts, or after
// maxLaterWait when none does. It is acknowledged only once synced, like
// any other write. The queue's recorded outcomes are such writes: an
// attempt whose outcome a crash loses is made again (delivery is at least
// once), and outcomes that ride with a batch of creates cost no sync of
// their own, which the creates would otherwise wait behind.
func (s *Store) updateLater(ctx context.Context, fn func(txn *tx) error) error {
	return s.enqueue(ctx, &writeReq{fn: fn, done: make(chan error, 1), later: true})
}

// maxLaterWait bounds how long a write queued by updateLater waits for a
// batch to join.
const maxLaterWait = 2 * time.Millisecond

// enqueue hands r to the committer and returns its answer.
func (s *Store) enqueue(ctx context.Context, r *writeReq) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c := &s.commit
	c.mu.RLock()
	if c.closed {
		c.mu.RUnlock()
		return errClosed
	}
	if !r.later {
		c.waiting.Add(1)
		defer c.waiting.Add(-1)
	}
	c.reqs <- r
	c.mu.RUnlock()
	return <-r.done
}

// WaitingWrites is how many writes queued by update (not updateLater)
// wait for their commit now (storage.WriteLoad): a queue on the store
// keeps its deliveries paced with their outcome writes while many do.
func (s *Store) WaitingWrites() int {
	return int(s.commit.waiting.Load())
}

// commitLoop commits batches until Close; what was queued before Close is
// committed too.
//
// Commits are pipelined: while one batch is in flight (handed to Badger,
// its sync under way), the next one is filled, each write function run as
// it arrives, and it is handed over the moment the one in flight is synced.
// Running the functions is then off the path from one sync to the next.
// The functions of the next batch read the writes of the one in flight
// through tx (Badger shows a commit only once it is written); one that
// iterates over keys the batch in flight wrote waits until that batch is
// synced and runs again (tx.stale). At most one batch is in flight: a
// second one handed to Badger would be synced on its own.
func (s *Store) commitLoop() {
	c := &s.commit
	defer close(c.done)
	defer func() {
		close(c.flights) // nothing is in flight (drain): the flusher ends
		<-c.flushed
	}()
	l := &commitState{s: s}
	for {
		var reqs <-chan *writeReq
		if l.next == nil || len(l.next.in) < maxBatchFuncs {
			reqs = c.reqs
		}
		var landed <-chan error
		if l.flying != nil {
			landed = l.flying.done
		}
		var due <-chan time.Time
		if l.flying == nil && l.next != nil {
			due = l.laterDue()
		}
		select {
		case r := <-reqs:
			l.add(r)
			if l.flying == nil && l.next != nil && l.next.urgent {
				l.gather()
				l.send()
			}
		case err := <-landed:
			l.land(err)
			if l.next != nil && l.next.urgent {
				l.gather()
				l.send()
			}
		case <-due:
			l.gather()
			l.send()
		case <-c.stop:
			// Nothing more is queued once stop is closed: commit what is.
			for {
				select {
				case r := <-c.reqs:
					if l.next != nil && len(l.next.in) >= maxBatchFuncs {
						l.send()
					}
					l.add(r)
					continue
				default:
				}
				l.send()
				l.drain()
				return
			}
		}
	}
}

// commitState is the committer's: the batch in flight and the one being
// filled. Only the committer goroutine uses it.
type commitState struct {
	s      *Store
	flying *flight
	next   *batch
	timer  *time.Timer // for laterDue
}

// laterDue returns a channel that receives when the batch being filled,
// holding only writes that can wait, must go.
func (l *commitState) laterDue() <-chan time.Time {
	wait := time.Until(l.next.since.Add(l.s.laterWait))
	if l.timer == nil {
		l.timer = time.NewTimer(wait)
	} else {
		l.timer.Reset(wait)
	}
	return l.timer.C
}

// batch is a transaction being filled with write functions.
type batch struct {
	txn     *badgerdb.Txn
	in      []answer                // its functions, answered with its commit
	written map[string]pendingWrite // what they wrote
	size    int                     // how much
	prior   *flight                 // the batch in flight when it began
	marked  marked                  // the marked kinds of keys it wrote
	urgent  bool                    // it holds a write that cannot wait
	since   time.Time               // when its first function arrived
}

// answer is a write function in a batch: its own error, or nil to be
// answered with the commit's.
type answer struct {
	r   *writeReq
	err error
}

// flight is a batch handed to Badger whose commit has not yet landed.
type flight struct {
	txn     *badgerdb.Txn // the flusher's to commit
	ts      uint64
	marked  marked // the marked kinds of keys it wrote
	in      []answer
	written map[string]pendingWrite
	keys    []string   // written's keys, sorted when first asked for
	done    chan error // receives the commit's result
}

// wroteUnder reports whether the batch wrote a key under prefix.
func (f *flight) wroteUnder(prefix []byte) bool {
	if len(f.written) == 0 {
		return false
	}
	if f.keys == nil {
		f.keys = slices.Sorted(maps.Keys(f.written))
	}
	i, _ := slices.BinarySearch(f.keys, string(prefix))
	return i < len(f.keys) && strings.HasPrefix(f.keys[i], string(prefix))
}

// newBatch starts a batch reading what was committed and the batch in
// flight.
func (l *commitState) newBatch() *batch {
	return &batch{txn: l.s.newWriteTxn(), written: map[string]pendingWrite{}, prior: l.flying, since: time.Now()}
}

// add runs r's function in the batch being filled, starting one when none
// is.
func (l *commitState) add(r *writeReq) {
	if l.next == nil {
		l.next = l.newBatch()
	}
	b := l.next
	b.urgent = b.urgent || !r.later
	t := newWriteTx(b, l.s.maxRecord)
	err := run(r.fn, t)
	if t.stale {
		// It read past the batch in flight: run it again once that one and
		// this one are synced, with nothing in flight.
		l.send()
		l.drain()
		l.add(r)
		return
	}
	if err != nil {
		b.in = append(b.in, answer{r: r, err: err})
		return
	}
	if len(b.in) > 0 && b.size+t.bytes > maxBatchBytes {
		// The batch is full: it goes first, and this function's writes
		// start the next one. They hold there unchanged: the new batch
		// reads this one as in flight, which is what the function read.
		failed := l.wait()
		l.send()
		if failed {
			l.add(r) // it read what failed: run it again
			return
		}
		b = l.newBatch()
		b.urgent = !r.later
		l.next = b
		t.join(b)
	}
	if err := t.apply(); err != nil {
		// The transaction holds part of t's writes: drop it and run the
		// functions already in it again in a new one. When it was only too
		// big for Badger with them (it counts entries too), r goes alone in
		// the next batch; otherwise, or alone, it fails.
		l.rebuild()
		if errors.Is(err, badgerdb.ErrTxnTooBig) && len(b.in) > 0 {
			l.send()
			l.add(r)
			return
		}
		r.done <- fmt.Errorf("storage: write: %w", err)
		return
	}
	b.in = append(b.in, answer{r: r})
	b.size += t.bytes
	b.marked |= t.wroteMarked()
}

// rebuild runs the functions of the batch being filled again, in a new
// transaction.
func (l *commitState) rebuild() {
	b := l.next
	b.txn.Discard()
	l.next = nil
	for _, a := range b.in {
		l.add(a.r)
	}
}

// gather adds what else is waiting, up to maxBatchFuncs, to the batch being
// filled.
func (l *commitState) gather() {
	c := &l.s.commit
	var timer *time.Timer
	for l.next != nil && len(l.next.in) < maxBatchFuncs {
		select {
		case r := <-c.reqs:
			l.add(r)
			continue
		default:
		}
		// Writers that have begun but not yet queued (a create planning
		// its write) arrive within moments: wait for them, briefly, so that
		// they share this batch's sync instead of waiting for the next.
		if c.coming.Load() <= 0 {
			return
		}
		if timer == nil {
			timer = time.NewTimer(maxGatherWait)
			defer timer.Stop()
		}
		select {
		case r := <-c.reqs:
			l.add(r)
			continue
		case <-timer.C:
		}
		return
	}
}

// send hands the batch being filled to Badger once nothing is in flight:
// at most one batch is, and the one that follows it is answered after it.
func (l *commitState) send() {
	l.drain()
	b := l.next
	if b == nil {
		return
	}
	l.next = nil
	if len(b.in) == 0 {
		b.txn.Discard()
		return
	}
	f := &flight{txn: b.txn, ts: l.s.ts.next, marked: b.marked, in: b.in, written: b.written, done: make(chan error, 1)}
	// A timestamp is never used twice, also after a failed commit.
	l.s.ts.next++
	l.flying = f
	l.s.commit.flights <- f // never blocks: nothing else is in flight
}

// flushLoop commits each batch the committer hands over and reports the
// result on the flight's done channel; it ends when the committer closes
// flights.
//
// A batch goes to the journal, which syncs it, and to Badger, which runs
// without syncing, at the same time (applyLoop): it is answered once both
// are done, so a batch's time in flight is about its journal sync. When
// the journal fails, Badger may have the batch: the journal stays failed
// and refuses every later one, so that nothing is built on it; after a
// restart the batch may be there (Badger's log is in the page cache), as
// any write whose sync failed may be.
//
// Badger's own asynchronous commit (CommitAt with a callback) starts a
// goroutine per commit, and the scheduler runs that goroutine before
// Badger's writer, which the commit has just woken: on a busy machine the
// write then waited for a CPU before it began, a large part of the time a
// batch was in flight. A goroutine that commits and waits blocks at once,
// and its CPU goes straight to Badger's writer (BenchmarkDurableCreate in
// testsuite, and make bench-load, measure the create path).
func (s *Store) flushLoop() {
	defer close(s.commit.flushed)
	applies, applied := make(chan *flight), make(chan error)
	go s.applyLoop(applies, applied)
	defer close(applies)
	for f := range s.commit.flights {
		applies <- f
		err := s.journal.Append(f.ts, f.written)
		if aerr := <-applied; err == nil && aerr != nil {
			// The journal has it: after a restart it is back.
			err = s.journal.Fail(aerr)
		}
		if s.beforeLanding != nil {
			err = s.beforeLanding(err)
		}
		f.done <- err
	}
}

// applyLoop commits each batch flushLoop hands it to Badger and reports
// the result; it ends when flushLoop closes applies.
func (s *Store) applyLoop(applies <-chan *flight, applied chan<- error) {
	for f := range applies {
		if s.dropCommit != nil && s.dropCommit(f.ts) {
			f.txn.Discard()
			applied <- nil
			continue
		}
		applied <- f.txn.CommitAt(f.ts, nil) // discards the transaction
	}
}

// wait waits until the batch in flight, if any, lands, and reports
// whether its commit failed.
func (l *commitState) wait() (failed bool) {
	if l.flying == nil {
		return false
	}
	err := <-l.flying.done
	l.land(err)
	return err != nil
}

// drain waits until nothing is in flight. Landing a failed batch runs the
// batch that read it again, which may hand a batch of its own to Badger:
// one wait is not always enough.
func (l *commitState) drain() {
	for l.flying != nil {
		l.wait()
	}
}

// land takes the result of the batch in flight: once it is synced its
// commit is published to reads, then each of its functions is answered.
// When it failed, the batch being filled, which read its writes, is run
// again without them.
func (l *commitState) land(err error) {
	f := l.flying
	l.flying = nil
	if errors.Is(err, badgerdb.ErrConflict) {
		// Only the committer writes; this never happens.
		err = fmt.Errorf("%w: %w", storage.ErrConflict, err)
	}
	if err == nil {
		for _, m := range markedKinds {
			if f.marked&m != 0 {
				l.s.mark(m).Store(f.ts) // before reads can see the commit
			}
		}
		l.s.ts.committed.Store(f.ts)
		l.s.stampWrites(f.written, f.ts) // after: see stampWrites
		l.s.db.SetDiscardTs(l.s.ts.discardTs())
		l.s.advice.landed()
	}
	for _, a := range f.in {
		if a.err != nil {
			a.r.done <- a.err
			continue
		}
		a.r.done <- err
	}
	if err != nil && l.next != nil && l.next.prior == f {
		l.rebuild()
	}
}

// maxGatherWait bounds how long the committer waits for writers that have
// begun to queue their writes.
const maxGatherWait = 200 * time.Microsecond

// expectWrite tells the committer that a write will be queued soon: it
// waits for it, briefly (gather). Call the returned function when the write
// is about to be queued, or will not be; calling it again does nothing.
func (s *Store) expectWrite() func() {
	s.commit.coming.Add(1)
	var once sync.Once
	return func() { once.Do(func() { s.commit.coming.Add(-1) }) }
}

// newWriteTxn starts the committer's transaction: it reads every commit
// (the committer made them all).
func (s *Store) newWriteTxn() *badgerdb.Txn {
	return s.db.NewTransactionAt(s.ts.committed.Load(), true)
}

// run calls fn, turning a panic into an error: the committer serves every
// writer and must not die with one.
func run(fn func(*tx) error, t *tx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("storage: write function panicked: %v", p)
		}
	}()
	return fn(t)
}
