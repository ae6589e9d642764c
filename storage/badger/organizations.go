package badger

import (
	"context"
	"fmt"

	"github.com/rxgate/rxgate/storage"
)

// CreateOrganization stores o under its partner (storage.Store).
func (s *Store) CreateOrganization(ctx context.Context, o *storage.Organization) error {
	if err := o.PrepareCreate(s.now()); err != nil {
		return fmt.Errorf("storage: create organization: %w", err)
	}
	err := s.update(ctx, func(txn *tx) error {
		ok, err := exists(txn, partnerKey(o.PartnerID))
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("partner %w", storage.ErrNotFound)
		}
		if ok, err = exists(txn, organizationKey(o.ID)); err != nil {
			return err
		} else if ok {
			return storage.ErrAlreadyExists
		}
		return putRecord(txn, organizationKey(o.ID), fromOrganization(o))
	})
	if err != nil {
		return fmt.Errorf("storage: create organization: %w", err)
	}
	return nil
}

// GetOrganization returns the organization with id.
func (s *Store) GetOrganization(ctx context.Context, id string) (*storage.Organization, error) {
	if !storage.ValidID(id) {
		return nil, fmt.Errorf("storage: get organization: %w", storage.ErrNotFound)
	}
	var r organizationRecord
	if err := s.view(ctx, func(txn *tx) error { return getRecord(txn, organizationKey(id), &r) }); err != nil {
		return nil, fmt.Errorf("storage: get organization: %w", err)
	}
	o := r.organization()
	return &o, nil
}

// ListOrganizations returns every organization in id (creation) order.
func (s *Store) ListOrganizations(ctx context.Context) ([]storage.Organization, error) {
	var out []storage.Organization
	err := s.view(ctx, func(txn *tx) error {
		return s.scan(txn, organizationsPrefix(), func(_, v []byte) error {
			var r organizationRecord
			if err := decode(v, &r); err != nil {
				return err
			}
			out = append(out, r.organization())
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("storage: list organizations: %w", err)
	}
	return out, nil
}

// SetOrganizationSecret replaces the organization's secret hash and returns
// the organization; the old secret stops working when this returns.
func (s *Store) SetOrganizationSecret(ctx context.Context, id string, hash []byte) (*storage.Organization, error) {
	o, err := s.updateOrganization(ctx, id, func(r *organizationRecord) { r.SecretHash = hash })
	if err != nil {
		return nil, fmt.Errorf("storage: set organization secret: %w", err)
	}
	return o, nil
}

// ValidateOrganization marks the organization validated (spec 4.10, 6.1).
// Repeating it keeps the first validation time.
func (s *Store) ValidateOrganization(ctx context.Context, id string) (*storage.Organization, error) {
	now := s.nowUTC()
	o, err := s.updateOrganization(ctx, id, func(r *organizationRecord) {
		if r.ValidatedAt == nil {
			r.ValidatedAt = &now
		}
	})
	if err != nil {
		return nil, fmt.Errorf("storage: validate organization: %w", err)
	}
	return o, nil
}

func (s *Store) updateOrganization(ctx context.Context, id string, fn func(*organizationRecord)) (*storage.Organization, error) {
	if !storage.ValidID(id) {
		return nil, storage.ErrNotFound
	}
	var r organizationRecord
	err := s.update(ctx, func(txn *tx) error {
		r = organizationRecord{}
		if err := getRecord(txn, organizationKey(id), &r); err != nil {
			return err
		}
		fn(&r)
		return putRecord(txn, organizationKey(id), r)
	})
	if err != nil {
		return nil, err
	}
	o := r.organization()
	return &o, nil
}
