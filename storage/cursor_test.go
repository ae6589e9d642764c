package storage

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// signed returns a cursor made of body and a valid MAC for l: what only
// the store could issue, whatever body holds.
func signed(c Cursors, l List, body ...byte) string {
	return base64.RawURLEncoding.EncodeToString(append(body, c.mac(l, body)...))
}

func TestCursorRoundTrip(t *testing.T) {
	t.Parallel()
	c := NewCursors([]byte("cursor key"))
	rx := PrescriptionList("org", "user", "patient")
	tests := []struct {
		name   string
		list   List
		pos    string
		offset int
	}{
		{name: "first page", list: rx, pos: "fffffe4a3c2b1a09" + "0123456789ABCDEFGH", offset: 20},
		{name: "offset zero", list: rx, pos: "x", offset: 0},
		{name: "largest one-byte offset", list: rx, pos: "x", offset: 127},
		{name: "smallest two-byte offset", list: rx, pos: "x", offset: 128},
		{name: "largest offset", list: rx, pos: "x", offset: 1 << 31},
		{name: "users", list: UserList("org"), pos: NewID(), offset: 100},
		{name: "events", list: EventList(EventFilter{OrganizationID: "org", Status: EventFailed}), pos: NewID(), offset: 7},
		{name: "binary position", list: "p/", pos: "\x00\xff\n=", offset: 3},
		{name: "long position", list: "p/", pos: strings.Repeat("z", 500), offset: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cursor := c.Encode(tt.list, []byte(tt.pos), tt.offset)
			require.Regexp(t, `^[A-Za-z0-9_-]+$`, cursor, "URL-safe, unpadded")
			pos, offset, err := c.Decode(tt.list, cursor)
			require.NoError(t, err)
			require.Equal(t, tt.pos, string(pos))
			require.Equal(t, tt.offset, offset)
			require.Equal(t, cursor, c.Encode(tt.list, []byte(tt.pos), tt.offset), "deterministic")
		})
	}
}

// TestCursorFormatIsStable pins the bytes of a cursor, so that cursors a
// partner holds stay valid across versions and backends. The expected value
// was computed outside Go: base64url(payload || HMAC-SHA256(key, list ||
// 0x00 || payload)[:16]) with payload = 0x01, 20, position.
func TestCursorFormatIsStable(t *testing.T) {
	t.Parallel()
	c := NewCursors([]byte("cursor key"))
	got := c.Encode(PrescriptionList("o", "u", "p"), []byte("fffffe4a3c2b1a09SCID"), 20)
	require.Equal(t, "ARRmZmZmZmU0YTNjMmIxYTA5U0NJRAHmkxgw47anVoKvevj33Es", got)
}

func TestListNames(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		list List
		want string
	}{
		{name: "prescriptions", list: PrescriptionList("o", "u", "p"), want: "rx/o/u/p/"},
		{name: "users", list: UserList("o"), want: "us/o/"},
		{name: "events", list: EventList(EventFilter{}), want: "ev/"},
		{name: "events of an organization", list: EventList(EventFilter{OrganizationID: "o"}), want: "eo/o/"},
		{name: "events by status", list: EventList(EventFilter{Status: EventPending}), want: "es/pending/"},
		{name: "events by both", list: EventList(EventFilter{OrganizationID: "o", Status: EventPending}), want: "et/o/pending/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, string(tt.list))
		})
	}
}

func TestPrescriptionPosition(t *testing.T) {
	t.Parallel()
	older := time.Date(2026, 3, 2, 9, 0, 0, 123456000, time.UTC)
	newer := older.Add(time.Microsecond)
	a, b := PrescriptionPosition(newer, "ZZZ"), PrescriptionPosition(older, "AAA")
	require.Negative(t, bytes.Compare(a, b), "newest first")
	require.Negative(t, bytes.Compare(PrescriptionPosition(older, "AAA"), PrescriptionPosition(older, "AAB")), "ties by scid")
	created, scid, ok := ParsePrescriptionPosition(a)
	require.True(t, ok)
	require.Equal(t, newer, created)
	require.Equal(t, "ZZZ", scid)
	for _, bad := range []string{"", "short", "zzzzzzzzzzzzzzzzSCID"} {
		_, _, ok := ParsePrescriptionPosition([]byte(bad))
		require.False(t, ok, bad)
	}
}

