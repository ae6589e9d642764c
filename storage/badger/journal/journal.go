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
// batch whose sync never finished, or the zeros after the last).
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
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"runtime"
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
	blockSize = 4096
	// freeKeep bounds the free segments kept for use again.
	freeKeep = 2
	// maxPendingSegments bounds the full segments waiting for Badger to
	// write their memtables to tables (checkpoint): the journal's size,
	// about a memtable's worth of batches, and what a start replays.
	maxPendingSegments = 8
	// pollEvery is how often the checkpointer looks for memtables
	// written to tables while segments wait.
	pollEvery  = time.Second
	segmentExt = ".wal"
	freePrefix = "free-"
)

var magic = []byte("rxgate journal 1")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

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
}

// Journal is the store's write-ahead log. Append is the flusher's alone;
// the checkpointer goroutine retires full segments. A nil *Journal is that
// of a store in memory: it records nothing, and every method but Fail
// does nothing.
type Journal struct {
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
	f    *os.File // nil once closed
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
	dir := filepath.Join(storeDir, Dir)
	j := &Journal{dir: dir, storeDir: storeDir, key: key, segSize: segSize, maxPending: maxPendingSegments, syncStore: opts.SyncStore,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("storage: journal: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("storage: journal: %w", err)
	}
	var seqs []uint64
	for _, e := range entries {
		name := e.Name()
		if strings.HasSuffix(name, segmentExt+".tmp") {
			// A segment being made when the process stopped.
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
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
	for _, seq := range seqs {
		path := j.segmentPath(seq)
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("storage: journal: %w", err)
		}
		err = replaySegment(data, seq, key, func(ts uint64, writes []Write) error {
			if ts <= lastTs {
				return fmt.Errorf("record at %d after one at %d", ts, lastTs)
			}
			lastTs = ts
			return replay(ts, writes)
		})
		if err != nil {
			return nil, fmt.Errorf("storage: journal: segment %s: %w", filepath.Base(path), err)
		}
		j.full = append(j.full, &segment{path: path, seq: seq})
	}
	if err := j.activate(0); err != nil {
		return nil, err
	}
	go j.run()
	j.signal()
	return j, nil
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
// batch the journal has, so that nothing is built on that batch. It must
// not be called on a nil Journal.
func (j *Journal) Fail(err error) error {
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
func (j *Journal) Append(ts uint64, writes map[string]Change) error {
	if j == nil {
		return nil // in memory
	}
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
		err = fdatasync(seg.f)
	}
	if err != nil {
		return j.Fail(err)
	}
	seg.off += int64(len(rec))
	return nil
}

// appendWrites appends the payload of a batch's writes to p: their count,
// then each write's kind (0 set, 1 delete), key, and value when set
// (decodeWrites reads it).
func appendWrites(p []byte, writes map[string]Change) []byte {
	p = binary.AppendUvarint(p, uint64(len(writes)))
	for k, w := range writes {
		kind := byte(0)
		if w.Deleted {
			kind = 1
		}
		p = append(p, kind)
		p = binary.AppendUvarint(p, uint64(len(k)))
		p = append(p, k...)
		if !w.Deleted {
			p = binary.AppendUvarint(p, uint64(len(w.Value)))
			p = append(p, w.Value...)
		}
	}
	return p
}

// Record header: CRC-32C of the rest of the record, payload length,
// segment number, commit timestamp; the bytes from recLen to recAAD are
// the sealed payload's additional data.
const (
	recCRC = 0
	recLen = 4
	recSeq = 8
	recTs  = 16
	recAAD = 24
	// recordHeader is a record header's size.
	recordHeader = 32
)

// blocks rounds n up to whole journal blocks.
func blocks(n int) int { return (n + blockSize - 1) / blockSize * blockSize }

// seal returns the record of the payload in j.plain at seg's next offset,
// padded with zeros to whole blocks, in j.buf.
func (j *Journal) seal(seg *segment, ts uint64) ([]byte, error) {
	payloadLen := len(j.plain)
	if seg.aead != nil {
		payloadLen += seg.aead.Overhead()
	}
	if payloadLen > 1<<31 {
		return nil, errors.New("batch too large for the journal")
	}
	var hdr [recordHeader]byte
	binary.LittleEndian.PutUint32(hdr[recLen:], uint32(payloadLen))
	binary.LittleEndian.PutUint64(hdr[recSeq:], seg.seq)
	binary.LittleEndian.PutUint64(hdr[recTs:], ts)
	total := blocks(recordHeader + payloadLen)
	buf := append(slices.Grow(j.buf[:0], total), hdr[:]...)
	if seg.aead != nil {
		buf = seg.aead.Seal(buf, nonceAt(seg.off), j.plain, hdr[recLen:recAAD])
	} else {
		buf = append(buf, j.plain...)
	}
	binary.LittleEndian.PutUint32(buf[recCRC:], crc32.Checksum(buf[recLen:], castagnoli))
	buf = buf[:total]
	clear(buf[recordHeader+payloadLen:])
	j.buf = buf
	return buf, nil
}

// nonceAt is the nonce of the record at off: unique within a segment,
// whose key is its own.
func nonceAt(off int64) []byte {
	n := make([]byte, 12)
	binary.BigEndian.PutUint64(n, uint64(off))
	return n
}

// segmentAEAD returns the cipher of a segment with salt, under the store's
// key.
func segmentAEAD(key, salt []byte) (cipher.AEAD, error) {
	k, err := hkdf.Key(sha256.New, key, salt, "rxgate journal segment", 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(k)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// Segment header, the first block: magic, the segment's number, a
// random salt (its key's, when encrypted), whether it is encrypted, and a
// CRC-32C of what comes before it.
const (
	hdrSeq       = 16
	hdrSalt      = 24
	hdrEncrypted = 56
	hdrCRC       = 57
)

// segmentHeader returns the header block of segment seq.
func segmentHeader(seq uint64, salt []byte, encrypted bool) []byte {
	hdr := make([]byte, blockSize)
	copy(hdr, magic)
	binary.LittleEndian.PutUint64(hdr[hdrSeq:], seq)
	copy(hdr[hdrSalt:hdrEncrypted], salt)
	if encrypted {
		hdr[hdrEncrypted] = 1
	}
	binary.LittleEndian.PutUint32(hdr[hdrCRC:], crc32.Checksum(hdr[:hdrCRC], castagnoli))
	return hdr
}

// readSegmentHeader reads the header of segment seq from its data; ok is
// false when there is none whole (a crash while the segment was made ready).
func readSegmentHeader(data []byte, seq uint64) (salt []byte, encrypted, ok bool) {
	if len(data) < blockSize || !bytes.Equal(data[:hdrSeq], magic) ||
		binary.LittleEndian.Uint64(data[hdrSeq:]) != seq ||
		crc32.Checksum(data[:hdrCRC], castagnoli) != binary.LittleEndian.Uint32(data[hdrCRC:]) {
		return nil, false, false
	}
	return data[hdrSalt:hdrEncrypted], data[hdrEncrypted] == 1, true
}

// activate starts the next segment, at least minSize bytes of records
// long: a free one used again, or a new one.
func (j *Journal) activate(minSize int64) error {
	need := max(j.segSize, int64(blocks(blockSize+int(minSize))))
	j.mu.Lock()
	seq := j.nextSeq
	j.nextSeq++
	var reuse string
	for i, p := range j.free {
		if fi, err := os.Stat(p); err == nil && fi.Size() >= need {
			reuse = p
			j.free = slices.Delete(j.free, i, i+1)
			break
		}
	}
	j.mu.Unlock()
	path := j.segmentPath(seq)
	var err error
	if reuse != "" {
		err = os.Rename(reuse, path)
	} else {
		err = makeSegmentFile(path, need)
	}
	var seg *segment
	if err == nil {
		seg, err = j.openSegment(path, seq)
	}
	if err == nil {
		err = syncDir(j.dir)
	}
	if err != nil {
		return j.Fail(err)
	}
	j.active = seg
	return nil
}

// openSegment opens the segment file at path as segment seq and writes its
// header, synced.
func (j *Journal) openSegment(path string, seq uint64) (seg *segment, err error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = f.Close()
		}
	}()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	seg = &segment{f: f, path: path, seq: seq, off: blockSize, size: fi.Size()}
	salt := make([]byte, 32)
	_, _ = rand.Read(salt)
	if j.key != nil {
		if seg.aead, err = segmentAEAD(j.key, salt); err != nil {
			return nil, err
		}
	}
	if _, err = f.WriteAt(segmentHeader(seq, salt, j.key != nil), 0); err != nil {
		return nil, err
	}
	return seg, fdatasync(f)
}

// makeSegmentFile creates a segment file of size bytes, every block
// written (zeros) and synced, so that writing a record allocates nothing.
// It is made under a temporary name and renamed into place.
func makeSegmentFile(path string, size int64) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	zeros := make([]byte, 1<<20)
	for off := int64(0); off < size && err == nil; off += int64(len(zeros)) {
		_, err = f.Write(zeros[:min(int64(len(zeros)), size-off)])
	}
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		dropCache(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}

// retire hands a full segment to the checkpointer.
func (j *Journal) retire(seg *segment) {
	_ = seg.f.Close() // synced: every record was
	seg.f = nil
	j.mu.Lock()
	j.full = append(j.full, seg)
	j.mu.Unlock()
	j.signal()
}

func (j *Journal) signal() {
	select {
	case j.wake <- struct{}{}:
	default:
	}
}

// run is the checkpointer: it retires full segments until Halt, when one
// fills and every pollEvery while some wait.
func (j *Journal) run() {
	defer close(j.done)
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		select {
		case <-j.stop:
			return
		case <-j.wake:
		case <-tick.C:
			j.mu.Lock()
			waiting := len(j.full) > 0
			j.mu.Unlock()
			if !waiting {
				continue
			}
		}
		if err := j.checkpoint(); err != nil {
			_ = j.Fail(err)
		}
	}
}

// checkpoint retires the full segments whose records Badger holds durably,
// oldest first, and keeps a free segment ready. A segment is full only
// once the flusher moves past it, after Badger was given its last batch,
// so its records are all in the memtables whose logs exist when the
// checkpointer first looks at it, or in tables. Badger writes a memtable
// to a synced table (and records it in its synced manifest) before it
// removes the memtable's log: once those logs are gone, an fsync of the
// value logs (a value of 1 MiB is there, not in the table) and of the
// directory makes the records durable without writing the memtable logs
// out. Past maxPending waiting segments (a quiet store fills a memtable
// slowly), Badger's files are synced instead (syncStore) and every full
// segment goes.
func (j *Journal) checkpoint() error {
	j.mu.Lock()
	full := slices.Clone(j.full)
	j.mu.Unlock()
	done := 0
	for _, seg := range full {
		if seg.mems == nil {
			mems, err := memLogs(j.storeDir)
			if err != nil {
				return err
			}
			seg.mems = mems
		}
	}
	for _, seg := range full {
		if slices.ContainsFunc(seg.mems, func(name string) bool {
			_, err := os.Stat(filepath.Join(j.storeDir, name))
			return !errors.Is(err, os.ErrNotExist)
		}) {
			break
		}
		done++
	}
	switch {
	case len(full) > j.maxPending:
		if err := j.syncStore(); err != nil {
			return err
		}
		done = len(full)
	case done > 0:
		if err := SyncFiles(j.storeDir, ".vlog"); err != nil {
			return err
		}
	}
	for _, seg := range full[:done] {
		if err := j.free1(seg); err != nil {
			return err
		}
	}
	return j.spare()
}

// spare makes a free segment when there is none, so that the flusher's
// next segment is ready.
func (j *Journal) spare() error {
	j.mu.Lock()
	if len(j.free) > 0 {
		j.mu.Unlock()
		return nil
	}
	seq := j.nextSeq // its name's alone
	j.nextSeq++
	j.mu.Unlock()
	// Made under a free name: activate takes it as it would any.
	path := filepath.Join(j.dir, freePrefix+filepath.Base(j.segmentPath(seq)))
	if err := makeSegmentFile(path, j.segSize); err != nil {
		return err
	}
	if err := syncDir(j.dir); err != nil {
		return err
	}
	j.mu.Lock()
	j.free = append(j.free, path)
	j.mu.Unlock()
	return nil
}

// memLogs lists the memtable logs in Badger's directory.
func memLogs(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	mems := []string{}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".mem") {
			mems = append(mems, e.Name())
		}
	}
	return mems, nil
}

