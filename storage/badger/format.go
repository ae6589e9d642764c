package badger

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	badgerdb "github.com/dgraph-io/badger/v4"

	"github.com/rxgate/rxgate/storage"
)

// The store's format: the layout of its keys and records, recorded under
// the meta key "format". A binary migrates an older store forward at Open,
// one version at a time, and refuses a newer one.
//
// History:
//
//	1: rxgate before the format was recorded (no meta key): an event's
//	   payload is inside its record.
//	2: an event's payload has its own key (ep/{event}).
//	3: events are indexed by partner (ea/{partner}/{event}) and by partner
//	   and status (eb/{partner}/{status}/{event}).
const formatVersion = 3

// metaFormat is the meta key holding the format version, in decimal.
const metaFormat = "format"

// ErrNewerFormat reports a store written by a newer rxgate than this one.
var ErrNewerFormat = errors.New("storage: the store was written by a newer rxgate")

// migrations[v] moves a store from format v to v+1. Each one commits in
// batches and is idempotent: a crash in the middle leaves the format at v,
// and the next start runs it again from the beginning, skipping what is
// done. The format is raised only once the migration has finished, so a
// store is never marked with a version whose layout it does not have.
var migrations = map[int]func(*Store, context.Context) error{
	1: (*Store).splitEventPayloads,
	2: (*Store).indexEventPartners,
}

// storedFormat returns the store's format version and whether it is
// recorded: the meta key's, or, without it, 1 for a store that holds
// anything and formatVersion for a new, empty one.
func (s *Store) storedFormat(ctx context.Context) (v int, recorded bool, err error) {
	err = s.view(ctx, func(txn *tx) error {
		err := txn.value(metaKey(metaFormat), func(b []byte) error {
			n, err := strconv.Atoi(string(b))
			if err != nil || n < 1 {
				return fmt.Errorf("storage: the store's format version %q is not a version", b)
			}
			v, recorded = n, true
			return nil
		})
		if !errors.Is(err, storage.ErrNotFound) {
			return err
		}
		it := txn.iterator(badgerdb.IteratorOptions{PrefetchValues: false})
		defer it.Close()
		it.Rewind()
		v = formatVersion
		if it.Valid() {
			v = 1
		}
		return nil
	})
	return v, recorded, err
}

// checkFormat refuses a store of a newer format than this code's, before
// anything reads or writes it. It returns the stored version and whether
// it is recorded.
func (s *Store) checkFormat(ctx context.Context) (int, bool, error) {
	v, recorded, err := s.storedFormat(ctx)
	if err != nil {
		return 0, false, err
	}
	if v > formatVersion {
		return 0, false, fmt.Errorf("%w: it has format version %d, and this rxgate reads versions up to %d; run the rxgate that wrote it, or a newer one", ErrNewerFormat, v, formatVersion)
	}
	return v, recorded, nil
}

// migrate moves the store from format from to formatVersion, recording
// each version reached; a new store just records formatVersion.
func (s *Store) migrate(ctx context.Context, from int, recorded bool) error {
	for v := from; v < formatVersion; v++ {
		s.log.Info("migrating the store's format", "from", v, "to", v+1)
		if err := migrations[v](s, ctx); err != nil {
			return fmt.Errorf("storage: migrate format %d to %d: %w", v, v+1, err)
		}
		if err := s.setFormat(ctx, v+1); err != nil {
			return err
		}
	}
	if from == formatVersion && !recorded {
		return s.setFormat(ctx, formatVersion) // a new store
	}
	return nil
}

func (s *Store) setFormat(ctx context.Context, v int) error {
	return s.update(ctx, func(txn *tx) error { return txn.set(metaKey(metaFormat), []byte(strconv.Itoa(v))) })
}
