package badger

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	badgerdb "github.com/dgraph-io/badger/v4"

	"github.com/rxgate/rxgate/storage/badger/journal"
)

// Encryption at rest is Badger's: with a key (Options.EncryptionKey, 32
// bytes: AES-256), every table and log is encrypted with data keys that
// Badger rotates (every ten days) and keeps in its key registry, encrypted
// with the key. Without the key nothing in the directory reads.

// Errors from checkEncryption; each says what to do.
var (
	// ErrEncrypted: the store is encrypted and no key was given.
	ErrEncrypted = errors.New("storage: the store is encrypted; set storage.encryption_key_file to its key")
	// ErrNotEncrypted: a key was given for a store that is not encrypted.
	ErrNotEncrypted = errors.New("storage: the store is not encrypted, but storage.encryption_key_file is set; a store cannot be encrypted in place: unset the key, or start from an empty directory")
	// ErrWrongKey: the key given is not the store's.
	ErrWrongKey = errors.New("storage: storage.encryption_key_file does not hold the key this store is encrypted with")
)

// keyMismatch reports Badger's ErrEncryptionKeyMismatch, which Badger
// wraps with %+v (its y.Wrapf), so errors.Is cannot see it.
func keyMismatch(err error) bool {
	return err != nil && (errors.Is(err, badgerdb.ErrEncryptionKeyMismatch) || strings.Contains(err.Error(), badgerdb.ErrEncryptionKeyMismatch.Error()))
}

// checkEncryption compares key with the store in dir before Badger opens
// it, so that each mismatch is one clear error and nothing is written: a
// store without a key registry is new, and takes whatever it is given.
func checkEncryption(dir string, key []byte) error {
	if _, err := os.Stat(filepath.Join(dir, badgerdb.KeyRegistryFileName)); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	open := func(k []byte) error {
		kr, err := badgerdb.OpenKeyRegistry(badgerdb.KeyRegistryOptions{Dir: dir, ReadOnly: true, EncryptionKey: k})
		if err == nil {
			err = kr.Close()
		}
		return err
	}
	plainErr := open(nil)
	if plainErr != nil && !keyMismatch(plainErr) {
		return fmt.Errorf("storage: read the key registry: %w", plainErr)
	}
	encrypted := plainErr != nil
	switch {
	case encrypted && len(key) == 0:
		return ErrEncrypted
	case !encrypted && len(key) > 0:
		return ErrNotEncrypted
	case encrypted:
		if err := open(key); keyMismatch(err) {
			return ErrWrongKey
		} else if err != nil {
			return fmt.Errorf("storage: read the key registry: %w", err)
		}
	}
	return nil
}

// RotateKey re-encrypts the key registry of the stopped store in dir from
// oldKey to newKey: the data keys, and so the data, stay as they are, and
// from then on only newKey opens the store. Badger writes the new registry
// beside the old one and renames it over it, so a crash leaves one or the
// other, whole.
//
// The journal's records are sealed under a key derived from oldKey: when
// the store stopped without closing, it is opened with oldKey and closed
// first, which gives Badger every record and empties the journal. The free
// segments, which hold records of earlier lives, are removed.
func RotateKey(dir string, oldKey, newKey []byte) error {
	if len(oldKey) == 0 || len(newKey) == 0 {
		return errors.New("storage: rotating the key needs the old key and the new one")
	}
	errOldKey := errors.New("storage: the old key file does not hold the key this store is encrypted with")
	if err := emptyJournal(dir, oldKey); errors.Is(err, ErrWrongKey) {
		return errOldKey
	} else if err != nil {
		return err
	}
	unlock, err := lockDir(dir)
	if err != nil {
		return err
	}
	defer unlock()
	if err := checkEncryption(dir, oldKey); err != nil {
		if errors.Is(err, ErrWrongKey) {
			return errOldKey
		}
		return err
	}
	if _, err := os.Stat(filepath.Join(dir, badgerdb.KeyRegistryFileName)); err != nil {
		return fmt.Errorf("storage: %s holds no store: %w", dir, err)
	}
	kr, err := badgerdb.OpenKeyRegistry(badgerdb.KeyRegistryOptions{Dir: dir, ReadOnly: true, EncryptionKey: oldKey})
	if err != nil {
		return fmt.Errorf("storage: read the key registry: %w", err)
	}
	defer kr.Close()
	if err := badgerdb.WriteKeyRegistry(kr, badgerdb.KeyRegistryOptions{Dir: dir, EncryptionKey: newKey}); err != nil {
		return fmt.Errorf("storage: write the key registry: %w", err)
	}
	if err := journal.RemoveFree(dir); err != nil {
		return fmt.Errorf("storage: rotate the key: %w", err)
	}
	return checkEncryption(dir, newKey)
}

// emptyJournal opens the store in dir with key and closes it when its
// journal holds a segment: Badger then has every record, and the journal
// none.
func emptyJournal(dir string, key []byte) error {
	pending, err := journal.HasSegments(dir)
	if err != nil || !pending {
		return err
	}
	s, err := Open(Options{Dir: dir, EncryptionKey: key})
	if err != nil {
		return err
	}
	return s.Close()
}
