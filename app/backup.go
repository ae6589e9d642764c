package app

import (
	"fmt"
	"io"
	"net/http"
	"os"

	"github.com/labstack/echo/v4"

	"github.com/rxgate/rxgate/storage"
	"github.com/rxgate/rxgate/storage/backup"
)

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
	b := storage.CapabilitiesOf(a.store).Backup
	if b == nil {
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
	c.Response().Header().Set("Content-Disposition", `attachment; filename="`+backup.FileName(a.now())+`"`)
	c.Response().Header().Set("X-Backup-Entries", fmt.Sprint(h.Entries))
	c.Response().Header().Set("X-Backup-SHA256", h.SHA256)
	return c.Stream(http.StatusOK, "application/octet-stream", f)
}
