package storage

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"

	"github.com/dgraph-io/badger/v4"
)

// PageRequest asks for one page of a list.
type PageRequest struct {
	// Limit is the page size; the caller has checked its bounds.
	Limit int
	// Cursor is the LastKey of the previous page, or "" for the first.
	Cursor string
}

// PageInfo describes a page that was read (spec 2.1, pagination object).
type PageInfo struct {
	Count   int
	HasNext bool
	Limit   int
	// Offset is the number of items before this page.
	Offset int
	// LastKey is the cursor of the next page; empty on the last page.
	LastKey string
}

// Cursor format, before base64url: version byte, uvarint offset, the key
// suffix (relative to the list prefix) of the page's last item, and a
// truncated HMAC-SHA256 over (list prefix, everything before it) with the
// store's cursor key. The MAC binds a cursor to its list: one issued for
// another patient's prescriptions, another organization's users, or
// altered in any byte is rejected with ErrBadCursor.
const (
	cursorV1     byte = 1
	cursorMACLen int  = 16
)

func (s *Store) cursorMAC(prefix, payload []byte) []byte {
	m := hmac.New(sha256.New, s.cursorKey)
	m.Write(prefix)
	m.Write([]byte{0})
	m.Write(payload)
	return m.Sum(nil)[:cursorMACLen]
}

func (s *Store) encodeCursor(prefix, lastKey []byte, offset int) string {
	suffix := lastKey[len(prefix):]
	payload := make([]byte, 0, 1+binary.MaxVarintLen64+len(suffix)+cursorMACLen)
	payload = append(payload, cursorV1)
	payload = binary.AppendUvarint(payload, uint64(offset))
	payload = append(payload, suffix...)
	payload = append(payload, s.cursorMAC(prefix, payload)...)
	return base64.RawURLEncoding.EncodeToString(payload)
}

// decodeCursor returns the full key the cursor points at and its offset.
func (s *Store) decodeCursor(prefix []byte, cursor string) ([]byte, int, error) {
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	// The decoder skips line breaks and ignores the last character's unused
	// bits; only the canonical spelling of the bytes is the cursor.
	if err != nil || base64.RawURLEncoding.EncodeToString(raw) != cursor ||
		len(raw) < 1+1+cursorMACLen || raw[0] != cursorV1 {
		return nil, 0, ErrBadCursor
	}
	body, mac := raw[:len(raw)-cursorMACLen], raw[len(raw)-cursorMACLen:]
	if !hmac.Equal(mac, s.cursorMAC(prefix, body)) {
		return nil, 0, ErrBadCursor
	}
	offset, n := binary.Uvarint(body[1:])
	if n <= 0 || offset > 1<<31 {
		return nil, 0, ErrBadCursor
	}
	suffix := body[1+n:]
	key := make([]byte, 0, len(prefix)+len(suffix))
	key = append(append(key, prefix...), suffix...)
	return key, int(offset), nil
}

// listPage reads one page of the keys under prefix, in key order, calling
// fn with each key and value. It reads Limit+1 keys to learn whether a next
// page exists, and seeks straight to the cursor's key, so a page deep in a
// list costs what the first one does. Keys written after the cursor's key
// was issued that sort before it are not seen: a walk started before they
// existed neither skips nor repeats anything.
func (s *Store) listPage(txn *badger.Txn, prefix []byte, req PageRequest, fn func(key, val []byte) error) (PageInfo, error) {
	info := PageInfo{Limit: req.Limit}
	var start []byte
	if req.Cursor != "" {
		k, off, err := s.decodeCursor(prefix, req.Cursor)
		if err != nil {
			return info, err
		}
		start, info.Offset = k, off
	}
	err := func() error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = prefix
		// Values are read in place inside the transaction; prefetching
		// would copy each one first.
		opts.PrefetchValues = false
		it := txn.NewIterator(opts)
		defer it.Close()
		if start != nil {
			it.Seek(start)
			if it.Valid() && bytes.Equal(it.Item().Key(), start) {
				it.Next()
			}
		} else {
			it.Rewind()
		}
		var last []byte
		for ; it.Valid(); it.Next() {
			if info.Count == req.Limit {
				info.HasNext = true
				break
			}
			item := it.Item()
			err := item.Value(func(v []byte) error { return fn(item.Key(), v) })
			if err != nil {
				return err
			}
			last = item.KeyCopy(last[:0])
			info.Count++
		}
		if info.HasNext {
			info.LastKey = s.encodeCursor(prefix, last, info.Offset+info.Count)
		}
		return nil
	}()
	if err != nil {
		return PageInfo{Limit: req.Limit}, err
	}
	return info, nil
}

// scan calls fn for every key under prefix in key order.
func (s *Store) scan(txn *badger.Txn, prefix []byte, fn func(key, val []byte) error) error {
	opts := badger.DefaultIteratorOptions
	opts.Prefix = prefix
	opts.PrefetchValues = false // values are read in place, not copied first
	it := txn.NewIterator(opts)
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		item := it.Item()
		if err := item.Value(func(v []byte) error { return fn(item.Key(), v) }); err != nil {
			return err
		}
	}
	return nil
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("storage: crypto/rand failed: %v", err)) // never happens on supported platforms
	}
	return b
}
