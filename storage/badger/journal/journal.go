// Package journal is the Badger store's write-ahead log: it makes each
// batch of commits durable while Badger itself runs without SyncWrites.
//
// A batch is durable once its record is in the journal: the store's
// flusher appends the record, which the journal syncs (fdatasync), while
// it hands the batch to Badger. Badger's own log (NNNNN.mem) is written
// through a shared mapping of a sparse file, and syncing it (msync, then a
// sync of the value log) is slow and costs much CPU under load: the kernel
// write-protects every page it writes out, and each is faulted again by
// the next batch. The journal writes whole 4 KiB blocks with pwrite into a
// file whose blocks were written once when it was made, so that a sync
// writes the record's blocks and flushes the disk's cache, with no block
// to allocate and no file size to change. `make bench-load` measures
// durable creates through it.
//
// Badger still writes its own log, unsynced: after the process dies its
// page cache has every batch, and after the machine loses power the
// journal has every acknowledged one. Open replays the journal's records
// (the store writes them into Badger at their commit timestamps) before
// anything reads. A record that Badger already has is written again as it
// was (same key, same version, same value); the journal always holds
// every commit after its oldest record, in order, so whatever replay
// writes again is followed by every later write of the same keys: the
// newest version of a key after replay is the one it had.
//
// Segments. The journal is a sequence of segment files in <store>/journal
// (Dir), NNNNNNNNNNNNNNNN.wal, numbered by a sequence that only grows,
// each DefaultSegmentSize bytes (or one batch, when larger). A full
// segment is retired by the checkpointer once Badger holds its records
// durably: once the memtables holding them are in Badger's own synced
// tables, or, past maxPendingSegments waiting segments, after Badger's
// files are synced (Options.SyncStore). It renames the segment to
// free-N.wal, oldest first, one durable rename at a time, so that the
// journal never holds a segment without every later one. Free segments
// are used again (renamed to the next number and given a new header):
// their blocks are already written, and a record of an earlier life
// carries the old number and is never read as one of the new. A clean
// Close retires every segment after Badger's own Close (which writes its
// memtables to tables).
//
// Formats. A segment begins with a header block: magic, its number, a
// random salt and whether it is encrypted, with a CRC-32C. Each record
// starts on a block boundary: a 32-byte header (CRC-32C of the rest,
// payload length, segment number, commit timestamp) and the payload,
// padded with zeros to the next block. The payload lists the batch's
// writes (kind, key, value). On an encrypted store the payload is sealed
// with AES-256-GCM under a key derived (HKDF-SHA256) from the store's key
// and the segment's salt, with the record's offset as nonce and its header
// as additional data: nothing of a patient's reaches the disk in clear.
// Replay reads a segment up to its first record that is not whole (a
// batch whose sync never finished, or the zeros after the last). Only the
// last segment may end in a record of its own that is not whole, and
// nothing whole may follow it: that is the write a crash interrupted,
// never acknowledged, and Open zeroes its first block (or removes a
// segment whose header is not whole) before the next segment begins.
// Anywhere else a record that is not whole was damaged after its sync,
// and acknowledged records would be lost: Open fails with ErrCorrupt,
// naming the segment and the offset. Damage to the last record of the
// last segment cannot be told from a torn write, and is dropped as one.
//
// Files. Every file operation goes through Options.FS (the operating
// system's unless a test simulates crashes), and every create, rename and
// remove is followed by a sync of its directory before it is relied on,
// the journal's own directory included (its parent is synced when it is
// made).
//
// A failed write or sync leaves the journal failed: every later batch is
// refused until a restart (what reached the disk is unknown, and a later
// sync could report the failure as success). Reads go on.
//
// The journal knows Badger's directory only by its file names (memtable
// logs *.mem, value logs *.vlog); it imports neither Badger nor any other
// rxgate package.
package journal

