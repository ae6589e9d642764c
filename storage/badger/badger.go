// Package badger is rxgate's embedded backend: storage.Store and
// storage.JobStore on one Badger database in a local directory (or in
// memory), for a single rxgate process.
//
// Durability. Badger runs without SyncWrites: the store's own write-ahead
// journal (package journal) makes each commit durable with one sync of its
// record, and Open replays it into Badger before anything reads. (Options
// .Durability can run Badger with SyncWrites and no journal instead, to
// compare the two. What the store assumes of Badger is pinned by the
// TestBadger tests, badgerpin_test.go.) Writes go
// through one committer goroutine that groups the waiting ones into one
// transaction, one journal record and one sync (group commit, commit.go),
// and the store picks the transactions' timestamps itself (Badger's
// managed mode), so that reads never wait for a commit in flight
// (timestamps). On Linux, readahead is turned off on the mappings of
// Badger's memtable logs (readahead_linux.go). With a key, Badger
// encrypts the store at rest (encryption.go) and the journal seals its
// records under it.
//
// Keys model the hierarchy (keys.go, the only place that builds key
// bytes), records are versioned JSON (records.go), and lists page through
// Badger iterators with the storage package's cursors (page.go). What
// exists only to work around Badger stays here: deletion markers under the
// pending-job prefix (jobs.go), the record cache (txn.go), the limits of a
// transaction's size (drugs.go). No Badger type leaves this package.
package badger

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	badgerdb "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"

	"github.com/rxgate/rxgate/storage"
	"github.com/rxgate/rxgate/storage/badger/journal"
)

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
	// MaxRecordBytes bounds one stored record, encoded (storage.ErrTooLarge
	// over it); 0 means storage.MaxRecordBytes. At most MaxRecordLimit.
	MaxRecordBytes int
	// EncryptionKey, 32 bytes, turns encryption at rest on (AES-256,
	// encryption.go). A store is encrypted from its creation or never;
	// Open refuses a key that does not match the store.
	EncryptionKey []byte
	// JournalSkipCorrupt opens a store whose journal holds damaged records
	// (journal.ErrCorrupt), which Open otherwise refuses: they are dropped,
	// with the acknowledged writes in them, and each damaged part is logged
	// as an error naming its segment and offset.
	JournalSkipCorrupt bool
	// Durability is how a commit is made durable: DurabilityJournal (the
	// default, "" too) or DurabilitySyncWrites, which exists to compare
	// the two (issue 26) and is not meant for production.
	Durability Durability

	// afterMigrationBatch, when set, is called after each batch a format
	// migration commits (the crash test kills the process there).
	afterMigrationBatch func()
	// beforeLanding, when set, is called with a batch's result once Badger
	// has committed it and before the committer learns of it, which it
	// then learns instead: tests hold a batch in flight, or fail it, with
	// it.
	beforeLanding func(error) error
	// laterWait, when set, replaces maxLaterWait.
	laterWait time.Duration
	// journalSegment, when set, replaces journal.DefaultSegmentSize (tests
	// fill segments with it).
	journalSegment int64
	// dropCommit, when set, is asked before each batch goes to Badger
	// (after the journal has it): true keeps it from Badger, as a power cut
	// would lose it from Badger's unsynced log. Tests replay it.
	dropCommit func(ts uint64) bool
	// memTableSize, when set, replaces Badger's memtable size (tests fill
	// memtables with it). Under about 27 MiB, Badger's limit on a batch
	// (15% of it) is below maxBatchBytes: what overflows it goes in the next
	// batch (commitState.add).
	memTableSize int64
}

// Durability names how a Store makes a commit durable before it is
// acknowledged.
type Durability string

const (
	// DurabilityJournal: the store's journal (package journal) syncs each
	// batch's record, and Badger runs without SyncWrites. The default.
	DurabilityJournal Durability = "journal"
	// DurabilitySyncWrites: Badger runs with SyncWrites (it msyncs its
	// memtable log, and syncs its value log, in each commit) under the
	// same group committer (commit.go), and there is no journal. It exists
	// for the comparison `make bench-load` and `make powercut` make (issue
	// 26, item 5). make powercut's kill-then-cut mode lost acknowledged
	// writes with it (where the run told, the restarted process's): it is
	// not for production.
	DurabilitySyncWrites Durability = "syncwrites"
)

