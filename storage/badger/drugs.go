package badger

import (
	"context"
	"fmt"

	"github.com/rxgate/rxgate/storage"
)

// drugKey is the key of an organization-level drug (userID empty) or a
// user-level one.
func drugKey(orgID, userID, id string) []byte {
	if userID == "" {
		return orgDrugKey(orgID, id)
	}
	return userDrugKey(orgID, userID, id)
}

// CreateCustomDrugs stores drugs (storage.Store) in batched transactions of
// at most 500 drugs or 256 KiB each, well within Badger's transaction
// limits, not one per drug.
func (s *Store) CreateCustomDrugs(ctx context.Context, drugs []storage.CustomDrug) error {
	const maxBatch, maxBatchBytes = 500, 256 << 10
	values := make([][]byte, len(drugs))
	for i := range drugs {
		d := &drugs[i]
		if err := d.PrepareCreate(); err != nil {
			return fmt.Errorf("storage: create custom drugs: %w", err)
		}
		v, err := encode(d)
		if err != nil {
			return err
		}
		if len(v) > s.maxRecord {
			return fmt.Errorf("storage: create custom drugs: %w", storage.ErrTooLarge)
		}
		values[i] = v
	}
	for start := 0; start < len(drugs); {
		end, size := start, 0
		for end < len(drugs) && end-start < maxBatch && (end == start || size+len(values[end]) <= maxBatchBytes) {
			size += len(values[end])
			end++
		}
		err := s.update(ctx, func(txn *tx) error {
			checked := map[string]bool{}
			for i := start; i < end; i++ {
				d := &drugs[i]
				owner := organizationKey(d.OrgID)
				if d.UserID != "" {
					owner = userKey(d.OrgID, d.UserID)
				}
				if !checked[string(owner)] {
					if ok, err := exists(txn, owner); err != nil {
						return err
					} else if !ok {
						return storage.ErrNotFound
					}
					checked[string(owner)] = true
				}
				if err := txn.set(drugKey(d.OrgID, d.UserID, d.ID), values[i]); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("storage: create custom drugs (%d stored before the error): %w", start, err)
		}
		start = end
	}
	return nil
}

// ListCustomDrugsJSON appends the organization's drugs and then the user's
// to dst as one JSON array of the stored objects (spec 2.4 shape, with
// custom_drug_id), without decoding them, and returns the count
// (storage.Store).
func (s *Store) ListCustomDrugsJSON(ctx context.Context, orgID, userID string, dst []byte) ([]byte, int, error) {
	out := append(dst, '[')
	n := 0
	err := s.scanCustomDrugs(ctx, orgID, userID, func(v []byte) error {
		if len(v) < 2 || v[0] != recordV1 {
			return fmt.Errorf("storage: decode custom drug: unknown record version")
		}
		if n > 0 {
			out = append(out, ',')
		}
		out = append(out, v[1:]...)
		n++
		return nil
	})
	if err != nil {
		return dst, 0, err
	}
	return append(out, ']'), n, nil
}

// scanCustomDrugs calls fn with the stored value of every organization-level
// drug and then every drug of the user, in one transaction.
func (s *Store) scanCustomDrugs(ctx context.Context, orgID, userID string, fn func(v []byte) error) error {
	if !storage.ValidIDs(orgID, userID) {
		return fmt.Errorf("storage: list custom drugs: %w", storage.ErrNotFound)
	}
	err := s.view(ctx, func(txn *tx) error {
		if ok, err := exists(txn, userKey(orgID, userID)); err != nil {
			return err
		} else if !ok {
			return storage.ErrNotFound
		}
		if err := s.scan(txn, orgDrugsPrefix(orgID), func(_, v []byte) error { return fn(v) }); err != nil {
			return err
		}
		return s.scan(txn, userDrugsPrefix(orgID, userID), func(_, v []byte) error { return fn(v) })
	})
	if err != nil {
		return fmt.Errorf("storage: list custom drugs: %w", err)
	}
	return nil
}

// UpdateCustomDrug reads the user's own drug, lets fn change it and writes
// it back in one transaction, retried on a conflict (storage.Store).
func (s *Store) UpdateCustomDrug(ctx context.Context, orgID, userID, drugID string, fn func(*storage.CustomDrug) error) (*storage.CustomDrug, error) {
	if !storage.ValidIDs(orgID, userID, drugID) {
		return nil, fmt.Errorf("storage: update custom drug: %w", storage.ErrNotFound)
	}
	key := userDrugKey(orgID, userID, drugID)
	var d storage.CustomDrug
	err := s.update(ctx, func(txn *tx) error {
		d = storage.CustomDrug{OrgID: orgID, UserID: userID}
		if err := getRecord(txn, key, &d); err != nil {
			return err
		}
		if err := fn(&d); err != nil {
			return err
		}
		d.OrgID, d.UserID, d.ID = orgID, userID, drugID
		return putRecord(txn, key, &d)
	})
	if err != nil {
		return nil, fmt.Errorf("storage: update custom drug: %w", err)
	}
	return &d, nil
}

// DeleteCustomDrug removes the user's own drug (storage.Store).
func (s *Store) DeleteCustomDrug(ctx context.Context, orgID, userID, drugID string) error {
	if !storage.ValidIDs(orgID, userID, drugID) {
		return fmt.Errorf("storage: delete custom drug: %w", storage.ErrNotFound)
	}
	key := userDrugKey(orgID, userID, drugID)
	err := s.update(ctx, func(txn *tx) error {
		if ok, err := exists(txn, key); err != nil {
			return err
		} else if !ok {
			return storage.ErrNotFound
		}
		return txn.delete(key)
	})
	if err != nil {
		return fmt.Errorf("storage: delete custom drug: %w", err)
	}
	return nil
}
