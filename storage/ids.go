package storage

import (
	"crypto/rand"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
)

// NewID returns a new time-ordered (version 7) uuid, so that records keyed
// by a generated id list in creation order.
func NewID() string {
	return uuid.Must(uuid.NewV7()).String()
}

// idSeq orders the ids NewIDAt makes within one millisecond: a counter
// for the whole process, from a random start, so that ids made later in
// the process sort after earlier ones of the same millisecond whatever the
// clocks that gave their times (tests run several fake clocks at once).
var idSeq atomic.Uint64

func init() {
	b := randomBytes(8)
	var n uint64
	for _, c := range b {
		n = n<<8 | uint64(c)
	}
	idSeq.Store(n >> (64 - idSeqBits + 1)) // the lower half: room to count
}

// idSeqBits is the counter's width: rand_a's 12 bits and the 30 bits of
// rand_b after the variant; the last 32 bits stay random.
const idSeqBits = 42

// NewIDAt returns a new version-7 uuid whose time is t's millisecond
// rather than the wall clock's, so that a record's id orders by the time
// the record says it was made: the retention purge bounds its scan of
// events by the id of its cutoff (MinIDAt). Within one millisecond the
// ids of a process sort in the order they were made.
func NewIDAt(t time.Time) string {
	ms := uint64(max(t.UnixMilli(), 0)) & (1<<48 - 1)
	seq := idSeq.Add(1) & (1<<idSeqBits - 1)
	r := randomBytes(4)
	var u uuid.UUID
	for i := range 6 {
		u[i] = byte(ms >> (40 - 8*i))
	}
	randA, randB := seq>>30, seq&(1<<30-1) // 12 bits, 30 bits
	u[6] = 0x70 | byte(randA>>8)
	u[7] = byte(randA)
	u[8] = 0x80 | byte(randB>>24)
	u[9] = byte(randB >> 16)
	u[10] = byte(randB >> 8)
	u[11] = byte(randB)
	copy(u[12:], r)
	return u.String()
}

// MinIDAt is the smallest version-7 uuid of t's millisecond: every id
// NewIDAt (or NewID) made for an earlier millisecond sorts before it, as
// text as well as bytes, and every one made for t's millisecond or later
// sorts at or after it.
func MinIDAt(t time.Time) string {
	ms := uint64(max(t.UnixMilli(), 0)) & (1<<48 - 1)
	var u uuid.UUID
	for i := range 6 {
		u[i] = byte(ms >> (40 - 8*i))
	}
	u[6], u[8] = 0x70, 0x80
	return u.String()
}

// scidAlphabet is Crockford's base32: no I, L, O or U to misread.
const scidAlphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// NewSCID returns a new 18-character prescription identifier.
func NewSCID() string {
	b := randomBytes(18)
	for i := range b {
		b[i] = scidAlphabet[int(b[i])%len(scidAlphabet)]
	}
	return string(b)
}

// MaxIDLength bounds every id a store accepts.
const MaxIDLength = 128

// ValidID reports whether id may address a record: not empty, at most
// MaxIDLength bytes, and without "/" or NUL. Every backend refuses other
// ids with ErrNotFound, so that an id can never address another record's
// prefix in a key-value backend, nor mean one thing on one backend and
// another on the next.
func ValidID(id string) bool {
	return id != "" && len(id) <= MaxIDLength && !strings.ContainsAny(id, "/\x00")
}

// ValidIDs reports whether every id is valid.
func ValidIDs(ids ...string) bool {
	for _, id := range ids {
		if !ValidID(id) {
			return false
		}
	}
	return true
}

// Timestamp is t as stores keep it: UTC, truncated to microseconds, so that
// it survives a JSON round trip and a SQL timestamp unchanged.
func Timestamp(t time.Time) time.Time {
	return t.UTC().Truncate(time.Microsecond)
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("storage: crypto/rand failed: %v", err)) // never happens on supported platforms
	}
	return b
}
