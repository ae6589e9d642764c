package badger

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	badgerdb "github.com/dgraph-io/badger/v4"

	"github.com/rxgate/rxgate/storage"
)

type endpointRecord struct {
	ID             string     `json:"id"`
	PartnerID      string     `json:"partner_id"`
	URL            string     `json:"url"`
	Secret         string     `json:"secret"`
	PreviousSecret string     `json:"previous_secret,omitempty"`
	PreviousUntil  time.Time  `json:"previous_until,omitzero"`
	CreatedAt      time.Time  `json:"created_at"`
	RotatedAt      *time.Time `json:"rotated_at,omitempty"`
	// Scheme is written only when it is not the default (rxgate), so an
	// endpoint stored before the field existed and one on the default
	// scheme have the same record.
	Scheme string `json:"signature_scheme,omitempty"`
	// The health members are written only when set: a record stored
	// before they existed reads as an enabled endpoint with no failing
	// streak.
	FailingSince   *time.Time `json:"failing_since,omitempty"`
	DisabledAt     *time.Time `json:"disabled_at,omitempty"`
	DisabledReason string     `json:"disabled_reason,omitempty"`
}

func fromEndpoint(e *storage.WebhookEndpoint) endpointRecord {
	return endpointRecord{
		ID: e.ID, PartnerID: e.PartnerID, URL: e.URL, Secret: e.Secret, PreviousSecret: e.PreviousSecret,
		PreviousUntil: e.PreviousUntil, CreatedAt: e.CreatedAt, RotatedAt: e.RotatedAt,
		Scheme:       recordScheme(e.Scheme()),
		FailingSince: copyTime(e.FailingSince), DisabledAt: copyTime(e.DisabledAt), DisabledReason: e.DisabledReason,
	}
}

// recordScheme is the scheme as a record stores it: "" for the default.
func recordScheme(scheme string) string {
	if scheme == storage.SchemeRxgate {
		return ""
	}
	return scheme
}

func (r endpointRecord) endpoint() storage.WebhookEndpoint {
	return storage.WebhookEndpoint{
		ID: r.ID, PartnerID: r.PartnerID, URL: r.URL, Secret: r.Secret, PreviousSecret: r.PreviousSecret,
		PreviousUntil: r.PreviousUntil, CreatedAt: r.CreatedAt, RotatedAt: copyTime(r.RotatedAt),
		SignatureScheme: (&storage.WebhookEndpoint{SignatureScheme: r.Scheme}).Scheme(),
		FailingSince:    copyTime(r.FailingSince), DisabledAt: copyTime(r.DisabledAt), DisabledReason: r.DisabledReason,
	}
}

// copyTime returns a copy of *t, or nil: an endpoint made from a cached
// record (claims read them through the record cache) shares nothing with
// it.
func copyTime(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	c := *t
	return &c
}

// CreateWebhookEndpoint stores e for its partner (storage.Store), indexed
// under the partner.
func (s *Store) CreateWebhookEndpoint(ctx context.Context, e *storage.WebhookEndpoint) error {
	if err := e.PrepareCreate(s.now()); err != nil {
		return fmt.Errorf("storage: create webhook endpoint: %w", err)
	}
	err := s.update(ctx, func(txn *tx) error {
		if ok, err := exists(txn, partnerKey(e.PartnerID)); err != nil {
			return err
		} else if !ok {
			return fmt.Errorf("partner %w", storage.ErrNotFound)
		}
		if ok, err := exists(txn, endpointKey(e.ID)); err != nil {
			return err
		} else if ok {
			return storage.ErrAlreadyExists
		}
		others, err := partnerEndpoints(txn, e.PartnerID)
		if err != nil {
			return err
		}
		for _, o := range others {
			if o.URL == e.URL {
				return fmt.Errorf("url %w", storage.ErrAlreadyExists)
			}
		}
		if err := txn.set(partnerHookKey(e.PartnerID, e.ID), nil); err != nil {
			return err
		}
		return putRecord(txn, endpointKey(e.ID), fromEndpoint(e))
	})
	if err != nil {
		return fmt.Errorf("storage: create webhook endpoint: %w", err)
	}
	return nil
}

// GetWebhookEndpoint returns the endpoint with id.
func (s *Store) GetWebhookEndpoint(ctx context.Context, id string) (*storage.WebhookEndpoint, error) {
	if !storage.ValidID(id) {
		return nil, fmt.Errorf("storage: get webhook endpoint: %w", storage.ErrNotFound)
	}
	var r endpointRecord
	if err := s.view(ctx, func(txn *tx) error { return getRecord(txn, endpointKey(id), &r) }); err != nil {
		return nil, fmt.Errorf("storage: get webhook endpoint: %w", err)
	}
	e := r.endpoint()
	return &e, nil
}

