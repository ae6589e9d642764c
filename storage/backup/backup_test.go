package backup

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type kv struct{ k, v string }

// write makes a backup of entries at a new path and returns it.
func write(t *testing.T, key []byte, entries []kv) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "b.rxb")
	f, err := os.Create(path)
	require.NoError(t, err)
	defer f.Close()
	h, err := Write(f, Header{RxgateVersion: "test", CreatedAt: time.Now().UTC(), StoreFormat: 2}, key, func(emit func(k, v []byte) error) error {
		for _, e := range entries {
			if err := emit([]byte(e.k), []byte(e.v)); err != nil {
				return err
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, uint64(len(entries)), h.Entries)
	return path
}

func readAll(path string, key []byte) ([]kv, Header, error) {
	var got []kv
	h, err := Read(path, key, func(k, v []byte) error {
		got = append(got, kv{string(k), string(v)})
		return nil
	})
	return got, h, err
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	var entries []kv
	for i := range 1000 {
		entries = append(entries, kv{fmt.Sprintf("pt/%05d", i), fmt.Sprintf(`{"family_name":"Patient %d"}`, i)})
	}
	entries = append(entries, kv{"empty", ""})
	for _, tt := range []struct {
		name string
		key  []byte
	}{{"plain", nil}, {"encrypted", key}} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := write(t, tt.key, entries)
			got, h, err := readAll(path, tt.key)
			require.NoError(t, err)
			require.Equal(t, entries, got)
			require.Equal(t, tt.key != nil, h.Encrypted)
			require.Equal(t, "test", h.RxgateVersion)
			raw, err := os.ReadFile(path)
			require.NoError(t, err)
			require.Equal(t, tt.key == nil, bytes.Contains(raw, []byte("Patient 7")), "the content is in the clear exactly when not encrypted")
		})
	}
}

func TestRefusals(t *testing.T) {
	t.Parallel()
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	entries := []kv{{"a", "1"}, {"b", "2"}, {"c", "3"}}
	path := write(t, nil, entries)
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	enc := write(t, key, entries)
	rewrite := func(b []byte) string {
		p := filepath.Join(t.TempDir(), "x.rxb")
		require.NoError(t, os.WriteFile(p, b, 0o600))
		return p
	}
	flipped := bytes.Clone(raw)
	flipped[len(flipped)-1] ^= 1
	tests := []struct {
		name string
		path string
		key  []byte
		want string
	}{
		{"truncated", rewrite(raw[:len(raw)-2]), nil, "does not match its SHA-256"},
		{"altered", rewrite(flipped), nil, "does not match its SHA-256"},
		{"not a backup", rewrite([]byte("hello\n")), nil, "does not start with"},
		{"empty", rewrite(nil), nil, "does not start with"},
		{"header only", rewrite(raw[:bytes.IndexByte(raw[len(Magic):], '\n')+len(Magic)+1]), nil, "does not match"},
		{"encrypted, no key", enc, nil, "is encrypted"},
		{"encrypted, another key", enc, make([]byte, 32), "does not open"},
		{"plain, a key", path, key, "not encrypted"},
	}
	for _, tt := range tests {
		called := false
		_, err := Read(tt.path, tt.key, func(k, v []byte) error { called = true; return nil })
		require.ErrorContains(t, err, tt.want, tt.name)
		if tt.name != "encrypted, another key" {
			require.False(t, called, "%s: nothing is read from a refused file", tt.name)
		}
	}
}

// FuzzRead: any file is refused or read; never a panic or a huge
// allocation.
func FuzzRead(f *testing.F) {
	f.Add([]byte(Magic + `{"format":1,"entries":1,"sha256":"` + blankHash + `"}` + "\n\x01a\x01b"))
	f.Add([]byte(Magic + "{}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p := filepath.Join(t.TempDir(), "f")
		require.NoError(t, os.WriteFile(p, b, 0o600))
		_, _ = Read(p, nil, func(k, v []byte) error { return nil })
	})
}
