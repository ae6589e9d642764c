package cli

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"

	"github.com/rxgate/rxgate/config"
)

// Keygen writes a new encryption key (base64 of 32 random bytes) to a new
// file readable by its owner only; it never overwrites one.
func Keygen(_ context.Context, env Env, args []string) error {
	fs := newFlagSet("keygen", env.Stderr)
	out := fs.String("out", "", "the key file to create (it must not exist)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" {
		return errors.New("keygen: --out FILE is required")
	}
	key := make([]byte, config.KeyBytes)
	if _, err := rand.Read(key); err != nil {
		return err
	}
	f, err := os.OpenFile(*out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("keygen: %w", err)
	}
	if _, err := fmt.Fprintln(f, base64.StdEncoding.EncodeToString(key)); err != nil {
		_ = f.Close()
		_ = os.Remove(*out)
		return fmt.Errorf("keygen: %w", err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		_ = os.Remove(*out)
		return fmt.Errorf("keygen: %w", err)
	}
	return f.Close()
}
