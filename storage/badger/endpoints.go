package badger

import (
	"context"
	"errors"
	"fmt"
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
}

func fromEndpoint(e *storage.WebhookEndpoint) endpointRecord {
	return endpointRecord{
		ID: e.ID, PartnerID: e.PartnerID, URL: e.URL, Secret: e.Secret, PreviousSecret: e.PreviousSecret,
		PreviousUntil: e.PreviousUntil, CreatedAt: e.CreatedAt, RotatedAt: e.RotatedAt,
	}
}

func (r endpointRecord) endpoint() storage.WebhookEndpoint {
	return storage.WebhookEndpoint{
		ID: r.ID, PartnerID: r.PartnerID, URL: r.URL, Secret: r.Secret, PreviousSecret: r.PreviousSecret,
		PreviousUntil: r.PreviousUntil, CreatedAt: r.CreatedAt, RotatedAt: r.RotatedAt,
	}
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
