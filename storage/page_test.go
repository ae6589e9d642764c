package storage

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// cursorStore is a Store that can only make and check cursors.
func cursorStore(key string) *Store { return &Store{cursorKey: []byte(key)} }

// signed returns a cursor made of body and a valid MAC for prefix: what
// only the store could issue, whatever body holds.
func signed(s *Store, prefix string, body ...byte) string {
	return base64.RawURLEncoding.EncodeToString(append(body, s.cursorMAC([]byte(prefix), body)...))
}

func TestCursorRoundTrip(t *testing.T) {
	t.Parallel()
	s := cursorStore("cursor key")
	rxPrefix := string(prescriptionsPrefix("org", "user", "patient"))
	tests := []struct {
		name    string
		prefix  string
		lastKey string
		offset  int
	}{
		{name: "first page", prefix: rxPrefix, lastKey: rxPrefix + "fffffe4a3c2b1a09" + "0123456789ABCDEFGH", offset: 20},
		{name: "offset zero", prefix: rxPrefix, lastKey: rxPrefix + "x", offset: 0},
		{name: "largest one-byte offset", prefix: rxPrefix, lastKey: rxPrefix + "x", offset: 127},
		{name: "smallest two-byte offset", prefix: rxPrefix, lastKey: rxPrefix + "x", offset: 128},
		{name: "largest offset", prefix: rxPrefix, lastKey: rxPrefix + "x", offset: 1 << 31},
		{name: "users", prefix: string(usersPrefix("org")), lastKey: string(userKey("org", NewID())), offset: 100},
		{name: "binary suffix", prefix: "p/", lastKey: "p/\x00\xff\n=", offset: 3},
		{name: "long suffix", prefix: "p/", lastKey: "p/" + strings.Repeat("z", 500), offset: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cursor := s.encodeCursor([]byte(tt.prefix), []byte(tt.lastKey), tt.offset)
			require.Regexp(t, `^[A-Za-z0-9_-]+$`, cursor, "URL-safe, unpadded")
			key, offset, err := s.decodeCursor([]byte(tt.prefix), cursor)
			require.NoError(t, err)
			require.Equal(t, tt.lastKey, string(key))
			require.Equal(t, tt.offset, offset)
			require.Equal(t, cursor, s.encodeCursor([]byte(tt.prefix), []byte(tt.lastKey), tt.offset), "deterministic")
		})
	}
}

func TestDecodeCursorRejects(t *testing.T) {
	t.Parallel()
	s := cursorStore("cursor key")
	const prefix = "rx/org/user/patient/"
	good := s.encodeCursor([]byte(prefix), []byte(prefix+"0000000000000001SCID"), 20)
	raw, err := base64.RawURLEncoding.DecodeString(good)
	require.NoError(t, err)
	require.NotZero(t, len(raw)%3, "the last character of good must have unused bits")
	body := raw[:len(raw)-cursorMACLen]

	tests := []struct {
		name   string
		prefix string
		cursor string
	}{
		{name: "empty", prefix: prefix, cursor: ""},
		{name: "not base64", prefix: prefix, cursor: "%%%"},
		{name: "standard alphabet", prefix: prefix, cursor: strings.NewReplacer("-", "+", "_", "/").Replace(good) + "+/"},
		{name: "padded", prefix: prefix, cursor: good + "=="},
		{name: "line break appended", prefix: prefix, cursor: good + "\n"},
		{name: "carriage return inserted", prefix: prefix, cursor: good[:5] + "\r" + good[5:]},
		{name: "unused trailing bits set", prefix: prefix, cursor: good[:len(good)-1] + string(good[len(good)-1]+1)},
		{name: "another list", prefix: "rx/org/user/other/", cursor: good},
		{name: "a prefix of the list", prefix: "rx/org/user/", cursor: good},
		{name: "another store", prefix: prefix, cursor: cursorStore("other key").encodeCursor([]byte(prefix), []byte(prefix+"0000000000000001SCID"), 20)},
		{name: "MAC only", prefix: prefix, cursor: base64.RawURLEncoding.EncodeToString(raw[len(raw)-cursorMACLen:])},
		{name: "MAC truncated", prefix: prefix, cursor: base64.RawURLEncoding.EncodeToString(raw[:len(raw)-1])},
		{name: "MAC dropped", prefix: prefix, cursor: base64.RawURLEncoding.EncodeToString(body)},
		{name: "offset changed", prefix: prefix, cursor: base64.RawURLEncoding.EncodeToString(append(append([]byte{cursorV1, 21}, body[2:]...), raw[len(body):]...))},
		{name: "too short to hold an offset", prefix: prefix, cursor: signed(s, prefix, cursorV1)},
		{name: "unknown version", prefix: prefix, cursor: signed(s, prefix, 2, 20, 'k')},
		{name: "version zero", prefix: prefix, cursor: signed(s, prefix, 0, 20, 'k')},
		{name: "offset past the limit", prefix: prefix, cursor: signed(s, prefix, binary.AppendUvarint([]byte{cursorV1}, 1<<31+1)...)},
		{name: "offset overflows", prefix: prefix, cursor: signed(s, prefix, cursorV1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01)},
		{name: "offset unterminated", prefix: prefix, cursor: signed(s, prefix, cursorV1, 0x80)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			key, offset, err := s.decodeCursor([]byte(tt.prefix), tt.cursor)
			require.ErrorIs(t, err, ErrBadCursor)
			require.Nil(t, key)
			require.Zero(t, offset)
		})
	}
}

func FuzzDecodeCursor(f *testing.F) {
	s := cursorStore("fuzz key")
	prefix := []byte("rx/org/user/patient/")
	for _, c := range []struct {
		suffix string
		offset int
	}{
		{suffix: "fffffe4a3c2b1a09" + "0123456789ABCDEFGH", offset: 20},
		{suffix: "x", offset: 0},
		{suffix: "x", offset: 128},
		{suffix: "\x00", offset: 1 << 31},
	} {
		good := s.encodeCursor(prefix, append(bytes.Clone(prefix), c.suffix...), c.offset)
		f.Add(good)
		f.Add(good + "\n")
		f.Add(good[:len(good)-1] + string(good[len(good)-1]+1))
	}
	for _, c := range []string{"", "A", "AAAA", "%%%", "===="} {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, cursor string) {
		key, offset, err := s.decodeCursor(prefix, cursor)
		if err != nil {
			require.ErrorIs(t, err, ErrBadCursor)
			return
		}
		require.True(t, bytes.HasPrefix(key, prefix), "the key %q is outside the list", key)
		require.GreaterOrEqual(t, offset, 0)
		require.Equal(t, cursor, s.encodeCursor(prefix, key, offset), "an accepted cursor is the one its contents encode to")
		_, _, err = s.decodeCursor([]byte("rx/org/user/other/"), cursor)
		require.ErrorIs(t, err, ErrBadCursor, "a cursor belongs to one list")
	})
}
