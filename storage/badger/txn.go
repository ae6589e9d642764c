package badger

import (
	"errors"
	"fmt"
	"sync"

	badgerdb "github.com/dgraph-io/badger/v4"

	"github.com/rxgate/rxgate/storage"
)

// getRecord decodes the record at key into v, or returns ErrNotFound.
func getRecord(txn *badgerdb.Txn, key []byte, v any) error {
	item, err := txn.Get(key)
	if errors.Is(err, badgerdb.ErrKeyNotFound) {
		return storage.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("storage: get: %w", err)
	}
	return item.Value(func(b []byte) error { return decode(b, v) })
}

// getRaw returns a copy of the value at key, or ErrNotFound.
func getRaw(txn *badgerdb.Txn, key []byte) ([]byte, error) {
	item, err := txn.Get(key)
	if errors.Is(err, badgerdb.ErrKeyNotFound) {
		return nil, storage.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("storage: get: %w", err)
	}
	return item.ValueCopy(nil)
}

// maxRecordBytes bounds one stored record (storage.MaxRecordBytes), well
// under Badger's own value and batch limits.
const maxRecordBytes = storage.MaxRecordBytes

// putRecord encodes v and writes it at key.
func putRecord(txn *badgerdb.Txn, key []byte, v any) error {
	b, err := encode(v)
	if err != nil {
		return err
	}
	if len(b) > maxRecordBytes {
		return storage.ErrTooLarge
	}
	return txn.Set(key, b)
}

// exists reports whether key holds a value.
func exists(txn *badgerdb.Txn, key []byte) (bool, error) {
	_, err := txn.Get(key)
	if errors.Is(err, badgerdb.ErrKeyNotFound) {
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
// cache. The value it returns may be shared with other callers: they must
// not modify what its slices or pointers refer to.
func getCached[T any](s *Store, txn *badgerdb.Txn, key []byte) (T, error) {
	var v T
	item, err := txn.Get(key)
	if errors.Is(err, badgerdb.ErrKeyNotFound) {
		return v, storage.ErrNotFound
	}
	if err != nil {
		return v, fmt.Errorf("storage: get: %w", err)
	}
	version := item.Version()
	s.records.mu.RLock()
	e, ok := s.records.m[string(key)]
	s.records.mu.RUnlock()
	if ok && e.version == version {
		if cached, ok := e.value.(T); ok {
			return cached, nil
		}
	}
	if err := item.Value(func(b []byte) error { return decode(b, &v) }); err != nil {
		return v, err
	}
	s.records.mu.Lock()
	if s.records.m == nil || len(s.records.m) >= maxCachedRecords {
		s.records.m = make(map[string]cachedRecord)
	}
	s.records.m[string(key)] = cachedRecord{version: version, value: v}
	s.records.mu.Unlock()
	return v, nil
}