import (
	"crypto/cipher"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Dir is the journal's directory, within the store's.
const Dir = "journal"

// DefaultSegmentSize is a segment's size unless Options.SegmentSize says
// otherwise: large enough that a busy store seldom starts a segment (a
// rename and a synced header), small enough that the journal, at most
// maxPendingSegments of them waiting, stays a small part of the disk and
// of what a start replays. `make bench-load` drives it at full load.
const DefaultSegmentSize = 16 << 20

const (
	// blockSize is the unit of the journal's writes: a segment's header is
	// one block, and each record starts on a block boundary and fills
	// whole blocks, so that no write reads a block from the disk first.
	blockSize = 4096
	// freeKeep bounds the free segments kept for use again.
	freeKeep = 2
	// maxPendingSegments bounds the full segments waiting for Badger to
	// write their memtables to tables (checkpoint): the journal's size,
	// about a memtable's worth of batches, and what a start replays.
	maxPendingSegments = 8
	// pollEvery is how often the checkpointer looks for memtables
	// written to tables while segments wait.
	pollEvery = time.Second
	// segmentExt ends a segment file's name (N.wal), freePrefix begins a
	// free one's (free-N.wal).
	segmentExt = ".wal"
	freePrefix = "free-"
)

// Change is what a batch did to one key: set it to Value, or, when
// Deleted, delete it. The store's transactions keep their pending writes
// in this form, so that a batch's writes reach Append as they are.
type Change struct {
	Value   []byte
	Deleted bool
}

// Write is one write of a replayed record: a key and what the batch did
// to it.
type Write struct {
	Key []byte
	Change
}

// Options say where a journal lives and how it makes its store durable.
type Options struct {
	// StoreDir is Badger's directory; the journal lives in its Dir.
	StoreDir string
	// Key is the store's encryption key; nil for none. A segment's records
	// are sealed under a key derived from it.
	Key []byte
	// SegmentSize is a new segment's size; 0 means DefaultSegmentSize
	// (tests fill segments with less).
	SegmentSize int64
	// SyncStore makes everything Badger was given durable. The
	// checkpointer calls it when more than maxPendingSegments segments
	// wait, and a clean Close before it retires every segment.
	SyncStore func() error
	// FS is the file system the journal's files are on; nil means OS.
	FS FS
	// SkipCorrupt makes Open go on past damaged records (ErrCorrupt),
	// which it otherwise refuses: they are dropped, and acknowledged
	// batches with them. Open tells Dropped of each.
	SkipCorrupt bool
	// Dropped, with SkipCorrupt, is told of each damaged part of a segment
	// that Open dropped: an ErrCorrupt error naming the segment and the
	// offset.
	Dropped func(error)

	// manualCheckpoint, set by tests, starts no checkpointer: they call
	// checkpoint themselves, so that every file operation comes in an
	// order they choose.
	manualCheckpoint bool
}

// Journal is the store's write-ahead log. Append is the flusher's alone;
// the checkpointer goroutine retires full segments. A nil *Journal is that
// of a store in memory: it records nothing, and every method but Fail
// does nothing.
type Journal struct {
	fs       FS
	dir      string
	storeDir string // Badger's directory
	key      []byte // the store's encryption key; nil for none
	segSize  int64
	// maxPending is maxPendingSegments (tests set less).
	maxPending int
	// syncStore is Options.SyncStore.
	syncStore func() error

	active *segment // the segment records go to (flusher)
	plain  []byte   // the payload being encoded (flusher)
	buf    []byte   // the record being sealed (flusher)

	// mu guards full, free, nextSeq and err.
	mu      sync.Mutex
	full    []*segment // retired by the checkpointer, oldest first
	free    []string   // free segment files, for use again
	nextSeq uint64
	err     error // the first failed write or sync: the journal is failed

	wake chan struct{} // a segment is full
	stop chan struct{} // closed by Halt
	done chan struct{} // closed when the checkpointer has ended
}

// segment is one journal file.
type segment struct {
	f    File // nil once closed
	path string
	seq  uint64
	off  int64 // where the next record goes
	size int64
	aead cipher.AEAD // nil: not encrypted
	// mems are the memtable logs that existed when the checkpointer first
	// saw the segment full: once they are gone, Badger has its records in
	// tables (checkpointer's).
	mems []string
}

// Open opens the journal of the store in opts.StoreDir, creating it when
// needed, replays its records in order through replay, and starts a new
// segment and the checkpointer. The store calls it before anything reads,
// and writes each replayed record into Badger at its commit timestamp.
func Open(opts Options, replay func(ts uint64, writes []Write) error) (*Journal, error) {
	storeDir, key := opts.StoreDir, opts.Key
	segSize := opts.SegmentSize
	if segSize == 0 {
		segSize = DefaultSegmentSize
	}
	fsys := opts.FS
	if fsys == nil {
		fsys = OS
	}
	dir := filepath.Join(storeDir, Dir)
	j := &Journal{fs: fsys, dir: dir, storeDir: storeDir, key: key, segSize: segSize, maxPending: maxPendingSegments, syncStore: opts.SyncStore,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	// Its segments are durable only once the journal's own name is.
	if err := mkdirDurable(fsys, dir); err != nil {
		return nil, fmt.Errorf("storage: journal: %w", err)
	}
	entries, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("storage: journal: %w", err)
	}
	var seqs []uint64
	for _, e := range entries {
		name := e.Name()
		if strings.HasSuffix(name, segmentExt+".tmp") {
			// A segment being made when the process stopped.
			if err := fsys.Remove(filepath.Join(dir, name)); err != nil {
				return nil, fmt.Errorf("storage: journal: %w", err)
			}
			continue
		}
		if !strings.HasSuffix(name, segmentExt) {
			continue
		}
		if strings.HasPrefix(name, freePrefix) {
			j.free = append(j.free, filepath.Join(dir, name))
			name = strings.TrimPrefix(name, freePrefix)
		}
		seq, err := strconv.ParseUint(strings.TrimSuffix(name, segmentExt), 16, 64)
		if err != nil {
			return nil, fmt.Errorf("storage: journal: unexpected file %s", e.Name())
		}
		j.nextSeq = max(j.nextSeq, seq+1)
		if !strings.HasPrefix(e.Name(), freePrefix) {
			seqs = append(seqs, seq)
		}
	}
	slices.Sort(seqs)
	var lastTs uint64
	for i, seq := range seqs {
		path := j.segmentPath(seq)
		data, err := fsys.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("storage: journal: %w", err)
		}
		name := filepath.Join(Dir, filepath.Base(path))
		corrupt := func(err error) error {
			err = fmt.Errorf("storage: journal: segment %s: %w", name, err)
			if !opts.SkipCorrupt {
				return fmt.Errorf("%w: refusing to open, acknowledged records would be lost", err)
			}
			if opts.Dropped != nil {
				opts.Dropped(err)
			}
			return nil
		}
		end, err := replaySegment(data, seq, key, corrupt, func(ts uint64, writes []Write) error {
			if len(writes) == 0 {
				// A batch that wrote nothing, recorded by an rxgate before
				// Append skipped them: it changes nothing, and Badger has no
				// version at its timestamp, so the process after it took
				// that timestamp again for a batch that did write. Order is
				// kept between records that write.
				return nil
			}
			if ts <= lastTs {
				return fmt.Errorf("record at %d after one at %d", ts, lastTs)
			}
			lastTs = ts
			return replay(ts, writes)
		})
		last := i == len(seqs)-1
		switch {
		case err != nil:
		case !last && end.noHeader:
			// Every segment before the last was whole before the next began.
			err = corrupt(corruptAt(0, "its header is damaged, and it is not the last segment"))
		case !last && end.badRecord:
			// Every record of a segment before the last was synced before
			// the next segment began: none of them may be torn.
			err = corrupt(corruptAt(end.off, "not the last segment, whose end alone a crash may tear"))
		}
		if errors.Is(err, ErrCorrupt) {
			return nil, err // it names the segment
		}
		if err != nil {
			return nil, fmt.Errorf("storage: journal: segment %s: %w", name, err)
		}
		if last && end.torn() {
			// The write the crash interrupted, never acknowledged. Made an
			// end that reads as one, so that this segment, no longer the
			// last once the next begins, is not taken for a corrupt one.
			if err := j.repair(path, end); err != nil {
				return nil, fmt.Errorf("storage: journal: segment %s: %w", name, err)
			}
			if end.noHeader {
				continue // removed: it had no record
			}
		}
		j.full = append(j.full, &segment{path: path, seq: seq})
	}
	if err := j.syncReplayed(); err != nil {
		return nil, fmt.Errorf("storage: journal: %w", err)
	}
	if err := j.activate(0); err != nil {
		return nil, err
	}
	if opts.manualCheckpoint {
		close(j.done)
		return j, nil
	}
	go j.run()
	j.signal()
	return j, nil
}

