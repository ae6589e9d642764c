package storage

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// WebhookEndpoint is a URL that receives a partner's events (spec 6.1).
//
// Its secrets are stored as they are, unlike partner and organization
// secrets, which are stored hashed: a signature (spec 6.4) is an HMAC keyed
// with the secret itself, so the server must hold it to sign.
type WebhookEndpoint struct {
	ID        string
	PartnerID string
	URL       string
	// Secret keys the current signature.
	Secret string
	// PreviousSecret is the secret replaced by the last rotation. Until
	// PreviousUntil deliveries also carry a signature made with it.
	PreviousSecret string
	PreviousUntil  time.Time
	CreatedAt      time.Time
	RotatedAt      *time.Time
}

// SigningSecrets returns the secrets a delivery sent at now is signed with:
// while the previous secret's grace period runs, the previous one first,
// then the current one ("old and new"), so that a receiver that reads only
// the first v1 and has not yet deployed the new secret keeps verifying
// during the grace period, which is what the grace period is for; a
// receiver that checks every v1 verifies with either secret.
func (e *WebhookEndpoint) SigningSecrets(now time.Time) []string {
	if e.PreviousSecret != "" && now.Before(e.PreviousUntil) {
		return []string{e.PreviousSecret, e.Secret}
	}
	return []string{e.Secret}
}

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

func fromEndpoint(e *WebhookEndpoint) endpointRecord {
	return endpointRecord{
		ID: e.ID, PartnerID: e.PartnerID, URL: e.URL, Secret: e.Secret, PreviousSecret: e.PreviousSecret,
		PreviousUntil: e.PreviousUntil, CreatedAt: e.CreatedAt, RotatedAt: e.RotatedAt,
	}
}

func (r endpointRecord) endpoint() WebhookEndpoint {
	return WebhookEndpoint{
		ID: r.ID, PartnerID: r.PartnerID, URL: r.URL, Secret: r.Secret, PreviousSecret: r.PreviousSecret,
		PreviousUntil: r.PreviousUntil, CreatedAt: r.CreatedAt, RotatedAt: r.RotatedAt,
	}
}

// CreateWebhookEndpoint stores e for its partner, assigning an id (unless
// set) and the creation time. ErrNotFound means the partner does not exist;
// ErrAlreadyExists that the id, or the same URL for the same partner, is
// taken (one URL registered twice would receive every event twice).
func (s *Store) CreateWebhookEndpoint(ctx context.Context, e *WebhookEndpoint) error {
	if e.ID == "" {
		e.ID = NewID()
	}
	if !validIDs(e.ID, e.PartnerID) {
		return fmt.Errorf("storage: create webhook endpoint: %w", ErrNotFound)
	}
	e.CreatedAt = s.nowUTC()
	err := s.update(ctx, func(txn *badger.Txn) error {
		if ok, err := exists(txn, partnerKey(e.PartnerID)); err != nil {
			return err
		} else if !ok {
			return fmt.Errorf("partner %w", ErrNotFound)
		}
		if ok, err := exists(txn, endpointKey(e.ID)); err != nil {
			return err
		} else if ok {
			return ErrAlreadyExists
		}
		others, err := partnerEndpoints(txn, e.PartnerID)
		if err != nil {
			return err
		}
		for _, o := range others {
			if o.URL == e.URL {
				return fmt.Errorf("url %w", ErrAlreadyExists)
			}
		}
		if err := txn.Set(partnerHookKey(e.PartnerID, e.ID), nil); err != nil {
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
func (s *Store) GetWebhookEndpoint(ctx context.Context, id string) (*WebhookEndpoint, error) {
	if !validID(id) {
		return nil, fmt.Errorf("storage: get webhook endpoint: %w", ErrNotFound)
	}
	var r endpointRecord
	if err := s.view(ctx, func(txn *badger.Txn) error { return getRecord(txn, endpointKey(id), &r) }); err != nil {
		return nil, fmt.Errorf("storage: get webhook endpoint: %w", err)
	}
	e := r.endpoint()
	return &e, nil
}

// ListWebhookEndpoints returns the endpoints of the partner, or of every
// partner when partnerID is "", in id (creation) order.
func (s *Store) ListWebhookEndpoints(ctx context.Context, partnerID string) ([]WebhookEndpoint, error) {
	out := []WebhookEndpoint{}
	err := s.view(ctx, func(txn *badger.Txn) error {
		if partnerID != "" {
			if !validID(partnerID) {
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

// DeleteWebhookEndpoint removes the endpoint. Jobs already queued for it are
// not sent: each is recorded as failed when its turn comes.
func (s *Store) DeleteWebhookEndpoint(ctx context.Context, id string) error {
	if !validID(id) {
		return fmt.Errorf("storage: delete webhook endpoint: %w", ErrNotFound)
	}
	err := s.update(ctx, func(txn *badger.Txn) error {
		var r endpointRecord
		if err := getRecord(txn, endpointKey(id), &r); err != nil {
			return err
		}
		if err := txn.Delete(partnerHookKey(r.PartnerID, id)); err != nil {
			return err
		}
		return txn.Delete(endpointKey(id))
	})
	if err != nil {
		return fmt.Errorf("storage: delete webhook endpoint: %w", err)
	}
	return nil
}

// RotateWebhookSecret makes secret the endpoint's signing secret. The
// secret it replaces keeps signing too until graceUntil; a secret replaced
// earlier stops at once, so at most two signatures are ever sent.
func (s *Store) RotateWebhookSecret(ctx context.Context, id, secret string, graceUntil time.Time) (*WebhookEndpoint, error) {
	if !validID(id) {
		return nil, fmt.Errorf("storage: rotate webhook secret: %w", ErrNotFound)
	}
	now := s.nowUTC()
	var r endpointRecord
	err := s.update(ctx, func(txn *badger.Txn) error {
		r = endpointRecord{}
		if err := getRecord(txn, endpointKey(id), &r); err != nil {
			return err
		}
		r.PreviousSecret, r.PreviousUntil = r.Secret, graceUntil.UTC()
		r.Secret = secret
		r.RotatedAt = &now
		return putRecord(txn, endpointKey(id), r)
	})
	if err != nil {
		return nil, fmt.Errorf("storage: rotate webhook secret: %w", err)
	}
	e := r.endpoint()
	return &e, nil
}

// partnerEndpoints reads the partner's endpoints through its index.
func partnerEndpoints(txn *badger.Txn, partnerID string) ([]WebhookEndpoint, error) {
	prefix := partnerHooksPrefix(partnerID)
	var ids []string
	opts := badger.DefaultIteratorOptions
	opts.Prefix = prefix
	opts.PrefetchValues = false
	it := txn.NewIterator(opts)
	for it.Rewind(); it.Valid(); it.Next() {
		ids = append(ids, string(it.Item().Key()[len(prefix):]))
	}
	it.Close()
	out := make([]WebhookEndpoint, 0, len(ids))
	for _, id := range ids {
		var r endpointRecord
		err := getRecord(txn, endpointKey(id), &r)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, r.endpoint())
	}
	return out, nil
}
