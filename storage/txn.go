package storage

import (
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"
)

// getRecord decodes the record at key into v, or returns ErrNotFound.
func getRecord(txn *badger.Txn, key []byte, v any) error {
	item, err := txn.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("storage: get: %w", err)
	}
	return item.Value(func(b []byte) error { return decode(b, v) })
}

// getRaw returns a copy of the value at key, or ErrNotFound.
func getRaw(txn *badger.Txn, key []byte) ([]byte, error) {
	item, err := txn.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("storage: get: %w", err)
	}
	return item.ValueCopy(nil)
}

// putRecord encodes v and writes it at key.
func putRecord(txn *badger.Txn, key []byte, v any) error {
	b, err := encode(v)
	if err != nil {
		return err
	}
	return txn.Set(key, b)
}

// exists reports whether key holds a value.
func exists(txn *badger.Txn, key []byte) (bool, error) {
	_, err := txn.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return false, nil
	}
	return err == nil, err
}
