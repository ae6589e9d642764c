package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/rxgate/rxgate/config"
	"github.com/rxgate/rxgate/storage/badger"
)

// Restore loads a backup into an empty (or absent) data directory,
// offline. An encrypted backup needs the store's key: storage.
// encryption_key_file from --config or the environment, or
// --encryption-key-file.
func Restore(_ context.Context, env Env, args []string) error {
	fs := newFlagSet("restore", env.Stderr)
	configPath := fs.String("config", "", "YAML config file (for storage.encryption_key_file)")
	in := fs.String("in", "", "the backup file")
	dir := fs.String("data-dir", "", "the data directory to create (empty or absent)")
	keyFile := fs.String("encryption-key-file", "", "the key of an encrypted backup's store (default: storage.encryption_key_file)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *in == "" || *dir == "" {
		return errors.New("restore: --in FILE and --data-dir DIR are required")
	}
	setting := "--encryption-key-file"
	if *keyFile == "" {
		cfg, err := config.Load(config.Options{Path: *configPath, Environ: os.Environ()})
		if err != nil {
			return err
		}
		*keyFile, setting = cfg.Storage.EncryptionKeyFile, "storage.encryption_key_file"
	}
	key, err := readKey(setting, *keyFile)
	if err != nil {
		return err
	}
	h, err := badger.Restore(*in, *dir, key)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "restored %d entries into %s (backup of %s by rxgate %s); start it with rxgate serve\n",
		h.Entries, *dir, h.CreatedAt.Format(time.RFC3339), h.RxgateVersion)
	return nil
}
