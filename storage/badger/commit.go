package badger

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	badgerdb "github.com/dgraph-io/badger/v4"

	"github.com/rxgate/rxgate/storage"
)

// Group commit. Badger syncs its write-ahead log once per committed
// transaction (SyncWrites), so the disk's sync, not the work, bounds how
// many transactions a second one writer can commit. Every write function
// therefore goes to one committer goroutine, which runs whatever functions
// are waiting, one after another, in one transaction and commits them
// together: one sync for many writes, each acknowledged only once that
// sync is done. A function that fails leaves nothing in the transaction
// (tx keeps its writes apart until it succeeds), so the others commit.
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
	fn   func(*tx) error
	done chan error // receives the function's error, or the commit's
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
	stop   chan struct{} // closed by Close
	done   chan struct{} // closed when the loop has ended
}

// startCommitter starts the committer goroutine; closeCommitter stops it.
func (s *Store) startCommitter() {
	s.commit = committer{reqs: make(chan *writeReq, maxBatchFuncs), stop: make(chan struct{}), done: make(chan struct{})}
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
func (s *Store) update(ctx context.Context, fn func(txn *tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r := &writeReq{fn: fn, done: make(chan error, 1)}
	c := &s.commit
	c.mu.RLock()
	if c.closed {
		c.mu.RUnlock()
		return errClosed
	}
	c.reqs <- r
	c.mu.RUnlock()
	return <-r.done
}

// commitLoop commits batches until Close; what was queued before Close is
// committed too.
func (s *Store) commitLoop() {
	c := &s.commit
	defer close(c.done)
	for {
		select {
		case r := <-c.reqs:
			s.commitBatch(s.gather(r))
		case <-c.stop:
			for {
				select {
				case r := <-c.reqs:
					s.commitBatch(s.gather(r))
				default:
					return
				}
			}
		}
	}
}

// gather returns first and whatever else is waiting, up to maxBatchFuncs.
func (s *Store) gather(first *writeReq) []*writeReq {
	batch := []*writeReq{first}
	var timer *time.Timer
	for len(batch) < maxBatchFuncs {
		select {
		case r := <-s.commit.reqs:
			batch = append(batch, r)
			continue
		default:
		}
		// Writers that have begun but not yet queued (a create planning
		// its write) arrive within moments: wait for them, briefly, so that
		// they share this batch's sync instead of waiting for the next.
		if s.commit.coming.Load() <= 0 {
			break
		}
		if timer == nil {
			timer = time.NewTimer(maxGatherWait)
			defer timer.Stop()
		}
		select {
		case r := <-s.commit.reqs:
			batch = append(batch, r)
			continue
		case <-timer.C:
		}
		break
	}
	return batch
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

// commitBatch runs the batch's functions in one transaction, or more when
// their writes exceed maxBatchBytes, and answers each once the
// transaction it read is committed: its error, or the commit's.
func (s *Store) commitBatch(batch []*writeReq) {
	type answer struct {
		r   *writeReq
		err error // the function's own; nil: the commit's
	}
	txn := s.newWriteTxn()
	var in []answer // answered with the commit of txn
	size := 0
	written := map[string]struct{}{} // keys the functions in txn wrote
	commit := func() {
		err := s.commitTxn(txn)
		if errors.Is(err, badgerdb.ErrConflict) {
			// Only the committer writes; this never happens.
			err = fmt.Errorf("%w: %w", storage.ErrConflict, err)
		}
		for _, a := range in {
			if a.err != nil {
				a.r.done <- a.err
				continue
			}
			a.r.done <- err
		}
		in, size = nil, 0
		written = map[string]struct{}{}
	}
	for _, r := range batch {
		t := newWriteTx(txn, written, s.maxRecord)
		if err := run(r.fn, t); err != nil {
			in = append(in, answer{r: r, err: err})
			continue
		}
		if len(in) > 0 && size+t.bytes > maxBatchBytes {
			commit()
			txn = s.newWriteTxn()
			// The committed writes are what the function read through the
			// old transaction: its writes hold in the new one unchanged.
			t.txn, t.batch = txn, written
		}
		if err := t.apply(); err != nil {
			// The transaction holds part of t's writes: drop it, answer r,
			// and run the functions already in it again in a new one.
			txn.Discard()
			r.done <- fmt.Errorf("storage: write: %w", err)
			var redo []*writeReq
			for _, a := range in {
				redo = append(redo, a.r)
			}
			in, size = nil, 0
			written = map[string]struct{}{}
			if len(redo) > 0 {
				s.commitBatch(redo)
			}
			txn = s.newWriteTxn()
			continue
		}
		in = append(in, answer{r: r})
		size += t.bytes
	}
	if len(in) > 0 {
		commit()
		return
	}
	txn.Discard()
}

// newWriteTxn starts the committer's transaction: it reads every commit
// (the committer made them all).
func (s *Store) newWriteTxn() *badgerdb.Txn {
	return s.db.NewTransactionAt(s.ts.committed.Load(), true)
}

// commitTxn commits txn at the next timestamp and, once it is written and
// synced, publishes it to reads. A timestamp is never used twice, also
// after a failed commit.
func (s *Store) commitTxn(txn *badgerdb.Txn) error {
	ts := s.ts.next
	s.ts.next++
	if err := txn.CommitAt(ts, nil); err != nil {
		return err
	}
	s.ts.committed.Store(ts)
	s.db.SetDiscardTs(s.ts.discardTs())
	return nil
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
