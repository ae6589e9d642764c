package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/rxgate/rxgate/storage/badger"
)

// RotateKey re-keys a stopped encrypted store: afterwards only the new key
// opens it.
func RotateKey(_ context.Context, env Env, args []string) error {
	fs := newFlagSet("rotate-key", env.Stderr)
	dir := fs.String("data-dir", "", "the store's data directory (the server must be stopped)")
	oldFile := fs.String("old-key-file", "", "the file holding the store's current key")
	newFile := fs.String("new-key-file", "", "the file holding the new key (rxgate keygen)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" || *oldFile == "" || *newFile == "" {
		return errors.New("rotate-key: --data-dir, --old-key-file and --new-key-file are required")
	}
	oldKey, err := readKey("--old-key-file", *oldFile)
	if err != nil {
		return err
	}
	newKey, err := readKey("--new-key-file", *newFile)
	if err != nil {
		return err
	}
	if err := badger.RotateKey(*dir, oldKey, newKey); err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "the store in %s is now encrypted with the key in %s; set storage.encryption_key_file to it\n", *dir, *newFile)
	return nil
}