func TestDecodeCursorRejects(t *testing.T) {
	t.Parallel()
	c := NewCursors([]byte("cursor key"))
	list := PrescriptionList("org", "user", "patient")
	good := c.Encode(list, []byte("0000000000000001SCID"), 20)
	raw, err := base64.RawURLEncoding.DecodeString(good)
	require.NoError(t, err)
	require.NotZero(t, len(raw)%3, "the last character of good must have unused bits")
	body := raw[:len(raw)-cursorMACLen]

	tests := []struct {
		name   string
		list   List
		cursor string
	}{
		{name: "empty", list: list, cursor: ""},
		{name: "not base64", list: list, cursor: "%%%"},
		{name: "standard alphabet", list: list, cursor: strings.NewReplacer("-", "+", "_", "/").Replace(good) + "+/"},
		{name: "padded", list: list, cursor: good + "=="},
		{name: "line break appended", list: list, cursor: good + "\n"},
		{name: "carriage return inserted", list: list, cursor: good[:5] + "\r" + good[5:]},
		{name: "unused trailing bits set", list: list, cursor: good[:len(good)-1] + string(good[len(good)-1]+1)},
		{name: "another list", list: PrescriptionList("org", "user", "other"), cursor: good},
		{name: "a prefix of the list", list: "rx/org/user/", cursor: good},
		{name: "another store", list: list, cursor: NewCursors([]byte("other key")).Encode(list, []byte("0000000000000001SCID"), 20)},
		{name: "MAC only", list: list, cursor: base64.RawURLEncoding.EncodeToString(raw[len(raw)-cursorMACLen:])},
		{name: "MAC truncated", list: list, cursor: base64.RawURLEncoding.EncodeToString(raw[:len(raw)-1])},
		{name: "MAC dropped", list: list, cursor: base64.RawURLEncoding.EncodeToString(body)},
		{name: "offset changed", list: list, cursor: base64.RawURLEncoding.EncodeToString(append(append([]byte{cursorV1, 21}, body[2:]...), raw[len(body):]...))},
		{name: "too short to hold an offset", list: list, cursor: signed(c, list, cursorV1)},
		{name: "unknown version", list: list, cursor: signed(c, list, 2, 20, 'k')},
		{name: "version zero", list: list, cursor: signed(c, list, 0, 20, 'k')},
		{name: "offset past the limit", list: list, cursor: signed(c, list, binary.AppendUvarint([]byte{cursorV1}, 1<<31+1)...)},
		{name: "offset overflows", list: list, cursor: signed(c, list, cursorV1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01)},
		{name: "offset unterminated", list: list, cursor: signed(c, list, cursorV1, 0x80)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pos, offset, err := c.Decode(tt.list, tt.cursor)
			require.ErrorIs(t, err, ErrBadCursor)
			require.Nil(t, pos)
			require.Zero(t, offset)
		})
	}
}

func FuzzDecodeCursor(f *testing.F) {
	c := NewCursors([]byte("fuzz key"))
	list := PrescriptionList("org", "user", "patient")
	for _, s := range []struct {
		pos    string
		offset int
	}{
		{pos: "fffffe4a3c2b1a09" + "0123456789ABCDEFGH", offset: 20},
		{pos: "x", offset: 0},
		{pos: "x", offset: 128},
		{pos: "\x00", offset: 1 << 31},
	} {
		good := c.Encode(list, []byte(s.pos), s.offset)
		f.Add(good)
		f.Add(good + "\n")
		f.Add(good[:len(good)-1] + string(good[len(good)-1]+1))
	}
	for _, s := range []string{"", "A", "AAAA", "%%%", "===="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, cursor string) {
		pos, offset, err := c.Decode(list, cursor)
		if err != nil {
			require.ErrorIs(t, err, ErrBadCursor)
			return
		}
		require.GreaterOrEqual(t, offset, 0)
		require.Equal(t, cursor, c.Encode(list, pos, offset), "an accepted cursor is the one its contents encode to")
		_, _, err = c.Decode(PrescriptionList("org", "user", "other"), cursor)
		require.ErrorIs(t, err, ErrBadCursor, "a cursor belongs to one list")
	})
}
