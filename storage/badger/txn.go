package badger

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	badgerdb "github.com/dgraph-io/badger/v4"

	"github.com/rxgate/rxgate/storage"
	"github.com/rxgate/rxgate/storage/badger/journal"
)

// tx is one function's view of a transaction. A read-only one wraps a
// View transaction. A write function's writes wait in it until the
// function returns without an error; only then do they join the batch
// transaction it runs in (commit.go), so a function that fails leaves
// nothing behind, whatever it wrote before failing. Its reads see, newest
// first, its own pending writes, the batch's writes so far, the writes of
// the batch in flight (committed but not yet synced, which Badger does not
// show yet) and what was committed before. An iterator sees the batch's
// writes and what was committed, but neither the function's own writes nor
// the batch in flight: iterating a prefix the function has written to is
// refused (a programming error), and iterating one the batch in flight
// wrote to marks the tx stale, so that the committer runs the function
// again once that batch is synced.
type tx struct {
	txn     *badgerdb.Txn
	pending map[string]pendingWrite // nil in a read-only tx
	order   []string                // pending keys, first write first
	bytes   int                     // size of the pending writes
	// batch holds what the functions before this one in the batch wrote
	// (nil in a read-only tx): their values have no version yet.
	batch map[string]pendingWrite
	// prior is the batch in flight when this one began, nil when none.
	prior *flight
	// batchMarked is what the functions before this one in the batch
	// wrote of the marked kinds of keys.
	batchMarked marked
	// stale is set when the function iterated over keys the batch in
	// flight wrote: what it did is discarded and it runs again later.
	stale bool
	// maxRecord bounds one record written (putRecord): the store's.
	maxRecord int
}

// pendingWrite is a write a function or a batch made to a key, not yet
// committed: the journal's Change, so that a batch's writes go to the
// journal as they are (journal.Journal.Append).
type pendingWrite = journal.Change

// newWriteTx returns a write function's tx in b's transaction, after the
// functions that wrote b and the batch in flight.
func newWriteTx(b *batch, maxRecord int) *tx {
	t := &tx{pending: make(map[string]pendingWrite), maxRecord: maxRecord}
	t.join(b)
	return t
}

// join makes t's writes go to b, after the functions that wrote b and the
// batch in flight when b began.
func (t *tx) join(b *batch) {
	t.txn, t.batch, t.prior, t.batchMarked = b.txn, b.written, b.prior, b.marked
}

// marked is a set of the kinds of keys whose changes the store marks: a
// batch that writes one stores its commit timestamp as the kind's mark
// before its commit is published (commitState.land), so that a write can
// tell whether what an earlier read saw of them may have changed
// (Store.changedSince).
type marked uint8

const (
	markHooks marked = 1 << iota // a partner's endpoint index (hookIndex)
	markPlan                     // a patient, a user or an organization: what a create's plan reads
)

// markedKinds lists every marked kind, each with its mark (Store.mark).
var markedKinds = [...]marked{markHooks, markPlan}

// markOf returns the marked kind of key k, or 0.
func markOf(k string) marked {
	switch {
	case strings.HasPrefix(k, prefixPartnerHook):
		return markHooks
	case strings.HasPrefix(k, prefixPatient), strings.HasPrefix(k, prefixUser), strings.HasPrefix(k, prefixOrganization):
		return markPlan
	}
	return 0
}

// wroteMarked returns the marked kinds of keys the function wrote.
func (t *tx) wroteMarked() marked {
	var m marked
	for _, k := range t.order {
		m |= markOf(k)
	}
	return m
}

func (t *tx) write(key, value []byte, deleted bool) error {
	if t.pending == nil {
		return errors.New("storage: write in a read-only transaction")
	}
	k := string(key)
	if _, ok := t.pending[k]; !ok {
		t.order = append(t.order, k)
	}
	t.pending[k] = pendingWrite{Value: value, Deleted: deleted}
	t.bytes += len(key) + len(value) + 16
	return nil
}

func (t *tx) set(key, value []byte) error { return t.write(key, value, false) }

func (t *tx) delete(key []byte) error { return t.write(key, nil, true) }

// written returns the write to key that this function, its batch or the
// batch in flight made, newest first.
func (t *tx) written(key []byte) (pendingWrite, bool) {
	if t.pending == nil {
		return pendingWrite{}, false
	}
	if w, ok := t.pending[string(key)]; ok {
		return w, true
	}
	if w, ok := t.batch[string(key)]; ok {
		return w, true
	}
	if t.prior != nil {
		w, ok := t.prior.written[string(key)]
		return w, ok
	}
	return pendingWrite{}, false
}

