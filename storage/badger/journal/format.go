package journal

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
)

// magic opens a segment's header: the format's name and version.
var magic = []byte("rxgate journal 1")

// castagnoli is the table of the journal's checksums (CRC-32C).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

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

// ErrCorrupt is in the error of an Open that met a segment whose records
// were damaged after they were synced: records the store acknowledged
// would be lost. Only the record the last write left unfinished (in the
// last segment, with nothing whole after it) is dropped in silence.
var ErrCorrupt = errors.New("corrupt")

// corruptAt is the error of a corrupt record at off, one line: why it is
// not the torn end of the last write.
func corruptAt(off int, why string) error {
	return fmt.Errorf("%w at offset %d (%s)", ErrCorrupt, off, why)
}

// segmentEnd is where a segment's records end, and how.
type segmentEnd struct {
	// off is the offset of the first block after the last whole record.
	off int
	// badRecord: at off is a record of this segment that is not whole
	// (its sync never finished, or it was damaged since).
	badRecord bool
	// noHeader: the segment's header is not whole (made ready when the
	// process stopped, or damaged since); it has no record.
	noHeader bool
}

// torn reports whether the segment ends in something that is not whole,
// which only the write a crash interrupted leaves.
func (e segmentEnd) torn() bool { return e.badRecord || e.noHeader }

// replaySegment calls apply with each whole record of a segment's data, in
// order, and returns where they end. A record that is not whole ends the
// segment, but a whole record of this segment after it means the segment
// was damaged: replaySegment calls corrupt with the ErrCorrupt error, and
// stops with what it returns, or goes on with that record when it returns
// nil (the damaged records dropped). The caller decides whether a torn end
// is allowed (in the last segment only).
func replaySegment(data []byte, seq uint64, key []byte, corrupt func(error) error, apply func(ts uint64, writes []Write) error) (segmentEnd, error) {
	salt, encrypted, ok := readSegmentHeader(data, seq)
	if !ok {
		if at, found := wholeRecordAfter(data, 0, seq); found {
			// Without its header (the salt of its key) no record of it can
			// be read: all of it is dropped, when corrupt allows.
			return segmentEnd{off: len(data)}, corrupt(corruptAt(0, fmt.Sprintf("the segment's header is damaged, and a whole record is at %d", at)))
		}
		return segmentEnd{noHeader: true}, nil // no record
	}
	var aead cipher.AEAD
	switch {
	case encrypted && key == nil:
		return segmentEnd{}, errors.New("encrypted, and the store has no key")
	case !encrypted && key != nil:
		return segmentEnd{}, errors.New("not encrypted, and the store is")
	case encrypted:
		var err error
		if aead, err = segmentAEAD(key, salt); err != nil {
			return segmentEnd{}, err
		}
	}
	off := blockSize
	for off+recordHeader <= len(data) {
		hdr := data[off : off+recordHeader]
		// The end: zeros, or a record of the segment's earlier life; or a
		// record of its own whose sync never finished, or a damaged one.
		end := zero(hdr) || binary.LittleEndian.Uint64(hdr[recSeq:]) != seq
		if end || !recordWhole(data, off) {
			at, found := wholeRecordAfter(data, off, seq)
			if !found {
				return segmentEnd{off: off, badRecord: !end}, nil
			}
			if err := corrupt(corruptAt(off, fmt.Sprintf("a whole record follows at %d", at))); err != nil {
				return segmentEnd{}, err
			}
			off = at
			continue
		}
		n := int(binary.LittleEndian.Uint32(hdr[recLen:]))
		payload := data[off+recordHeader : off+recordHeader+n]
		if aead != nil {
			var err error
			if payload, err = aead.Open(nil, nonceAt(int64(off)), payload, hdr[recLen:recAAD]); err != nil {
				return segmentEnd{}, fmt.Errorf("record at %d: %w", off, err)
			}
		}
		writes, err := decodeWrites(payload)
		if err != nil {
			return segmentEnd{}, fmt.Errorf("record at %d: %w", off, err)
		}
		if err := apply(binary.LittleEndian.Uint64(hdr[recTs:]), writes); err != nil {
			return segmentEnd{}, err
		}
		off += blocks(recordHeader + n)
	}
	return segmentEnd{off: off}, nil
}

// zero reports whether b is all zeros.
func zero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// wholeRecordAfter returns the offset of the first whole record of
// segment seq on a block boundary after off, if any.
func wholeRecordAfter(data []byte, off int, seq uint64) (int, bool) {
	for at := off + blockSize; at+recordHeader <= len(data); at += blockSize {
		if binary.LittleEndian.Uint64(data[at+recSeq:]) == seq && recordWhole(data, at) {
			return at, true
		}
	}
	return 0, false
}

// recordWhole reports whether the record at off in data is whole: its
// length within data and its checksum right.
func recordWhole(data []byte, off int) bool {
	n := uint64(binary.LittleEndian.Uint32(data[off+recLen:]))
	if n > uint64(len(data)-off-recordHeader) {
		return false
	}
	rec := data[off : off+recordHeader+int(n)]
	return crc32.Checksum(rec[recLen:], castagnoli) == binary.LittleEndian.Uint32(rec[recCRC:])
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
