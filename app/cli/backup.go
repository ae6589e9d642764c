package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/rxgate/rxgate/storage/backup"
)

// Backup downloads a consistent backup from a running server through the
// operator API (GET /admin/v1/backup), reading admin.listen and the key as
// Token does, into --out: a file with that name is only ever a whole,
// verified backup (backup.WriteFile).
func Backup(ctx context.Context, env Env, args []string) error {
	fs := newFlagSet("backup", env.Stderr)
	configPath := fs.String("config", "", "YAML config file (for admin.listen and admin.api_key)")
	adminURL := fs.String("admin-url", "", "operator API URL (default: http://{admin.listen})")
	out := fs.String("out", "", "the backup file to write")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" {
		return errors.New("backup: --out FILE is required")
	}
	client, err := newOperatorClient("backup", *configPath, *adminURL, 0)
	if err != nil {
		return err
	}
	resp, err := client.do(ctx, http.MethodGet, "/admin/v1/backup", nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("backup: HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(b)))
	}
	dir, name := filepath.Split(*out)
	if dir == "" {
		dir = "."
	}
	h, err := backup.WriteFile(dir, name, func(f *os.File) error {
		if _, err := io.Copy(f, resp.Body); err != nil {
			return fmt.Errorf("downloading: %w", err)
		}
		return nil
	})
	switch {
	case errors.Is(err, backup.ErrInvalid):
		return fmt.Errorf("backup: the download is not a whole backup: %w", err)
	case err != nil:
		return fmt.Errorf("backup: %w", err)
	}
	fmt.Fprintf(env.Stdout, "backup written to %s: %d entries, encrypted: %t, sha256 %s\n", *out, h.Entries, h.Encrypted, h.SHA256)
	return nil
}
