package cli

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/config"
)

// TestEncryptionCommands: keygen writes a key only its owner may read and
// never overwrites one; a store made with the key does not open without
// it, with another key, or with a key file others may read, each with one
// line naming the setting; rotate-key moves the store to a new key.
func TestEncryptionCommands(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	keys := t.TempDir()
	keyA, keyB := filepath.Join(keys, "a.key"), filepath.Join(keys, "b.key")
	for _, f := range []string{keyA, keyB} {
		var stderr bytes.Buffer
		require.Equal(t, 0, run(context.Background(), Keygen, []string{"--out", f}, io.Discard, &stderr), stderr.String())
		info, err := os.Stat(f)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), info.Mode().Perm())
		_, err = config.ReadKeyFile("k", f)
		require.NoError(t, err)
	}
	before, err := os.ReadFile(keyA)
	require.NoError(t, err)
	var stderr bytes.Buffer
	require.Equal(t, 1, run(context.Background(), Keygen, []string{"--out", keyA}, io.Discard, &stderr))
	require.Contains(t, stderr.String(), "exists")
	after, err := os.ReadFile(keyA)
	require.NoError(t, err)
	require.Equal(t, before, after, "keygen never overwrites a key")

	// sandbox runs the same wiring as serve, and needs no config file.
	sandboxWith := func(keyFile string) (int, string) {
		t.Setenv("RXGATE_STORAGE__ENCRYPTION_KEY_FILE", keyFile)
		var stderr bytes.Buffer
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan int, 1)
		stdout := newSignalWriter()
		go func() {
			done <- run(ctx, Sandbox, []string{"--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--data-dir", dir}, stdout, &stderr)
		}()
		select {
		case <-stdout.ready:
			cancel()
			return <-done, ""
		case code := <-done:
			return code, stderr.String()
		}
	}
	code, out := sandboxWith(keyA)
	require.Equal(t, 0, code, out)
	code, out = sandboxWith("")
	require.Equal(t, 1, code)
	require.Contains(t, out, "the store is encrypted")
	code, out = sandboxWith(keyB)
	require.Equal(t, 1, code)
	require.Contains(t, out, "does not hold the key")
	require.NoError(t, os.Chmod(keyA, 0o640))
	code, out = sandboxWith(keyA)
	require.Equal(t, 1, code)
	require.Contains(t, out, "storage.encryption_key_file")
	require.Contains(t, out, keyA)
	require.Contains(t, out, "chmod 600")
	require.NoError(t, os.Chmod(keyA, 0o600))

	stderr.Reset()
	var stdout bytes.Buffer
	require.Equal(t, 0, run(context.Background(), RotateKey, []string{"--data-dir", dir, "--old-key-file", keyA, "--new-key-file", keyB}, &stdout, &stderr), stderr.String())
	code, out = sandboxWith(keyA)
	require.Equal(t, 1, code)
	require.Contains(t, out, "does not hold the key")
	code, out = sandboxWith(keyB)
	require.Equal(t, 0, code, out)
}
