package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rxgate/rxgate/storage/backup"
)

// Backuper is a store that writes a backup of itself while it serves
// (storage/badger: WriteBackup).
type Backuper interface {
	WriteBackup(ctx context.Context, f *os.File, version string) (backup.Header, error)
}

// backupTo writes a backup of b into dir under name: to a temporary file
// first, verified, then renamed, so that a file with the name is always a
// whole backup.
func backupTo(ctx context.Context, b Backuper, dir, name string) (backup.Header, error) {
	tmp, err := os.CreateTemp(dir, ".rxgate-backup-*.tmp")
	if err != nil {
		return backup.Header{}, err
	}
	done := false
	defer func() {
		if !done {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	h, err := b.WriteBackup(ctx, tmp, Version)
	if err != nil {
		return h, err
	}
	if _, err := tmp.Seek(0, 0); err != nil {
		return h, err
	}
	if _, err := backup.Verify(tmp); err != nil {
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

// backupNameLayout is the time in a scheduled backup's file name.
const backupNameLayout = "20060102T150405.000Z"

// backupName is a scheduled backup's file name: sortable by time.
func backupName(t time.Time) string {
	return "rxgate-" + t.UTC().Format(backupNameLayout) + ".rxb"
}

// lastBackup is when the newest scheduled backup of dir was taken; zero
// when there is none.
func lastBackup(dir string) time.Time {
	names, _, err := scheduledBackups(dir)
	if err != nil || len(names) == 0 {
		return time.Time{}
	}
	n := names[len(names)-1]
	t, err := time.Parse(backupNameLayout, strings.TrimSuffix(strings.TrimPrefix(n, "rxgate-"), ".rxb"))
	if err != nil {
		return time.Time{}
	}
	return t
}

// scheduledBackups are the names of dir's scheduled backups, oldest
// first, and its temporary files (a backup that did not finish).
func scheduledBackups(dir string) (names, unfinished []string, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	for _, e := range entries {
		switch n := e.Name(); {
		case !e.Type().IsRegular():
		case strings.HasPrefix(n, "rxgate-") && strings.HasSuffix(n, ".rxb"):
			names = append(names, n)
		case strings.HasPrefix(n, ".rxgate-backup-") && strings.HasSuffix(n, ".tmp"):
			unfinished = append(unfinished, n)
		}
	}
	sort.Strings(names)
	return names, unfinished, nil
}

// pruneBackups deletes the oldest scheduled backups of dir beyond keep,
// and what backups that did not finish left (only the janitor writes
// there, one backup at a time, so none is in progress).
func pruneBackups(dir string, keep int) error {
	names, unfinished, err := scheduledBackups(dir)
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

// errNoBackup answers a backup request to a store that a database keeps
// (PostgreSQL): its backups are the database's.
var errNoBackup = &Error{Status: http.StatusNotImplemented, Code: codeNotImplemented, Slug: slugNotImplemented, Title: "Not implemented",
	Detail: "This instance keeps its data in PostgreSQL: back it up with the database's own tools (pg_dump, or continuous archiving)."}

// getBackup streams a consistent backup of the whole store (GET
// /admin/v1/backup). The backup is written to a temporary file first (its
// header carries the count and hash of what follows), then sent. The file
// is unlinked as soon as it is created, so that nothing of it outlives the
// request, also when the process is killed.
func (a *App) getBackup(c echo.Context) error {
	b, ok := a.store.(Backuper)
	if !ok {
		return errNoBackup
	}
	f, err := os.CreateTemp("", "rxgate-backup-*")
	if err != nil {
		return err
	}
	defer f.Close()
	if err := os.Remove(f.Name()); err != nil {
		return err
	}
	h, err := b.WriteBackup(c.Request().Context(), f, Version)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if _, err := backup.Verify(f); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	c.Response().Header().Set("Content-Disposition", `attachment; filename="`+backupName(a.now())+`"`)
	c.Response().Header().Set("X-Backup-Entries", fmt.Sprint(h.Entries))
	c.Response().Header().Set("X-Backup-SHA256", h.SHA256)
	return c.Stream(http.StatusOK, "application/octet-stream", f)
}