// MaxRecordLimit is the largest Options.MaxRecordBytes: well under
// Badger's own value and batch limits (and the committer's batch,
// maxBatchBytes).
const MaxRecordLimit = 1 << 20

// valueThreshold is Badger's value threshold, pinned: a value of this
// many bytes or more would go to Badger's value log rather than inline in
// its memtable log and tables, and the value log is written and rewritten
// (by its garbage collection) outside what the journal makes durable
// (issue 26, defect B). It is the largest Badger allows, so the store's
// record bound stays under it: with MaxRecordBytes at MaxRecordLimit, a
// record of exactly MaxRecordLimit bytes is storage.ErrTooLarge. Every
// value the store writes is a bounded record, an event's payload (bounded
// the same), or a key or a count.
const valueThreshold = 1 << 20

// Store is rxgate's data on Badger. It is safe for concurrent use. One
// process at a time opens a directory (Badger locks it), which is what
// lets the job store count leases in memory and treat a lease found at
// Open as its dead owner's (jobs.go).
type Store struct {
	db  *badgerdb.DB
	now func() time.Time
	// log receives what the store reports itself (format migrations).
	log *slog.Logger
	// key is Options.EncryptionKey: a backup of the store is encrypted
	// with it.
	key []byte
	// afterMigrationBatch is Options.afterMigrationBatch.
	afterMigrationBatch func()
	// beforeLanding is Options.beforeLanding.
	beforeLanding func(error) error
	// laterWait is how long a write queued by updateLater waits for a
	// batch to join (maxLaterWait unless Options say).
	laterWait time.Duration
	// maxRecord bounds one stored record (Options.MaxRecordBytes).
	maxRecord int
	cursors   storage.Cursors
	records   recordCache
	hooks     hookIndex
	marks     [len(markedKinds)]atomic.Uint64 // one per marked kind (Store.mark)
	stamps    changeStamps                    // storage.ChangeStamper (stamps.go)
	jobs      jobState
	commit    committer
	ts        timestamps
	// dir is Options.Dir.
	dir string
	// journal makes the commits durable (package journal); nil in memory.
	journal *journal.Journal
	// syncWrites says Badger runs with SyncWrites and there is no journal
	// (DurabilitySyncWrites).
	syncWrites bool
	// gcHook, when set by a test, hears of each value-log collection
	// CollectGarbage runs.
	gcHook func(discardRatio float64)
	// dropCommit is Options.dropCommit.
	dropCommit func(ts uint64) bool
	// advice keeps readahead off the memtable logs' mappings (Linux;
	// readahead_linux.go); nil in memory.
	advice *walAdvice
}

var (
	_ storage.Backend          = (*Store)(nil)
	_ storage.Backuper         = (*Store)(nil)
	_ storage.GarbageCollector = (*Store)(nil)
	_ storage.Sizer            = (*Store)(nil)
	_ storage.WriteLoad        = (*Store)(nil)
)

