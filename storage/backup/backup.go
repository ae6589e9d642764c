// Package backup is rxgate's backup file: a header that describes it,
// then the store's entries, encrypted when the store is.
//
// The file starts with one line, "RXGATE-BACKUP 1", then a line of JSON:
// the format version, the rxgate version that wrote it, the time, the
// store's format version, whether the content is encrypted, the number of
// entries and the SHA-256 of the content, which is everything after that
// line. So a truncated or altered file is refused before anything is
// restored, with no key needed to check it. The header is written first
// with blanks where the count and the hash go and filled in at the end:
// one pass over the store, however large.
//
// The content is the entries, each a key and a value, each as a uvarint
// length and its bytes. When the store is encrypted, the content is an
// age file (filippo.io/age) whose passphrase is the store's key, so that
// a backup of an encrypted store is never patient data in the clear.
package backup

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"strings"
	"time"

	"filippo.io/age"
)

// Magic is the file's first line.
const Magic = "RXGATE-BACKUP 1\n"

// Format is the version of the file's layout.
const Format = 1

// ErrInvalid reports a file that is not a whole, unaltered backup.
var ErrInvalid = errors.New("backup: not a valid rxgate backup")

// Header describes a backup.
type Header struct {
	Format        int       `json:"format"`
	RxgateVersion string    `json:"rxgate_version"`
	CreatedAt     time.Time `json:"created_at"`
	StoreFormat   int       `json:"store_format"`
	Encrypted     bool      `json:"encrypted"`
	Entries       uint64    `json:"entries"`
	SHA256        string    `json:"sha256"`
}

// Blanks hold the places of the count and the hash until they are known:
// the header line keeps its length when they are filled in.
const (
	entriesWidth = 20 // the digits of the largest uint64
	blankHash    = "0000000000000000000000000000000000000000000000000000000000000000"
)

// headerLine is h as its line: JSON, the count padded with spaces after
// the closing brace so that every count makes a line of the same length.
func headerLine(h Header) ([]byte, error) {
	b, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	pad := entriesWidth - len(fmt.Sprint(h.Entries))
	return append(append(b, bytes.Repeat([]byte(" "), pad)...), '\n'), nil
}

// maxEntryBytes bounds one key or value read back: far above any record
// (storage.max_record_bytes is at most 1 MiB), so a corrupt length cannot
// make a reader allocate gigabytes.
const maxEntryBytes = 16 << 20

// Write writes a backup to f (a new, empty file): the header, then every
// entry each calls emit with, encrypted with key when key is not empty.
// It returns the header as written.
func Write(f *os.File, h Header, key []byte, each func(emit func(k, v []byte) error) error) (Header, error) {
	h.Format, h.Encrypted, h.Entries, h.SHA256 = Format, len(key) > 0, 0, blankHash
	line, err := headerLine(h)
	if err != nil {
		return h, err
	}
	if _, err := f.WriteString(Magic); err != nil {
		return h, err
	}
	if _, err := f.Write(line); err != nil {
		return h, err
	}
	sum := sha256.New()
	buffered := bufio.NewWriterSize(io.MultiWriter(f, sum), 256<<10)
	var content io.Writer = buffered
	var sealed io.WriteCloser
	if len(key) > 0 {
		r, err := recipient(key)
		if err != nil {
			return h, err
		}
		if sealed, err = age.Encrypt(buffered, r); err != nil {
			return h, err
		}
		content = sealed
	}
	var n uint64
	var lenBuf [binary.MaxVarintLen64]byte
	err = each(func(k, v []byte) error {
		for _, b := range [][]byte{k, v} {
			if _, err := content.Write(lenBuf[:binary.PutUvarint(lenBuf[:], uint64(len(b)))]); err != nil {
				return err
			}
			if _, err := content.Write(b); err != nil {
				return err
			}
		}
		n++
		return nil
	})
	if err != nil {
		return h, err
	}
	if sealed != nil {
		if err := sealed.Close(); err != nil {
			return h, err
		}
	}
	if err := buffered.Flush(); err != nil {
		return h, err
	}
	h.Entries, h.SHA256 = n, hex.EncodeToString(sum.Sum(nil))
	filled, err := headerLine(h)
	if err != nil {
		return h, err
	}
	if len(filled) != len(line) {
		return h, errors.New("backup: the header changed length") // cannot happen: both are padded
	}
	if _, err := f.WriteAt(filled, int64(len(Magic))); err != nil {
		return h, err
	}
	return h, f.Sync()
}

// Verify reads the whole file and checks its header and hash; it needs no
// key. It returns the header.
func Verify(r io.Reader) (Header, error) {
	br := bufio.NewReaderSize(r, 256<<10)
	h, err := readHeader(br)
	if err != nil {
		return h, err
	}
	sum := sha256.New()
	if _, err := io.Copy(sum, br); err != nil {
		return h, err
	}
	if hex.EncodeToString(sum.Sum(nil)) != h.SHA256 {
		return h, fmt.Errorf("%w: its content does not match its SHA-256 (truncated or altered)", ErrInvalid)
	}
	return h, nil
}

