package badger

import (
	"context"
	"fmt"

	"github.com/rxgate/rxgate/storage"
)

// CreatePartner stores p, assigning an id and creation time when unset.
func (s *Store) CreatePartner(ctx context.Context, p *storage.Partner) error {
	if err := p.PrepareCreate(s.now()); err != nil {
		return fmt.Errorf("storage: create partner: %w", err)
	}
	err := s.update(ctx, func(txn *tx) error {
		ok, err := exists(txn, partnerKey(p.ID))
		if err != nil {
			return err
		}
		if ok {
			return storage.ErrAlreadyExists
		}
		return putRecord(txn, partnerKey(p.ID), fromPartner(p))
	})
	if err != nil {
		return fmt.Errorf("storage: create partner: %w", err)
	}
	return nil
}

// GetPartner returns the partner with id.
func (s *Store) GetPartner(ctx context.Context, id string) (*storage.Partner, error) {
	if !storage.ValidID(id) {
		return nil, fmt.Errorf("storage: get partner: %w", storage.ErrNotFound)
	}
	var r partnerRecord
	if err := s.view(ctx, func(txn *tx) error { return getRecord(txn, partnerKey(id), &r) }); err != nil {
		return nil, fmt.Errorf("storage: get partner: %w", err)
	}
	p := r.partner()
	return &p, nil
}

// ListPartners returns every partner in id (creation) order.
func (s *Store) ListPartners(ctx context.Context) ([]storage.Partner, error) {
	var out []storage.Partner
	err := s.view(ctx, func(txn *tx) error {
		return s.scan(txn, partnersPrefix(), func(_, v []byte) error {
			var r partnerRecord
			if err := decode(v, &r); err != nil {
				return err
			}
			out = append(out, r.partner())
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("storage: list partners: %w", err)
	}
	return out, nil
}

// SetPartnerSecret replaces the partner's secret hash and returns the
// partner; the old secret stops working when this returns.
func (s *Store) SetPartnerSecret(ctx context.Context, id string, hash []byte) (*storage.Partner, error) {
	if !storage.ValidID(id) {
		return nil, fmt.Errorf("storage: set partner secret: %w", storage.ErrNotFound)
	}
	var r partnerRecord
	err := s.update(ctx, func(txn *tx) error {
		r = partnerRecord{}
		if err := getRecord(txn, partnerKey(id), &r); err != nil {
			return err
		}
		r.SecretHash = hash
		return putRecord(txn, partnerKey(id), r)
	})
	if err != nil {
		return nil, fmt.Errorf("storage: set partner secret: %w", err)
	}
	p := r.partner()
	return &p, nil
}