// ListWebhookEndpoints returns the endpoints of the partner, or of every
// partner when partnerID is "", in id (creation) order.
func (s *Store) ListWebhookEndpoints(ctx context.Context, partnerID string) ([]storage.WebhookEndpoint, error) {
	out := []storage.WebhookEndpoint{}
	err := s.view(ctx, func(txn *tx) error {
		if partnerID != "" {
			if !storage.ValidID(partnerID) {
				return nil
			}
			var err error
			out, err = partnerEndpoints(txn, partnerID)
			return err
		}
		return s.scan(txn, endpointsPrefix(), func(_, v []byte) error {
			var r endpointRecord
			if err := decode(v, &r); err != nil {
				return err
			}
			out = append(out, r.endpoint())
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("storage: list webhook endpoints: %w", err)
	}
	return out, nil
}

// DeleteWebhookEndpoint removes the endpoint and its index key
// (storage.Store); its queued jobs stay.
func (s *Store) DeleteWebhookEndpoint(ctx context.Context, id string) error {
	if !storage.ValidID(id) {
		return fmt.Errorf("storage: delete webhook endpoint: %w", storage.ErrNotFound)
	}
	err := s.update(ctx, func(txn *tx) error {
		var r endpointRecord
		if err := getRecord(txn, endpointKey(id), &r); err != nil {
			return err
		}
		if err := txn.delete(partnerHookKey(r.PartnerID, id)); err != nil {
			return err
		}
		return txn.delete(endpointKey(id))
	})
	if err != nil {
		return fmt.Errorf("storage: delete webhook endpoint: %w", err)
	}
	return nil
}

// RotateWebhookSecret makes secret the endpoint's signing secret
// (storage.WebhookEndpoint.Rotate).
func (s *Store) RotateWebhookSecret(ctx context.Context, id, secret string, graceUntil time.Time) (*storage.WebhookEndpoint, error) {
	if !storage.ValidID(id) {
		return nil, fmt.Errorf("storage: rotate webhook secret: %w", storage.ErrNotFound)
	}
	now := s.nowUTC()
	var e storage.WebhookEndpoint
	err := s.update(ctx, func(txn *tx) error {
		var r endpointRecord
		if err := getRecord(txn, endpointKey(id), &r); err != nil {
			return err
		}
		e = r.endpoint()
		e.Rotate(secret, now, graceUntil)
		return putRecord(txn, endpointKey(id), fromEndpoint(&e))
	})
	if err != nil {
		return nil, fmt.Errorf("storage: rotate webhook secret: %w", err)
	}
	return &e, nil
}

// SetWebhookSignatureScheme changes the endpoint's signature scheme
// (storage.Store).
func (s *Store) SetWebhookSignatureScheme(ctx context.Context, id, scheme string) (*storage.WebhookEndpoint, error) {
	if !storage.ValidScheme(scheme) {
		return nil, fmt.Errorf("storage: set signature scheme: unknown scheme %q", scheme)
	}
	if !storage.ValidID(id) {
		return nil, fmt.Errorf("storage: set signature scheme: %w", storage.ErrNotFound)
	}
	var e storage.WebhookEndpoint
	err := s.update(ctx, func(txn *tx) error {
		var r endpointRecord
		if err := getRecord(txn, endpointKey(id), &r); err != nil {
			return err
		}
		e = r.endpoint()
		e.SignatureScheme = scheme
		e.SignatureScheme = e.Scheme()
		return putRecord(txn, endpointKey(id), fromEndpoint(&e))
	})
	if err != nil {
		return nil, fmt.Errorf("storage: set signature scheme: %w", err)
	}
	return &e, nil
}

// changeEndpoint reads the endpoint, lets fn change it and writes it back
// (what fn returns false for is not written).
func (s *Store) changeEndpoint(ctx context.Context, id string, fn func(e *storage.WebhookEndpoint) bool) (*storage.WebhookEndpoint, error) {
	if !storage.ValidID(id) {
		return nil, storage.ErrNotFound
	}
	var e storage.WebhookEndpoint
	err := s.update(ctx, func(txn *tx) error {
		var r endpointRecord
		if err := getRecord(txn, endpointKey(id), &r); err != nil {
			return err
		}
		e = r.endpoint()
		if !fn(&e) {
			return nil
		}
		return putRecord(txn, endpointKey(id), fromEndpoint(&e))
	})
	if err != nil {
		return nil, err
	}
	return &e, nil
}

// DisableWebhookEndpoint disables the endpoint: claims skip its jobs
// (storage.Store).
func (s *Store) DisableWebhookEndpoint(ctx context.Context, id, reason string) (*storage.WebhookEndpoint, error) {
	now := s.nowUTC()
	e, err := s.changeEndpoint(ctx, id, func(e *storage.WebhookEndpoint) bool {
		if e.DisabledAt != nil {
			return false
		}
		e.DisabledAt, e.DisabledReason = &now, reason
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("storage: disable webhook endpoint: %w", err)
	}
	return e, nil
}

// EnableWebhookEndpoint enables the endpoint and forgets its failing
// streak; the queues wake for its held jobs (storage.Store).
func (s *Store) EnableWebhookEndpoint(ctx context.Context, id string) (*storage.WebhookEndpoint, error) {
	e, err := s.changeEndpoint(ctx, id, func(e *storage.WebhookEndpoint) bool {
		if e.DisabledAt == nil && e.FailingSince == nil {
			return false
		}
		e.DisabledAt, e.DisabledReason, e.FailingSince = nil, "", nil
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("storage: enable webhook endpoint: %w", err)
	}
	// Its jobs were skipped by every claim since it was disabled: the
	// next claims start its scan at the beginning.
	s.jobsQueued([]storage.Job{{EndpointID: id}})
	return e, nil
}

// hookIndex is the store's memory of the partners' endpoint indexes.
// Every prescription create reads its partner's twice, planning the create
// and again in its batch to check that the plan still holds, and each
// read is an iterator; the index changes only when an endpoint is
// registered or deleted. changed, the store's mark of markHooks, is the
// commit timestamp of the newest batch that wrote a partner's endpoint
// index, stored before that commit is published to reads (land). A read at
// timestamp r, which loads changed
// after taking r, may use what a read at h <= r saw when changed <= h: no
// such batch landed between them (one that landed by r is in changed, and
// one still in flight is after both). What a read after r saw is not used:
// a batch may have landed between r and it after r loaded changed.
type hookIndex struct {
	mu  sync.Mutex
	ids map[string]hooksAt // partner -> its endpoint ids; one per partner
}

// hooksAt is a partner's endpoint ids as a read at ts saw them.
type hooksAt struct {
	ids []string
	ts  uint64
}

// endpointIDs is partnerEndpointIDs, answered from the hookIndex when it
// can be: for a read-only transaction that no change of a partner's
// endpoints postdates. The ids it returns may be shared: callers must not
// modify them.
func (s *Store) endpointIDs(txn *tx, partnerID string) ([]string, error) {
	readTs := txn.txn.ReadTs()
	changed := s.mark(markHooks).Load() // after readTs was taken
	if txn.pending != nil || changed > readTs {
		return partnerEndpointIDs(txn, partnerID)
	}
	s.hooks.mu.Lock()
	h, ok := s.hooks.ids[partnerID]
	s.hooks.mu.Unlock()
	if ok && changed <= h.ts && h.ts <= readTs {
		return h.ids, nil
	}
	ids, err := partnerEndpointIDs(txn, partnerID)
	if err != nil {
		return nil, err
	}
	s.hooks.mu.Lock()
	if s.hooks.ids == nil {
		s.hooks.ids = make(map[string]hooksAt)
	}
	if h, ok := s.hooks.ids[partnerID]; !ok || h.ts < readTs {
		s.hooks.ids[partnerID] = hooksAt{ids: ids, ts: readTs}
	}
	s.hooks.mu.Unlock()
	return ids, nil
}

// changedSince reports whether keys of the marked kind m may differ, as the
// write transaction txn sees the store, from what a read at readTs saw: a
// batch that wrote one has landed since, or the batch in flight or txn's
// own batch wrote one.
func (s *Store) changedSince(txn *tx, readTs uint64, m marked) bool {
	return txn.batchMarked&m != 0 || (txn.prior != nil && txn.prior.marked&m != 0) || s.mark(m).Load() > readTs
}

// mark returns the mark of the kind m: the commit timestamp of the newest
// batch that wrote a key of that kind.
func (s *Store) mark(m marked) *atomic.Uint64 {
	return &s.marks[bits.TrailingZeros8(uint8(m))]
}

// partnerEndpointIDs lists the partner's endpoints from its index, which
// changes with the endpoints in the same transactions.
func partnerEndpointIDs(txn *tx, partnerID string) ([]string, error) {
	prefix := partnerHooksPrefix(partnerID)
	var ids []string
	opts := badgerdb.DefaultIteratorOptions
	opts.Prefix = prefix
	opts.PrefetchValues = false
	it := txn.iterator(opts)
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		ids = append(ids, string(it.Item().Key()[len(prefix):]))
	}
	return ids, nil
}

// partnerEndpoints reads the partner's endpoints through its index.
func partnerEndpoints(txn *tx, partnerID string) ([]storage.WebhookEndpoint, error) {
	ids, err := partnerEndpointIDs(txn, partnerID)
	if err != nil {
		return nil, err
	}
	out := make([]storage.WebhookEndpoint, 0, len(ids))
	for _, id := range ids {
		var r endpointRecord
		err := getRecord(txn, endpointKey(id), &r)
		if errors.Is(err, storage.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, r.endpoint())
	}
	return out, nil
}