// Read verifies the file at path, then reads it again and calls fn with
// every entry, decrypting with key when the backup is encrypted; it
// checks the count at the end. A file that fails Verify calls fn never.
func Read(path string, key []byte, fn func(k, v []byte) error) (Header, error) {
	f, err := os.Open(path)
	if err != nil {
		return Header{}, err
	}
	defer f.Close()
	if h, err := Verify(f); err != nil {
		return h, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return Header{}, err
	}
	br := bufio.NewReaderSize(f, 256<<10)
	h, err := readHeader(br)
	if err != nil {
		return h, err
	}
	// The hash has been checked; hash again while reading, so that a file
	// changed between the two passes is caught too.
	sum := sha256.New()
	var content io.Reader = io.TeeReader(br, sum)
	switch {
	case h.Encrypted && len(key) == 0:
		return h, errors.New("backup: the backup is encrypted: give the store's key (storage.encryption_key_file)")
	case !h.Encrypted && len(key) > 0:
		return h, errors.New("backup: the backup is not encrypted, but a key was given: a store cannot be encrypted by restoring into it; unset the key")
	case h.Encrypted:
		id, err := identity(key)
		if err != nil {
			return h, err
		}
		if content, err = age.Decrypt(content, id); err != nil {
			return h, fmt.Errorf("backup: the key does not open this backup: %w", err)
		}
	}
	entries, err := readEntries(bufio.NewReaderSize(content, 256<<10), fn)
	if err != nil {
		return h, err
	}
	if _, err := io.Copy(io.Discard, content); err != nil {
		return h, err
	}
	if err := checkSum(sum, h); err != nil {
		return h, err
	}
	if entries != h.Entries {
		return h, fmt.Errorf("%w: it holds %d entries, its header says %d", ErrInvalid, entries, h.Entries)
	}
	return h, nil
}

func checkSum(sum hash.Hash, h Header) error {
	if hex.EncodeToString(sum.Sum(nil)) != h.SHA256 {
		return fmt.Errorf("%w: the file changed while it was read", ErrInvalid)
	}
	return nil
}

// readHeader reads the magic line and the header line.
func readHeader(br *bufio.Reader) (Header, error) {
	var h Header
	magic := make([]byte, len(Magic))
	if _, err := io.ReadFull(br, magic); err != nil || string(magic) != Magic {
		return h, fmt.Errorf("%w: it does not start with %q", ErrInvalid, strings.TrimSpace(Magic))
	}
	line, err := br.ReadSlice('\n')
	if err != nil {
		return h, fmt.Errorf("%w: no header line", ErrInvalid)
	}
	if err := json.Unmarshal(line, &h); err != nil {
		return h, fmt.Errorf("%w: the header is not JSON", ErrInvalid)
	}
	if h.Format != Format {
		return h, fmt.Errorf("%w: format %d; this rxgate reads format %d", ErrInvalid, h.Format, Format)
	}
	if len(h.SHA256) != len(blankHash) || h.SHA256 == blankHash {
		return h, fmt.Errorf("%w: the header has no hash (the backup did not finish)", ErrInvalid)
	}
	return h, nil
}

// readEntries calls fn with each entry of r until its end.
func readEntries(r *bufio.Reader, fn func(k, v []byte) error) (uint64, error) {
	var n uint64
	read := func() ([]byte, error) {
		size, err := binary.ReadUvarint(r)
		if err != nil {
			return nil, err
		}
		if size > maxEntryBytes {
			return nil, fmt.Errorf("%w: an entry of %d bytes", ErrInvalid, size)
		}
		b := make([]byte, size)
		_, err = io.ReadFull(r, b)
		return b, err
	}
	for {
		if _, err := r.Peek(1); err == io.EOF {
			return n, nil
		}
		k, err := read()
		if err != nil {
			return n, fmt.Errorf("%w: a key: %v", ErrInvalid, err)
		}
		v, err := read()
		if err != nil {
			return n, fmt.Errorf("%w: a value: %v", ErrInvalid, err)
		}
		if err := fn(k, v); err != nil {
			return n, err
		}
		n++
	}
}

// workFactor is scrypt's cost for the passphrase. scrypt's cost is there
// to slow the guessing of a weak password; the passphrase here is a random
// 256-bit key, which no guessing reaches, so the cost is kept low.
const workFactor = 10

func passphrase(key []byte) string { return base64.StdEncoding.EncodeToString(key) }

func recipient(key []byte) (age.Recipient, error) {
	r, err := age.NewScryptRecipient(passphrase(key))
	if err != nil {
		return nil, err
	}
	r.SetWorkFactor(workFactor)
	return r, nil
}

func identity(key []byte) (age.Identity, error) {
	return age.NewScryptIdentity(passphrase(key))
}
