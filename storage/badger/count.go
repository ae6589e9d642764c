package badger

import (
	"context"
	"fmt"

	"github.com/rxgate/rxgate/storage"
)

// Count implements storage.Store: key-only scans of the organization, user
// and event-status prefixes, at one read timestamp.
func (s *Store) Count(ctx context.Context) (storage.Counts, error) {
	c := storage.Counts{Events: make(map[string]int, len(storage.EventStatuses))}
	count := func(txn *tx, prefix []byte) int {
		n := 0
		scanKeys(txn, prefix, func([]byte) { n++ })
		return n
	}
	err := s.view(ctx, func(txn *tx) error {
		c.Organizations = count(txn, organizationsPrefix())
		c.Users = count(txn, []byte(prefixUser))
		for _, st := range storage.EventStatuses {
			c.Events[st] = count(txn, eventsPrefix("", st))
		}
		return ctx.Err()
	})
	if err != nil {
		return storage.Counts{}, fmt.Errorf("storage: count: %w", err)
	}
	return c, nil
}