// syncReplayed makes durable what the replay exposed, before the store
// serves any of it (issue 26, defect A, "seen, then gone"). After a
// process crash, the segments were read through the page cache: their
// last records may never have been synced (their Append failed or never
// returned, so they were not acknowledged), yet the store now serves them
// and sends their webhooks. Badger, likewise, reopened its memtable logs
// as the crashed process left them in the page cache, and has just been
// given the replayed records without a sync. A power cut in the next
// seconds would lose records that partners had read and been notified
// of, while later acknowledged ones survived.
//
// So, before Open returns: each replayed segment file is fsynced, whole,
// which makes every record replay read durable where it was read (and
// keeps a segment that is no longer the last from losing its tail to a
// power cut, which the next Open would refuse as corruption); then
// SyncStore makes Badger's memtable and value logs durable, which holds
// whatever Badger reopened and the replayed records. Together that is
// everything a read can see: a record is in a segment, in Badger's logs,
// or in tables Badger synced itself before it recorded them in its
// synced manifest. The directory entries of the segments were synced
// when each was made (activate), and of Badger's files by SyncStore.
func (j *Journal) syncReplayed() error {
	for _, seg := range j.full {
		f, err := j.fs.OpenFile(seg.path, os.O_RDONLY, 0)
		if err != nil {
			return err
		}
		err = f.Sync()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	if len(j.full) == 0 || j.syncStore == nil {
		// No segment: the last process closed cleanly, or the
		// checkpointer had retired every segment, each only once its
		// records were in tables or synced in Badger's logs. Badger's
		// logs hold nothing that is not durable already.
		return nil
	}
	return j.syncStore()
}

// repair makes the torn end of the last segment, at path, a clean one:
// a segment whose header is not whole (made ready when the crash came) is
// removed, and the torn record's first block is zeroed. Either is durable
// before Open goes on.
func (j *Journal) repair(path string, end segmentEnd) error {
	if end.noHeader {
		if err := j.fs.Remove(path); err != nil {
			return err
		}
		return j.fs.SyncDir(j.dir)
	}
	f, err := j.fs.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(make([]byte, blockSize), int64(end.off))
	if err == nil {
		err = f.Datasync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (j *Journal) segmentPath(seq uint64) string {
	return filepath.Join(j.dir, fmt.Sprintf("%016x%s", seq, segmentExt))
}

// Failed returns the error that failed the journal, if any (none for a
// store in memory, which has no journal). The store reports it from Ping.
func (j *Journal) Failed() error {
	if j == nil {
		return nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.err
}

// Fail fails the journal with err (the first error stays) and returns it:
// every later Append is refused. The store calls it when Badger refuses a
// batch the journal has, so that nothing is built on that batch. A store
// in memory has no journal: there Fail returns err as it is, and the
// batch's writers get it.
func (j *Journal) Fail(err error) error {
	if j == nil {
		return err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.err == nil {
		j.err = fmt.Errorf("storage: journal failed, writes refused until a restart: %w", err)
	}
	return j.err
}

// Append writes the record of the batch committed at ts, its writes by
// key, and syncs it: once it returns nil, the batch survives a crash of
// the process or of the machine. The store's flusher alone calls it, with
// timestamps that only grow. After a failed write or sync it fails the
// journal (Fail) and returns that error, as it does for every later call.
//
// A batch that wrote nothing has no record: there is nothing to make
// durable, and Badger keeps no version at its timestamp, so after a crash
// the store's next timestamp (from Badger's newest version) could be that
// batch's again, and replay would find a record out of order.
func (j *Journal) Append(ts uint64, writes map[string]Change) error {
	if j == nil || len(writes) == 0 {
		return nil // in memory, or nothing written
	}
	return j.append(ts, writes)
}

// append is Append for a batch that wrote something (tests call it with
// none, as rxgate before Append skipped such batches did).
func (j *Journal) append(ts uint64, writes map[string]Change) error {
	if err := j.Failed(); err != nil {
		return err
	}
	j.plain = appendWrites(j.plain[:0], writes)
	seg := j.active
	rec, err := j.seal(seg, ts)
	if err == nil && seg.off+int64(len(rec)) > seg.size {
		j.retire(seg)
		if err = j.activate(int64(len(rec))); err == nil {
			seg = j.active
			rec, err = j.seal(seg, ts) // sealed for its new place
		}
	}
	if err == nil {
		_, err = seg.f.WriteAt(rec, seg.off)
	}
	if err == nil {
		err = seg.f.Datasync()
	}
	if err != nil {
		return j.Fail(err)
	}
	seg.off += int64(len(rec))
	return nil
}

// Halt stops the checkpointer. The store calls it before Badger closes,
// so that nothing syncs Badger's files while they close; Close calls it
// too.
func (j *Journal) Halt() {
	if j == nil {
		return
	}
	select {
	case <-j.stop:
	default:
		close(j.stop)
	}
	<-j.done
}

// Close closes the active segment. With clean set (Badger closed without
// error, its memtables written to synced tables), it makes the store's
// files durable (Options.SyncStore) and retires every segment: the journal
// is then empty. Without it (Badger failed to close, or never opened for
// good), every segment stays, for the next Open to replay.
func (j *Journal) Close(clean bool) error {
	if j == nil {
		return nil
	}
	j.Halt()
	if j.active != nil && j.active.f != nil {
		_ = j.active.f.Close()
		j.active.f = nil
	}
	if !clean {
		return nil
	}
	j.mu.Lock()
	if j.active != nil {
		j.full = append(j.full, j.active)
	}
	j.mu.Unlock()
	j.active = nil
	if err := j.syncStore(); err != nil {
		return err
	}
	for _, seg := range slices.Clone(j.full) {
		if err := j.free1(seg); err != nil {
			return err
		}
	}
	return nil
}
