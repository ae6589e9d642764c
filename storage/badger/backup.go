package badger

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	badgerdb "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"

	"github.com/rxgate/rxgate/storage/backup"
	"github.com/rxgate/rxgate/storage/badger/journal"
)

// WriteBackup writes a backup of the whole store to f (a new, empty file)
// while the store keeps serving: every entry as of one read timestamp, so
// the backup holds every commit before it whole and nothing of any commit
// after it (a prescription never without its event, nor an event without
// its jobs). A store opened with an encryption key writes an encrypted
// backup. version is the rxgate version recorded in the header.
func (s *Store) WriteBackup(ctx context.Context, f *os.File, version string) (backup.Header, error) {
	h := backup.Header{RxgateVersion: version, CreatedAt: time.Now().UTC(), StoreFormat: formatVersion}
	var out backup.Header
	err := s.view(ctx, func(txn *tx) error {
		var err error
		out, err = backup.Write(f, h, s.key, func(emit func(k, v []byte) error) error {
			opts := badgerdb.DefaultIteratorOptions
			opts.PrefetchValues = false
			it := txn.iterator(opts)
			defer it.Close()
			for it.Rewind(); it.Valid(); it.Next() {
				if err := ctx.Err(); err != nil {
					return err
				}
				item := it.Item()
				if item.IsDeletedOrExpired() {
					continue
				}
				if err := item.Value(func(v []byte) error { return emit(item.Key(), v) }); err != nil {
					return err
				}
			}
			return nil
		})
		return err
	})
	if err != nil {
		return out, fmt.Errorf("storage: backup: %w", err)
	}
	return out, nil
}

// Steps of a restore, at which restoreStep is called.
const (
	stepEntry   = "entry"   // an entry was handed to Badger
	stepLoaded  = "loaded"  // every entry is in the new directory, which is closed
	stepOpen    = "open"    // the new store is open (migrated, its journal made), not yet closed
	stepOpened  = "opened"  // the new store opened (and migrated), closed and synced
	stepRenamed = "renamed" // the new directory is dir, its parent not yet synced
)

// restoreStep, when set, is called at each step of Restore, so that a test
// can kill a restore at a known point. Only a test's helper process sets
// it; it is nil otherwise.
var restoreStep func(step string)

// Restore loads the backup file at path into dir, which must be empty or
// absent, as a store encrypted with key (which must be the key of an
// encrypted backup's store, and empty for an unencrypted one). The file
// is verified before anything is written. The store is built in a new
// directory beside dir and renamed to dir only once it is whole and has
// opened, so that dir, whatever happens (an error, a kill, a power cut),
// is either as it was or the whole restored store; a kill leaves the
// unfinished directory beside it (.rxgate-restore-*), which the next
// restore into the same place removes.
func Restore(path, dir string, key []byte) (backup.Header, error) {
	dir = filepath.Clean(dir)
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return backup.Header{}, err
	case len(entries) > 0:
		return backup.Header{}, fmt.Errorf("storage: restore: %s is not empty; restore into an empty directory", dir)
	}
	f, err := os.Open(path)
	if err != nil {
		return backup.Header{}, err
	}
	h, err := backup.Verify(f)
	_ = f.Close()
	if err != nil {
		return h, err
	}
	if h.StoreFormat > formatVersion {
		return h, fmt.Errorf("%w: the backup has format version %d, and this rxgate reads versions up to %d", ErrNewerFormat, h.StoreFormat, formatVersion)
	}
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return h, fmt.Errorf("storage: restore: %w", err)
	}
	prefix := ".rxgate-restore-" + filepath.Base(dir) + "-"
	if stale, err := filepath.Glob(filepath.Join(parent, prefix+"*")); err == nil {
		for _, d := range stale { // what a killed restore left
			_ = os.RemoveAll(d)
		}
	}
	work, err := os.MkdirTemp(parent, prefix)
	if err != nil {
		return h, fmt.Errorf("storage: restore: %w", err)
	}
	done := false
	defer func() {
		if !done {
			_ = os.RemoveAll(work)
		}
	}()
	if h, err = load(path, work, key); err != nil {
		return h, fmt.Errorf("storage: restore: %w", err)
	}
	if restoreStep != nil {
		restoreStep(stepLoaded)
	}
	// Open runs what a start runs (a migration of an older format), so
	// that a restore that succeeds leaves a store that opens.
	s, err := Open(Options{Dir: work, EncryptionKey: key})
	if err == nil {
		if restoreStep != nil {
			restoreStep(stepOpen)
		}
		err = s.Close()
	}
	if err == nil {
		err = journal.SyncDir(work)
	}
	if err != nil {
		return h, fmt.Errorf("storage: restore: %w", err)
	}
	if restoreStep != nil {
		restoreStep(stepOpened)
	}
	// rename(2) replaces an empty directory in one step.
	if err := os.Rename(work, dir); err != nil {
		return h, fmt.Errorf("storage: restore: %w", err)
	}
	done = true
	if restoreStep != nil {
		restoreStep(stepRenamed)
	}
	if err := journal.SyncDir(parent); err != nil {
		return h, fmt.Errorf("storage: restore: %w", err)
	}
	return h, nil
}

// load writes the backup's entries into a new Badger directory.
func load(path, dir string, key []byte) (backup.Header, error) {
	bo := badgerdb.DefaultOptions(dir).WithLogger(nil).WithNumVersionsToKeep(1).WithCompression(options.None)
	if len(key) > 0 {
		bo = bo.WithEncryptionKey(key).WithIndexCacheSize(64 << 20)
	}
	db, err := badgerdb.OpenManaged(bo)
	if err != nil {
		return backup.Header{}, err
	}
	wb := db.NewManagedWriteBatch()
	h, err := backup.Read(path, key, func(k, v []byte) error {
		if err := wb.SetEntryAt(badgerdb.NewEntry(k, v), 1); err != nil {
			return err
		}
		if restoreStep != nil {
			restoreStep(stepEntry)
		}
		return nil
	})
	if err == nil {
		err = wb.Flush()
	} else {
		wb.Cancel()
	}
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	return h, err
}
