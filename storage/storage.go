// Package storage keeps rxgate's data in Badger: partners, organizations,
// their users, the users' patients and custom drugs, and the patients'
// prescriptions.
//
// Keys model the hierarchy (see keys.go, the only place that builds key
// bytes), records are versioned JSON (records.go), and lists page through
// Badger iterators with opaque, tamper-evident cursors (page.go). No Badger
// type leaves this package: callers see domain types and the sentinel
// errors below.
package storage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// Sentinel errors. Every error a Store returns for these conditions wraps
// one of them; anything else is an internal failure.
var (
	// ErrNotFound reports that the addressed record, or one of its
	// ancestors, does not exist.
	ErrNotFound = errors.New("storage: not found")
	// ErrAlreadyExists reports a create that collides with an existing
	// record or unique index (an e-mail in an organization, a
	// partner_patient_id).
	ErrAlreadyExists = errors.New("storage: already exists")
	// ErrConflict reports a transaction that kept conflicting with
	// concurrent writers after every retry.
	ErrConflict = errors.New("storage: conflict")
	// ErrBadCursor reports a lastKey that is malformed, altered, or issued
	// for another list.
	ErrBadCursor = errors.New("storage: invalid cursor")
	// ErrTooLarge reports a record over maxRecordBytes. It is checked before
	// Badger sees the value, whose own error would quote the value's bytes
	// (patient data) into whatever logs it.
	ErrTooLarge = errors.New("storage: record too large")
)

// maxTxnRetries bounds how often a conflicting read-modify-write
// transaction is retried before ErrConflict is returned.
const maxTxnRetries = 50

// Options says where and how to open a Store.
type Options struct {
	// Dir is the data directory. Ignored when InMemory is set.
	Dir string
	// InMemory keeps everything in memory; nothing survives Close.
	InMemory bool
	// Logger receives Badger's warnings and errors. Nil discards them.
	Logger *slog.Logger
	// Now is the clock used for timestamps; nil means time.Now.
	Now func() time.Time
}

// Store is rxgate's data store. It is safe for concurrent use.
type Store struct {
	db        *badger.DB
	now       func() time.Time
	cursorKey []byte
	records   recordCache
}

// Open opens (creating when needed) the store described by opts.
func Open(opts Options) (*Store, error) {
	if !opts.InMemory && opts.Dir == "" {
		return nil, errors.New("storage: a data directory or in-memory mode is required")
	}
	bo := badger.DefaultOptions(opts.Dir).
		WithLogger(badgerLogger{opts.Logger}).
		// Acknowledged writes must survive a crash (on-premise clinics run
		// rxgate without an external database).
		WithSyncWrites(true).
		WithNumVersionsToKeep(1)
	if opts.InMemory {
		// Tests and the sandbox open many small stores; keep each one small.
		bo = badger.DefaultOptions("").
			WithInMemory(true).
			WithLogger(badgerLogger{opts.Logger}).
			WithMemTableSize(8 << 20).
			WithBlockCacheSize(8 << 20).
			WithIndexCacheSize(4 << 20)
	}
	db, err := badger.Open(bo)
	if err != nil {
		return nil, fmt.Errorf("storage: open: %w", err)
	}
	s := &Store{db: db, now: opts.Now}
	if s.now == nil {
		s.now = time.Now
	}
	key, err := s.LoadOrCreateMeta(context.Background(), metaCursorKey, func() ([]byte, error) {
		return randomBytes(32), nil
	})
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	s.cursorKey = key
	return s, nil
}

// Close flushes and closes the store.
func (s *Store) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("storage: close: %w", err)
	}
	return nil
}

// Ping reports whether the store is open and readable.
func (s *Store) Ping(ctx context.Context) error {
	if s.db.IsClosed() {
		return errors.New("storage: closed")
	}
	return s.view(ctx, func(txn *badger.Txn) error { return nil })
}

// LoadOrCreateMeta returns the value stored under the internal name, storing
// the result of create first when there is none. It is how the cursor key
// and the built-in issuer's signing key are generated once and kept.
func (s *Store) LoadOrCreateMeta(ctx context.Context, name string, create func() ([]byte, error)) ([]byte, error) {
	var out []byte
	err := s.update(ctx, func(txn *badger.Txn) error {
		item, err := txn.Get(metaKey(name))
		if err == nil {
			out, err = item.ValueCopy(nil)
			return err
		}
		if !errors.Is(err, badger.ErrKeyNotFound) {
			return err
		}
		v, err := create()
		if err != nil {
			return err
		}
		out = v
		return txn.Set(metaKey(name), v)
	})
	if err != nil {
		return nil, fmt.Errorf("storage: meta %s: %w", name, err)
	}
	return out, nil
}

// view runs fn in a read-only transaction.
func (s *Store) view(ctx context.Context, fn func(txn *badger.Txn) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.db.View(fn)
}

// update runs fn in a read-write transaction, retrying the whole function
// when Badger reports a conflict with a concurrent writer, so that two
// concurrent changes to one record both survive. fn must therefore be safe
// to run more than once: it reads what it needs inside the transaction.
func (s *Store) update(ctx context.Context, fn func(txn *badger.Txn) error) error {
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		err := s.db.Update(fn)
		if !errors.Is(err, badger.ErrConflict) {
			return err
		}
		if attempt == maxTxnRetries {
			return fmt.Errorf("%w: gave up after %d retries", ErrConflict, attempt)
		}
		time.Sleep(time.Duration(attempt+1) * 100 * time.Microsecond)
	}
}

// now returns the store clock's time in UTC, truncated to microseconds so
// that it survives a JSON round trip unchanged.
func (s *Store) nowUTC() time.Time {
	return s.now().UTC().Truncate(time.Microsecond)
}

// badgerLogger adapts slog to Badger's logger; Badger's info and debug
// chatter is dropped.
type badgerLogger struct{ l *slog.Logger }

func (b badgerLogger) Errorf(f string, a ...any) {
	if b.l != nil {
		b.l.Error("badger: " + fmt.Sprintf(f, a...))
	}
}

func (b badgerLogger) Warningf(f string, a ...any) {
	if b.l != nil {
		b.l.Warn("badger: " + fmt.Sprintf(f, a...))
	}
}

func (badgerLogger) Infof(string, ...any)  {}
func (badgerLogger) Debugf(string, ...any) {}
