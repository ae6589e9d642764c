package storage

import "github.com/google/uuid"

// NewID returns a new time-ordered (version 7) uuid, so that records keyed
// by a generated id list in creation order.
func NewID() string {
	return uuid.Must(uuid.NewV7()).String()
}
