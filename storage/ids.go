package storage

import (
	"crypto/rand"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
)

// NewID returns a new time-ordered (version 7) uuid, so that records keyed
// by a generated id list in creation order.
func NewID() string {
	return uuid.Must(uuid.NewV7()).String()
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
