package app

import (
	"context"
	"errors"
	"fmt"
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

// backupName is a scheduled backup's file name: sortable by time.
func backupName(t time.Time) string {
	return "rxgate-" + t.UTC().Format("20060102T150405.000Z") + ".rxb"
}

// pruneBackups deletes the oldest scheduled backups of dir beyond keep.
func pruneBackups(dir string, keep int) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var names []string
	for _, e := range entries {
		if n := e.Name(); strings.HasPrefix(n, "rxgate-") && strings.HasSuffix(n, ".rxb") && e.Type().IsRegular() {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	var errs []error
	for len(names) > keep {
		errs = append(errs, os.Remove(filepath.Join(dir, names[0])))
		names = names[1:]
	}
	return errors.Join(errs...)
}

// getBackup streams a consistent backup of the whole store (GET
// /admin/v1/backup). The backup is written to a temporary file first (its
// header carries the count and hash of what follows), then sent; the file
// is removed once sent.
func (a *App) getBackup(c echo.Context) error {
	b, ok := a.store.(Backuper)
	if !ok {
		return errors.New("backup: the store cannot write a backup") // every backend can; a 500 otherwise
	}
	dir, err := os.MkdirTemp("", "rxgate-backup-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	name := backupName(a.now())
	h, err := backupTo(c.Request().Context(), b, dir, name)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	f, err := os.Open(filepath.Join(dir, name))
	if err != nil {
		return err
	}
	defer f.Close()
	c.Response().Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
	c.Response().Header().Set("X-Backup-Entries", fmt.Sprint(h.Entries))
	c.Response().Header().Set("X-Backup-SHA256", h.SHA256)
	return c.Stream(http.StatusOK, "application/octet-stream", f)
}