// free1 renames a retired segment to a free one, durably, and drops it
// from full; beyond freeKeep free segments it is removed instead.
func (j *Journal) free1(seg *segment) error {
	j.mu.Lock()
	keep := len(j.free) < freeKeep
	j.mu.Unlock()
	freePath := filepath.Join(j.dir, freePrefix+filepath.Base(seg.path))
	var err error
	if keep {
		err = os.Rename(seg.path, freePath)
	} else {
		err = os.Remove(seg.path)
	}
	if err == nil {
		err = syncDir(j.dir)
	}
	if err != nil {
		return err
	}
	j.mu.Lock()
	j.full = slices.DeleteFunc(j.full, func(s *segment) bool { return s == seg })
	if keep {
		j.free = append(j.free, freePath)
	}
	j.mu.Unlock()
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

// replaySegment calls apply with each whole record of a segment's data, in
// order.
func replaySegment(data []byte, seq uint64, key []byte, apply func(ts uint64, writes []Write) error) error {
	salt, encrypted, ok := readSegmentHeader(data, seq)
	if !ok {
		return nil // no record
	}
	var aead cipher.AEAD
	switch {
	case encrypted && key == nil:
		return errors.New("encrypted, and the store has no key")
	case !encrypted && key != nil:
		return errors.New("not encrypted, and the store is")
	case encrypted:
		var err error
		if aead, err = segmentAEAD(key, salt); err != nil {
			return err
		}
	}
	for off := blockSize; off+recordHeader <= len(data); {
		hdr := data[off : off+recordHeader]
		n := int(binary.LittleEndian.Uint32(hdr[recLen:]))
		if binary.LittleEndian.Uint64(hdr[recSeq:]) != seq || n > len(data)-off-recordHeader {
			return nil // the end: zeros, or a record of the segment's earlier life
		}
		rec := data[off : off+recordHeader+n]
		if crc32.Checksum(rec[recLen:], castagnoli) != binary.LittleEndian.Uint32(hdr[recCRC:]) {
			return nil // the end: a record whose sync never finished
		}
		payload := rec[recordHeader:]
		if aead != nil {
			var err error
			if payload, err = aead.Open(nil, nonceAt(int64(off)), payload, hdr[recLen:recAAD]); err != nil {
				return fmt.Errorf("record at %d: %w", off, err)
			}
		}
		writes, err := decodeWrites(payload)
		if err != nil {
			return fmt.Errorf("record at %d: %w", off, err)
		}
		if err := apply(binary.LittleEndian.Uint64(hdr[recTs:]), writes); err != nil {
			return err
		}
		off += blocks(recordHeader + n)
	}
	return nil
}

// decodeWrites decodes a record's payload.
func decodeWrites(p []byte) ([]Write, error) {
	bad := errors.New("malformed record")
	count, n := binary.Uvarint(p)
	if n <= 0 || count > uint64(len(p)) {
		return nil, bad
	}
	p = p[n:]
	bytesOf := func() ([]byte, bool) {
		l, n := binary.Uvarint(p)
		if n <= 0 || l > uint64(len(p)-n) {
			return nil, false
		}
		b := p[n : n+int(l)]
		p = p[n+int(l):]
		return b, true
	}
	writes := make([]Write, 0, count)
	for range count {
		if len(p) == 0 || p[0] > 1 {
			return nil, bad
		}
		w := Write{Change: Change{Deleted: p[0] == 1}}
		p = p[1:]
		var ok bool
		if w.Key, ok = bytesOf(); !ok {
			return nil, bad
		}
		if !w.Deleted {
			if w.Value, ok = bytesOf(); !ok {
				return nil, bad
			}
		}
		writes = append(writes, w)
	}
	if len(p) != 0 {
		return nil, bad
	}
	return writes, nil
}

// SyncFiles fsyncs the files of dir whose names end in one of suffixes,
// then dir. A file removed meanwhile is skipped: Badger removes a memtable
// log only once its table is synced. The checkpointer syncs Badger's value
// logs with it, and the store its memtable and value logs (SyncStore).
func SyncFiles(dir string, suffixes ...string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !slices.ContainsFunc(suffixes, func(s string) bool { return strings.HasSuffix(e.Name(), s) }) {
			continue
		}
		f, err := os.OpenFile(filepath.Join(dir, e.Name()), os.O_RDONLY, 0)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
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
	return syncDir(dir)
}

// syncDir makes the entries of dir durable (its files' names). Windows
// has no such call for a directory.
func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// HasSegments reports whether the journal of the stopped store in
// storeDir holds a segment: records Badger may lack, which only an Open of
// the store (with its key) replays. A store without a journal has none.
func HasSegments(storeDir string) (bool, error) {
	entries, err := os.ReadDir(filepath.Join(storeDir, Dir))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("storage: journal: %w", err)
	}
	return slices.ContainsFunc(entries, func(e os.DirEntry) bool {
		return strings.HasSuffix(e.Name(), segmentExt) && !strings.HasPrefix(e.Name(), freePrefix)
	}), nil
}

// RemoveFree removes the free segments of the journal of the stopped store
// in storeDir: they hold records of earlier lives, sealed under the
// store's key, which a rotated key must not leave behind.
func RemoveFree(storeDir string) error {
	dir := filepath.Join(storeDir, Dir)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), freePrefix) {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return syncDir(dir)
}
