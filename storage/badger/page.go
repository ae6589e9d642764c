package badger

import (
	"bytes"

	badgerdb "github.com/dgraph-io/badger/v4"

	"github.com/rxgate/rxgate/storage"
)

// listPage reads one page of list, whose items are the keys under prefix
// in key order, calling fn with each key and value; the page's
// bookkeeping is storage.Page's. A key is the prefix followed by the
// item's position in the list, so a cursor's position is a key's suffix.
// It reads Limit+1 keys to learn whether a next page exists, and seeks
// straight to the cursor's key, so a page deep in a list costs what the
// first one does. Keys written after the cursor was issued that sort
// before its key are not seen: a walk started before they existed neither
// skips nor repeats anything.
func (s *Store) listPage(txn *tx, list storage.List, prefix []byte, req storage.PageRequest, fn func(key, val []byte) error) (storage.PageInfo, error) {
	page, after, err := s.cursors.StartPage(list, req)
	if err != nil {
		return storage.PageInfo{Limit: req.Limit}, err
	}
	opts := badgerdb.DefaultIteratorOptions
	opts.Prefix = prefix
	// Values are read in place inside the transaction; prefetching would
	// copy each one first.
	opts.PrefetchValues = false
	it := txn.iterator(opts)
	defer it.Close()
	if after != nil {
		start := append(bytes.Clone(prefix), after...)
		it.Seek(start)
		if it.Valid() && bytes.Equal(it.Item().Key(), start) {
			it.Next()
		}
	} else {
		it.Rewind()
	}
	var last []byte // the position of the page's last item
	for ; it.Valid() && page.Take(); it.Next() {
		item := it.Item()
		if err := item.Value(func(v []byte) error { return fn(item.Key(), v) }); err != nil {
			return storage.PageInfo{Limit: req.Limit}, err
		}
		last = append(last[:0], item.Key()[len(prefix):]...)
	}
	return page.Info(last), nil
}

// scan calls fn for every key under prefix in key order.
func (s *Store) scan(txn *tx, prefix []byte, fn func(key, val []byte) error) error {
	opts := badgerdb.DefaultIteratorOptions
	opts.Prefix = prefix
	opts.PrefetchValues = false // values are read in place, not copied first
	it := txn.iterator(opts)
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		item := it.Item()
		if err := item.Value(func(v []byte) error { return fn(item.Key(), v) }); err != nil {
			return err
		}
	}
	return nil
}

// scanKeys calls fn with every key under prefix, without reading values.
func scanKeys(txn *tx, prefix []byte, fn func(key []byte)) {
	opts := badgerdb.DefaultIteratorOptions
	opts.Prefix = prefix
	opts.PrefetchValues = false
	it := txn.iterator(opts)
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		fn(it.Item().Key())
	}
}
