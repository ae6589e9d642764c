package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rxgate/rxgate/storage/badger"
	"github.com/rxgate/rxgate/storage/postgres"
)

// MigrateStore copies a stopped Badger store into an empty PostgreSQL
// database: everything, with its ids, secret hashes, cursor and signing
// keys (so cursors and tokens issued before stay valid) and pending
// deliveries; in one transaction, so a failed copy leaves the database
// empty. The Badger directory keeps its data (opening it applies any
// format upgrade this version has, as serve would).
func MigrateStore(ctx context.Context, env Env, args []string) error {
	fs := newFlagSet("migrate-store", env.Stderr)
	from := fs.String("from-data-dir", "", "the Badger data directory (the server using it must be stopped)")
	keyFile := fs.String("encryption-key-file", "", "the key of an encrypted store")
	to := fs.String("to-url", "", "the PostgreSQL connection URL (default: RXGATE_STORAGE__POSTGRES__URL; prefer --to-url-file or the variable, which keep a password out of the shell's history)")
	toFile := fs.String("to-url-file", "", "a file holding the connection URL")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *toFile != "" {
		if *to != "" {
			return errors.New("migrate-store: set --to-url or --to-url-file, not both")
		}
		b, err := os.ReadFile(*toFile)
		if err != nil {
			return fmt.Errorf("migrate-store: --to-url-file: %w", err)
		}
		*to = strings.TrimRight(string(b), "\r\n")
	}
	if *to == "" {
		*to = os.Getenv("RXGATE_STORAGE__POSTGRES__URL")
	}
	if *from == "" || *to == "" {
		return errors.New("migrate-store: --from-data-dir DIR and --to-url URL (or --to-url-file FILE) are required")
	}
	// Badger would make an empty store of a mistyped directory: the source
	// must be a store already.
	if _, err := os.Stat(filepath.Join(*from, "MANIFEST")); err != nil {
		return fmt.Errorf("migrate-store: %s holds no rxgate store (no Badger MANIFEST)", *from)
	}
	key, err := readKey("--encryption-key-file", *keyFile)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(env.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	src, err := badger.Open(badger.Options{Dir: *from, EncryptionKey: key, Logger: logger})
	if err != nil {
		return fmt.Errorf("migrate-store: %w", err)
	}
	defer src.Close()
	dst, err := postgres.Open(ctx, postgres.Options{URL: *to, MaxConns: 4, ConnectTimeout: 30 * time.Second, Logger: logger})
	if err != nil {
		return fmt.Errorf("migrate-store: %w", err)
	}
	defer dst.Close()
	n, err := dst.Import(ctx, src.Export(ctx))
	if err != nil {
		return fmt.Errorf("migrate-store: %w", err)
	}
	fmt.Fprintf(env.Stdout, "copied %d records from %s into PostgreSQL; start rxgate with storage.driver: postgres\n", n, *from)
	return nil
}
