package storage_test

import (
	"encoding/base64"
	"encoding/hex"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage"
)

func TestHashSecret(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		secret string
		want   string // hex SHA-256
	}{
		{name: "empty", secret: "", want: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		{name: "abc", secret: "abc", want: "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, hex.EncodeToString(storage.HashSecret(tt.secret)))
		})
	}
}

func TestSecretMatches(t *testing.T) {
	t.Parallel()
	secret := storage.NewSecret()
	hash := storage.HashSecret(secret)
	flipped := append([]byte(nil), hash...)
	flipped[len(flipped)-1] ^= 1
	tests := []struct {
		name   string
		hash   []byte
		secret string
		want   bool
	}{
		{name: "the secret", hash: hash, secret: secret, want: true},
		{name: "empty secret and its hash", hash: storage.HashSecret(""), secret: "", want: true},
		{name: "another secret", hash: hash, secret: storage.NewSecret()},
		{name: "empty secret", hash: hash, secret: ""},
		{name: "secret with a suffix", hash: hash, secret: secret + "x"},
		{name: "secret missing a character", hash: hash, secret: secret[:len(secret)-1]},
		{name: "nil hash", hash: nil, secret: secret},
		{name: "nil hash and empty secret", hash: nil, secret: ""},
		{name: "truncated hash", hash: hash[:16], secret: secret},
		{name: "hash with a byte appended", hash: append(append([]byte(nil), hash...), 0), secret: secret},
		{name: "hash with a bit flipped", hash: flipped, secret: secret},
		{name: "the secret's bytes as the hash", hash: []byte(secret), secret: secret},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, storage.SecretMatches(tt.hash, tt.secret))
		})
	}
}

func TestNewSecret(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for range 1_000 {
		s := storage.NewSecret()
		require.Len(t, s, 43)
		raw, err := base64.RawURLEncoding.DecodeString(s)
		require.NoError(t, err, "URL-safe base64 without padding")
		require.Len(t, raw, 32)
		require.False(t, seen[s], "repeated secret %q", s)
		seen[s] = true
	}
}

func TestNewSCID(t *testing.T) {
	t.Parallel()
	format := regexp.MustCompile(`^[0-9ABCDEFGHJKMNPQRSTVWXYZ]{18}$`) // Crockford's base32
	seen := map[string]bool{}
	for range 1_000 {
		scid := storage.NewSCID()
		require.Regexp(t, format, scid)
		require.False(t, seen[scid], "repeated scid %q", scid)
		seen[scid] = true
	}
}

func TestNewID(t *testing.T) {
	t.Parallel()
	prev := storage.NewID()
	for range 1_000 {
		id := storage.NewID()
		require.Greater(t, id, prev, "ids sort in creation order")
		require.True(t, storage.ValidID(id))
		prev = id
	}
}

func TestValidID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		id   string
		want bool
	}{
		{name: "uuid", id: storage.NewID(), want: true},
		{name: "one character", id: "x", want: true},
		{name: "longest", id: strings.Repeat("x", storage.MaxIDLength), want: true},
		{name: "empty", id: ""},
		{name: "too long", id: strings.Repeat("x", storage.MaxIDLength+1)},
		{name: "slash", id: "a/b"},
		{name: "NUL", id: "a\x00b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, storage.ValidID(tt.id))
			require.Equal(t, tt.want, storage.ValidIDs("ok", tt.id, "fine"))
		})
	}
	require.True(t, storage.ValidIDs(), "no ids")
}

func TestTimestamp(t *testing.T) {
	t.Parallel()
	in := time.Date(2026, 3, 2, 20, 0, 0, 123456789, time.FixedZone("AEDT", 11*3600))
	got := storage.Timestamp(in)
	require.Equal(t, time.UTC, got.Location())
	require.True(t, got.Equal(time.Date(2026, 3, 2, 9, 0, 0, 123456000, time.UTC)))
}

// TestNewIDAt: an id made for a time carries that millisecond, is a valid
// version-7 uuid, sorts by time and, within a millisecond, by the order
// made; MinIDAt bounds a millisecond's ids from below.
func TestNewIDAt(t *testing.T) {
	base := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		at   time.Time
	}{
		{name: "whole millisecond", at: base},
		{name: "within a millisecond", at: base.Add(999 * time.Microsecond)},
		{name: "just after the epoch", at: time.UnixMilli(1)},
		{name: "far future", at: time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := storage.NewIDAt(tt.at)
			u, err := uuid.Parse(id)
			require.NoError(t, err)
			require.Equal(t, uuid.Version(7), u.Version())
			require.Equal(t, uuid.RFC4122, u.Variant())
			sec, nsec := u.Time().UnixTime()
			require.Equal(t, tt.at.UnixMilli(), time.Unix(sec, nsec).UnixMilli())
			lo := storage.MinIDAt(tt.at)
			require.LessOrEqual(t, lo, id)
			require.Less(t, storage.NewIDAt(tt.at.Add(-time.Millisecond)), lo, "an earlier millisecond sorts below")
			require.LessOrEqual(t, lo, storage.NewIDAt(tt.at.Add(time.Millisecond)))
		})
	}
	prev := storage.NewIDAt(base)
	for range 1000 {
		next := storage.NewIDAt(base)
		require.Less(t, prev, next, "ids of one millisecond sort in the order made")
		prev = next
	}
	require.Less(t, storage.NewIDAt(base.Add(time.Millisecond)), storage.MinIDAt(base.Add(2*time.Millisecond)))
}