// value calls fn with the value at key as this function sees it, or
// returns storage.ErrNotFound.
func (t *tx) value(key []byte, fn func([]byte) error) error {
	if w, ok := t.written(key); ok {
		if w.Deleted {
			return storage.ErrNotFound
		}
		return fn(w.Value)
	}
	item, err := t.txn.Get(key)
	if errors.Is(err, badgerdb.ErrKeyNotFound) {
		return storage.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("storage: get: %w", err)
	}
	return item.Value(fn)
}

// version returns the version of the committed value at key (0 when there
// is none), and false when the key was written in this batch or in the
// one in flight, whose values have no version yet.
func (t *tx) version(key []byte) (uint64, bool, error) {
	if _, ok := t.written(key); ok {
		return 0, false, nil
	}
	item, err := t.txn.Get(key)
	if errors.Is(err, badgerdb.ErrKeyNotFound) {
		return 0, true, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("storage: get: %w", err)
	}
	return item.Version(), true, nil
}

// iterator returns an iterator over the batch's keys under opts.Prefix.
func (t *tx) iterator(opts badgerdb.IteratorOptions) *badgerdb.Iterator {
	for k := range t.pending {
		if strings.HasPrefix(k, string(opts.Prefix)) {
			panic(fmt.Sprintf("storage: iterating over %q after writing under it in one function", opts.Prefix))
		}
	}
	if t.prior != nil && t.prior.wroteUnder(opts.Prefix) {
		t.stale = true
	}
	return t.txn.NewIterator(opts)
}

// apply adds the function's writes to its transaction, and to the batch's.
func (t *tx) apply() error {
	for _, k := range t.order {
		w := t.pending[k]
		t.batch[k] = w
		var err error
		if w.Deleted {
			err = t.txn.Delete([]byte(k))
		} else {
			err = t.txn.Set([]byte(k), w.Value)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// getRecord decodes the record at key into v, or returns ErrNotFound.
func getRecord(txn *tx, key []byte, v any) error {
	return txn.value(key, func(b []byte) error { return decode(b, v) })
}

// getRaw returns a copy of the value at key, or ErrNotFound.
func getRaw(txn *tx, key []byte) ([]byte, error) {
	var out []byte
	err := txn.value(key, func(b []byte) error {
		out = append([]byte(nil), b...)
		return nil
	})
	return out, err
}

// putRecord encodes v and writes it at key; a record over the store's
// bound is storage.ErrTooLarge.
func putRecord(txn *tx, key []byte, v any) error {
	b, err := encode(v)
	if err != nil {
		return err
	}
	if len(b) > txn.maxRecord {
		return storage.ErrTooLarge
	}
	return txn.set(key, b)
}

// exists reports whether key holds a value.
func exists(txn *tx, key []byte) (bool, error) {
	err := txn.value(key, func([]byte) error { return nil })
	if errors.Is(err, storage.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// recordCache remembers decoded records of the hot read paths by key and
// Badger version. A record's version changes with every write, so a hit is
// exactly what decoding the stored bytes would give, without the JSON
// decode that otherwise dominates an authenticated request.
type recordCache struct {
	mu sync.RWMutex
	m  map[string]cachedRecord
}

type cachedRecord struct {
	version uint64
	value   any
}

// maxCachedRecords bounds the cache; past it, the cache starts over.
const maxCachedRecords = 50_000

// getCached is getRecord for read-only transactions, through the record
// cache; it also returns the record's version. The value it returns may
// be shared with other callers: they must not modify what its slices or
// pointers refer to.
func getCached[T any](s *Store, t *tx, key []byte) (T, uint64, error) {
	var v T
	item, err := t.txn.Get(key)
	if errors.Is(err, badgerdb.ErrKeyNotFound) {
		return v, 0, storage.ErrNotFound
	}
	if err != nil {
		return v, 0, fmt.Errorf("storage: get: %w", err)
	}
	version := item.Version()
	s.records.mu.RLock()
	e, ok := s.records.m[string(key)]
	s.records.mu.RUnlock()
	if ok && e.version == version {
		if cached, ok := e.value.(T); ok {
			return cached, version, nil
		}
	}
	if err := item.Value(func(b []byte) error { return decode(b, &v) }); err != nil {
		return v, 0, err
	}
	s.records.mu.Lock()
	if s.records.m == nil || len(s.records.m) >= maxCachedRecords {
		s.records.m = make(map[string]cachedRecord)
	}
	s.records.m[string(key)] = cachedRecord{version: version, value: v}
	s.records.mu.Unlock()
	return v, version, nil
}
