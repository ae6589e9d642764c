package journal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// SyncFiles fsyncs the files of dir whose names end in one of suffixes,
// then dir. A file removed meanwhile is skipped: Badger removes a memtable
// log only once its table is synced. The checkpointer syncs Badger's value
// logs with it, and the store its memtable and value logs (SyncStore).
func SyncFiles(dir string, suffixes ...string) error { return syncFiles(OS, dir, suffixes...) }

func syncFiles(fsys FS, dir string, suffixes ...string) error {
	entries, err := fsys.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !slices.ContainsFunc(suffixes, func(s string) bool { return strings.HasSuffix(e.Name(), s) }) {
			continue
		}
		f, err := fsys.OpenFile(filepath.Join(dir, e.Name()), os.O_RDONLY, 0)
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
	return fsys.SyncDir(dir)
}

// SyncDir makes the entries of dir durable (its files' names): the
// journal's segments, and the store's restored directory. Windows has no
// such call for a directory.
func SyncDir(dir string) error { return OS.SyncDir(dir) }

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
	return SyncDir(dir)
}