// removeEmptyMemtables deletes the memtable logs (*.mem) of dir that are
// empty. Badger creates a memtable's log and then sizes it; a process
// killed between the two (it happens at start-up, when Badger creates a
// fresh memtable) leaves a file of zero bytes, which holds no write, and
// which Badger's Open then refuses with "Create a new file" (Badger issue
// #2207, found by the crash soak). Nothing else is removed: a log of any
// other size is Badger's to replay.
//
// It runs holding the lock Badger takes on the directory (prepareDir), so
// that it never touches the files of a process that has the store open:
// that one could be between creating a memtable's log and sizing it.
func removeEmptyMemtables(dir string, entries []os.DirEntry) error {
	for _, e := range entries {
		if !e.Type().IsRegular() || filepath.Ext(e.Name()) != ".mem" {
			continue
		}
		info, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if info.Size() == 0 {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// prepareDir readies an existing store directory for Badger, holding the
// lock Badger takes on it: it removes empty memtable logs and checks the
// encryption key against the store (checkEncryption).
func prepareDir(dir string, key []byte) error {
	unlock, err := lockDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil // a new store
	case errors.Is(err, errors.ErrUnsupported):
		return checkEncryption(dir, key) // no lock: leave the files to Badger
	case err != nil:
		return fmt.Errorf("storage: open: %w", err)
	}
	defer unlock()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("storage: open: %w", err)
	}
	if err := removeEmptyMemtables(dir, entries); err != nil {
		return fmt.Errorf("storage: open: %w", err)
	}
	return checkEncryption(dir, key)
}

// diskOptions are the Badger options of a store on disk in dir (the
// tests that pin what the store assumes of Badger open Badger with them).
func diskOptions(dir string, syncWrites bool) badgerdb.Options {
	return badgerdb.DefaultOptions(dir).
		// Acknowledged writes must survive a crash (on-premise clinics run
		// rxgate without an external database): the journal syncs them
		// (package journal), so Badger's own log need not be synced, unless
		// the journal is not used (DurabilitySyncWrites).
		WithSyncWrites(syncWrites).
		WithNumVersionsToKeep(1).
		WithValueThreshold(valueThreshold).
		// One goroutine writes (commit.go): there is nothing to conflict.
		WithDetectConflicts(false).
		WithCompression(options.None).
		WithNumCompactors(2)
}

// Open opens (creating when needed) the store described by opts.
func Open(opts Options) (*Store, error) {
	if !opts.InMemory && opts.Dir == "" {
		return nil, errors.New("storage: a data directory or in-memory mode is required")
	}
	if opts.MaxRecordBytes == 0 {
		opts.MaxRecordBytes = storage.MaxRecordBytes
	}
	switch opts.Durability {
	case "":
		opts.Durability = DurabilityJournal
	case DurabilityJournal, DurabilitySyncWrites:
	default:
		return nil, fmt.Errorf("storage: durability %q is neither %s nor %s", opts.Durability, DurabilityJournal, DurabilitySyncWrites)
	}
	syncWrites := opts.Durability == DurabilitySyncWrites && !opts.InMemory
	if opts.MaxRecordBytes < 0 || opts.MaxRecordBytes > MaxRecordLimit {
		return nil, fmt.Errorf("storage: a record bound of %d bytes is outside 1 to %d", opts.MaxRecordBytes, MaxRecordLimit)
	}
	bo := diskOptions(opts.Dir, syncWrites).WithLogger(badgerLogger{opts.Logger})
	if opts.memTableSize > 0 {
		bo = bo.WithMemTableSize(opts.memTableSize)
	}
	if opts.InMemory {
		// Tests and the sandbox open many small stores; keep each one small.
		bo = badgerdb.DefaultOptions("").
			WithInMemory(true).
			WithLogger(badgerLogger{opts.Logger}).
			WithDetectConflicts(false).
			WithMemTableSize(8 << 20).
			WithBlockCacheSize(8 << 20).
			WithIndexCacheSize(4 << 20)
	}
	if len(opts.EncryptionKey) > 0 {
		if opts.InMemory {
			return nil, errors.New("storage: an in-memory store is not encrypted (nothing is written to disk)")
		}
		if len(opts.EncryptionKey) != 32 {
			return nil, fmt.Errorf("storage: an encryption key has 32 bytes, not %d", len(opts.EncryptionKey))
		}
		// Badger keeps decrypted table indexes in this cache: bound it.
		bo = bo.WithEncryptionKey(opts.EncryptionKey).WithIndexCacheSize(64 << 20)
	}
	if !opts.InMemory {
		if err := prepareDir(opts.Dir, opts.EncryptionKey); err != nil {
			return nil, err
		}
		// Badger would make it, but not durably: its parent is never synced.
		if err := journal.MkdirAll(opts.Dir); err != nil {
			return nil, fmt.Errorf("storage: open: %w", err)
		}
	}
	// Managed mode: the store chooses the transactions' timestamps (see
	// timestamps), so that reads never wait for a commit in flight.
	db, err := badgerdb.OpenManaged(bo)
	if err != nil {
		return nil, fmt.Errorf("storage: open: %w", err)
	}
	s := &Store{db: db, dir: opts.Dir, syncWrites: syncWrites, now: opts.Now, maxRecord: min(opts.MaxRecordBytes, valueThreshold-1), log: opts.Logger, key: opts.EncryptionKey, afterMigrationBatch: opts.afterMigrationBatch,
		beforeLanding: opts.beforeLanding, dropCommit: opts.dropCommit, laterWait: cmp.Or(opts.laterWait, maxLaterWait)}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	switch {
	case syncWrites:
		err = s.openSyncWrites(opts)
	case !opts.InMemory:
		// Before anything reads: the journal's records go back into Badger.
		s.journal, err = s.openJournal(opts)
	}
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	s.ts.init(db.MaxVersion())
	// Until the first commit sets it, compactions could discard nothing:
	// no read is in flight yet, so everything committed may be compacted.
	db.SetDiscardTs(s.ts.discardTs())
	if s.now == nil {
		s.now = time.Now
	}
	if !opts.InMemory {
		s.startWALAdvice(opts.Dir)
	}
	s.startCommitter()
	ctx := context.Background()
	format, recorded, err := s.checkFormat(ctx)
	var key []byte
	if err == nil {
		key, err = s.LoadOrCreateMeta(ctx, storage.MetaCursorKey, storage.NewCursorKey)
	}
	if err == nil {
		s.cursors = storage.NewCursors(key)
		err = s.migrate(ctx, format, recorded)
	}
	if err == nil {
		err = s.jobs.load(s)
	}
	if err != nil {
		s.closeCommitter()
		s.advice.close()
		s.journal.Halt()
		_ = s.journal.Close(false)
		_ = db.Close()
		return nil, err
	}
	return s, nil
}

// openJournal opens the store's journal, which replays its records into
// Badger (replay).
func (s *Store) openJournal(opts Options) (*journal.Journal, error) {
	j, err := journal.Open(journal.Options{StoreDir: opts.Dir, Key: opts.EncryptionKey, SegmentSize: opts.journalSegment, SyncStore: s.syncBadger,
		SkipCorrupt: opts.JournalSkipCorrupt, Dropped: func(err error) {
			s.log.Error("journal records dropped: storage.journal_skip_corrupt is set", "error", err)
		}}, s.replay)
	if errors.Is(err, journal.ErrCorrupt) {
		err = fmt.Errorf("%w (storage.journal_skip_corrupt: true opens the store without them)", err)
	}
	return j, err
}

// openSyncWrites readies a store opened with DurabilitySyncWrites, before
// anything reads. A journal left by the store's last process under
// DurabilityJournal may hold acknowledged batches Badger lacks: it is
// replayed, made durable in Badger's logs, and emptied. Then Badger's
// logs are synced whole: after a crash of the process, Badger reopened
// them as the page cache held them, with the batches whose msync never
// finished (never acknowledged), and the store must not serve what a
// power cut could still take away (issue 26, defect A, as the journal's
// Open does for its own).
func (s *Store) openSyncWrites(opts Options) error {
	left, err := journal.HasSegments(opts.Dir)
	if err != nil {
		return err
	}
	if left {
		j, err := s.openJournal(opts)
		if err != nil {
			return err
		}
		// Close(true) syncs Badger's logs, which now hold every replayed
		// record, then retires every segment.
		if err := j.Close(true); err != nil {
			return err
		}
	}
	if err := s.syncBadger(); err != nil {
		return fmt.Errorf("storage: open: %w", err)
	}
	return nil
}

// replay writes one of the journal's records into Badger at its commit
// timestamp (Open).
func (s *Store) replay(ts uint64, writes []journal.Write) error {
	txn := s.db.NewTransactionAt(ts, true)
	defer txn.Discard()
	for _, w := range writes {
		var err error
		if w.Deleted {
			err = txn.Delete(w.Key)
		} else {
			err = txn.Set(w.Key, w.Value)
		}
		if err != nil {
			return fmt.Errorf("storage: journal replay: %w", err)
		}
	}
	if err := txn.CommitAt(ts, nil); err != nil {
		return fmt.Errorf("storage: journal replay: %w", err)
	}
	return nil
}

// syncBadger makes durable everything Badger was given: its memtable logs
// and value logs, synced through their mappings while it is open, then
// each file, and the directory.
func (s *Store) syncBadger() error {
	if !s.db.IsClosed() {
		if err := s.db.Sync(); err != nil {
			return err
		}
	}
	return journal.SyncFiles(s.dir, ".mem", ".vlog")
}

// Size reports the store's size on disk: the LSM tree's and the value
// log's (for metrics).
func (s *Store) Size() (lsm, vlog int64) { return s.db.Size() }

// Close commits the writes already queued, refuses further ones, and
// closes the store.
func (s *Store) Close() error {
	s.closeCommitter()
	s.advice.close()
	s.journal.Halt()
	if err := s.db.Close(); err != nil {
		_ = s.journal.Close(false)
		return fmt.Errorf("storage: close: %w", err)
	}
	// Badger wrote its memtables to tables: the journal's records are all
	// there.
	if err := s.journal.Close(true); err != nil {
		return fmt.Errorf("storage: close: %w", err)
	}
	return nil
}

// Ping reports whether the store is open and readable.
func (s *Store) Ping(ctx context.Context) error {
	if s.db.IsClosed() {
		return errors.New("storage: closed")
	}
	if err := s.journal.Failed(); err != nil {
		return err
	}
	return s.view(ctx, func(txn *tx) error { return nil })
}

// LoadOrCreateMeta returns the value stored under the internal name, storing
// the result of create first when there is none.
func (s *Store) LoadOrCreateMeta(ctx context.Context, name string, create func() ([]byte, error)) ([]byte, error) {
	var out []byte
	err := s.update(ctx, func(txn *tx) error {
		v, err := getRaw(txn, metaKey(name))
		if err == nil {
			out = v
			return nil
		}
		if !errors.Is(err, storage.ErrNotFound) {
			return err
		}
		v, err = create()
		if err != nil {
			return err
		}
		out = v
		return txn.set(metaKey(name), v)
	})
	if err != nil {
		return nil, fmt.Errorf("storage: meta %s: %w", name, err)
	}
	return out, nil
}

// view runs fn in a read-only transaction that sees every commit
// acknowledged so far, and none that is still being written.
func (s *Store) view(ctx context.Context, fn func(txn *tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	readTs := s.ts.beginRead()
	defer s.ts.endRead(readTs)
	txn := s.db.NewTransactionAt(readTs, false)
	defer txn.Discard()
	return fn(&tx{txn: txn, maxRecord: s.maxRecord})
}

// timestamps are the transactions' timestamps. Badger stamps every value
// with its commit's timestamp and lets a transaction read what was
// committed at or before its own. Left to Badger, a new transaction's read
// timestamp covers the commits in flight, so it waits until they are
// written and synced: every read would wait for the disk whenever a write
// is under way. Here the committer (the only writer) publishes a commit's
// timestamp only once the commit is synced, and reads use the newest
// published one: they never wait, and never see a write that is not yet
// durable. Old versions may be dropped at or below the oldest timestamp a
// read still uses (Badger's discard timestamp).
type timestamps struct {
	committed atomic.Uint64 // the newest synced commit: what reads see
	next      uint64        // the next commit's; the committer's alone
	mu        sync.Mutex
	reads     map[uint64]int // read timestamps in use
}

func (t *timestamps) init(maxVersion uint64) {
	t.committed.Store(maxVersion)
	t.next = maxVersion + 1
	t.reads = make(map[uint64]int)
}

func (t *timestamps) beginRead() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	ts := t.committed.Load()
	t.reads[ts]++
	return ts
}

func (t *timestamps) endRead(ts uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.reads[ts]--; t.reads[ts] <= 0 {
		delete(t.reads, ts)
	}
}

// discardTs is the oldest timestamp a read may still use.
func (t *timestamps) discardTs() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	oldest := t.committed.Load()
	for ts := range t.reads {
		oldest = min(oldest, ts)
	}
	return oldest
}

// nowUTC is the store clock's time as stores keep it.
func (s *Store) nowUTC() time.Time {
	return storage.Timestamp(s.now())
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
