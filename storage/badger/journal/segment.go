package journal

import (
	"crypto/rand"
	"os"
	"slices"
)

// activate starts the next segment, at least minSize bytes of records
// long: a free one used again, or a new one.
func (j *Journal) activate(minSize int64) error {
	need := max(j.segSize, int64(blocks(blockSize+int(minSize))))
	j.mu.Lock()
	seq := j.nextSeq
	j.nextSeq++
	var reuse string
	for i, p := range j.free {
		if fi, err := j.fs.Stat(p); err == nil && fi.Size() >= need {
			reuse = p
			j.free = slices.Delete(j.free, i, i+1)
			break
		}
	}
	j.mu.Unlock()
	path := j.segmentPath(seq)
	var err error
	if reuse != "" {
		err = j.fs.Rename(reuse, path)
	} else {
		err = j.makeSegmentFile(path, need)
	}
	var seg *segment
	if err == nil {
		seg, err = j.openSegment(path, seq)
	}
	if err == nil {
		err = j.fs.SyncDir(j.dir)
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
	f, err := j.fs.OpenFile(path, os.O_RDWR, 0)
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
	return seg, f.Datasync()
}

// makeSegmentFile creates a segment file of size bytes, every block
// written (zeros) and synced, so that writing a record allocates nothing.
// It is made under a temporary name and renamed into place.
func (j *Journal) makeSegmentFile(path string, size int64) error {
	tmp := path + ".tmp"
	f, err := j.fs.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
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
	if d, ok := f.(interface{ dropCache() }); ok && err == nil {
		d.dropCache()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = j.fs.Rename(tmp, path)
	}
	if err != nil {
		_ = j.fs.Remove(tmp)
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
