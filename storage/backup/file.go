package backup

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// WriteFile makes the backup file name in dir atomically: write fills a
// temporary file beside it, which is then read back through Verify,
// synced and renamed to name, so that a file with the name is always a
// whole backup. On a failure the temporary file is removed and nothing
// is renamed; a file that fails Verify is reported with an error that
// wraps ErrInvalid. It returns the verified header.
func WriteFile(dir, name string, write func(f *os.File) error) (Header, error) {
	return writeFile(dir, name, "."+name+".*"+tmpSuffix, write)
}

// WriteScheduled writes the scheduled backup taken at t into dir, as
// WriteFile does, and returns its name. Its temporary file has a prefix of
// its own, which Prune removes when a backup did not finish; another
// writer's temporary files in dir (`rxgate backup --out` into the same
// directory, under a scheduled backup's name) are left alone.
func WriteScheduled(dir string, t time.Time, write func(f *os.File) error) (string, Header, error) {
	name := FileName(t)
	h, err := writeFile(dir, name, scheduledTmpPrefix+"*"+tmpSuffix, write)
	return name, h, err
}

// writeFile is WriteFile with the temporary file's os.CreateTemp pattern.
func writeFile(dir, name, tmpPattern string, write func(f *os.File) error) (Header, error) {
	tmp, err := os.CreateTemp(dir, tmpPattern)
	if err != nil {
		return Header{}, err
	}
	done := false
	defer func() {
		if !done {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if err := write(tmp); err != nil {
		return Header{}, err
	}
	if _, err := tmp.Seek(0, 0); err != nil {
		return Header{}, err
	}
	h, err := Verify(tmp)
	if err != nil {
		return h, err
	}
	if err := tmp.Sync(); err != nil {
		return h, err
	}
	if err := tmp.Close(); err != nil {
		return h, err
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, name)); err != nil {
		return h, err
	}
	done = true
	return h, nil
}

// nameLayout is the time in a scheduled backup's file name.
const nameLayout = "20060102T150405.000Z"

// The parts of a scheduled backup's file name, and of the temporary file
// WriteScheduled makes for it.
const (
	namePrefix         = "rxgate-"
	nameSuffix         = ".rxb"
	scheduledTmpPrefix = ".rxgate-backup-"
	tmpSuffix          = ".tmp"
)

// FileName is the file name of a backup taken at t, as the schedule
// names it and the operator API offers it: sortable by time.
func FileName(t time.Time) string {
	return namePrefix + t.UTC().Format(nameLayout) + nameSuffix
}

// Last is when the newest scheduled backup in dir was taken; zero when
// there is none.
func Last(dir string) time.Time {
	names, _, err := Scheduled(dir)
	if err != nil || len(names) == 0 {
		return time.Time{}
	}
	n := names[len(names)-1]
	t, err := time.Parse(nameLayout, strings.TrimSuffix(strings.TrimPrefix(n, namePrefix), nameSuffix))
	if err != nil {
		return time.Time{}
	}
	return t
}

// Scheduled lists the names of dir's scheduled backups, oldest first, and
// the schedule's temporary files (a scheduled backup that did not finish,
// named .rxgate-backup-*.tmp by this version and earlier ones).
func Scheduled(dir string) (names, unfinished []string, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	for _, e := range entries {
		switch n := e.Name(); {
		case !e.Type().IsRegular():
		case strings.HasPrefix(n, namePrefix) && strings.HasSuffix(n, nameSuffix):
			names = append(names, n)
		case strings.HasPrefix(n, scheduledTmpPrefix) && strings.HasSuffix(n, tmpSuffix):
			unfinished = append(unfinished, n)
		}
	}
	sort.Strings(names)
	return names, unfinished, nil
}

// Prune deletes the oldest scheduled backups of dir beyond keep, and what
// backups that did not finish left. Only the schedule writes there, one
// backup at a time, so none is in progress while it runs.
func Prune(dir string, keep int) error {
	names, unfinished, err := Scheduled(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, n := range unfinished {
		errs = append(errs, os.Remove(filepath.Join(dir, n)))
	}
	for len(names) > keep {
		errs = append(errs, os.Remove(filepath.Join(dir, names[0])))
		names = names[1:]
	}
	return errors.Join(errs...)
}
