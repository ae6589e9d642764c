package storage

import (
	"context"
	"fmt"

	"github.com/dgraph-io/badger/v4"
)

// drugKey is the key of an organization-level drug (userID empty) or a
// user-level one.
func drugKey(orgID, userID, id string) []byte {
	if userID == "" {
		return orgDrugKey(orgID, id)
	}
	return userDrugKey(orgID, userID, id)
}

// CreateCustomDrugs stores drugs, each organization-level when its UserID is
// empty and user-level otherwise, assigning ids when unset. They are written
// in batched transactions (at most 500 drugs or 256 KiB each), not one per
// drug; on error, the batches written before it stay and the error says how
// many drugs they held. The owning organization, and user for user-level
// drugs, must exist (ErrNotFound).
func (s *Store) CreateCustomDrugs(ctx context.Context, drugs []CustomDrug) error {
	const maxBatch, maxBatchBytes = 500, 256 << 10
	values := make([][]byte, len(drugs))
	for i := range drugs {
		d := &drugs[i]
		if d.ID == "" {
			d.ID = NewID()
		}
		if !validIDs(d.OrgID, d.ID) || (d.UserID != "" && !validID(d.UserID)) {
			return fmt.Errorf("storage: create custom drugs: %w", ErrNotFound)
		}
		v, err := encode(d)
		if err != nil {
			return err
		}
		if len(v) > maxRecordBytes {
			return fmt.Errorf("storage: create custom drugs: %w", ErrTooLarge)
		}
		values[i] = v
	}
	for start := 0; start < len(drugs); {
		end, size := start, 0
		for end < len(drugs) && end-start < maxBatch && (end == start || size+len(values[end]) <= maxBatchBytes) {
			size += len(values[end])
			end++
		}
		err := s.update(ctx, func(txn *badger.Txn) error {
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
						return ErrNotFound
					}
					checked[string(owner)] = true
				}
				if err := txn.Set(drugKey(d.OrgID, d.UserID, d.ID), values[i]); err != nil {
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

// CreateCustomDrug stores one drug; see CreateCustomDrugs.
func (s *Store) CreateCustomDrug(ctx context.Context, d *CustomDrug) error {
	drugs := []CustomDrug{*d}
	if err := s.CreateCustomDrugs(ctx, drugs); err != nil {
		return err
	}
	*d = drugs[0]
	return nil
}

// ListCustomDrugs returns the organization-level drugs followed by the
// user's own, each group in creation order. ErrNotFound means the user does
// not exist in the organization.
func (s *Store) ListCustomDrugs(ctx context.Context, orgID, userID string) ([]CustomDrug, error) {
	var out []CustomDrug
	err := s.scanCustomDrugs(ctx, orgID, userID, func(owner string, v []byte) error {
		d := CustomDrug{OrgID: orgID, UserID: owner}
		if err := decode(v, &d); err != nil {
			return err
		}
		out = append(out, d)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ListCustomDrugsJSON is ListCustomDrugs for serving: it appends the drugs
// to dst as one JSON array of the stored objects (spec 2.4 shape, with
// custom_drug_id), without decoding them, and returns the count.
func (s *Store) ListCustomDrugsJSON(ctx context.Context, orgID, userID string, dst []byte) ([]byte, int, error) {
	out := append(dst, '[')
	n := 0
	err := s.scanCustomDrugs(ctx, orgID, userID, func(_ string, v []byte) error {
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
// drug (owner "") and then every drug of the user, in one transaction.
func (s *Store) scanCustomDrugs(ctx context.Context, orgID, userID string, fn func(owner string, v []byte) error) error {
	if !validIDs(orgID, userID) {
		return fmt.Errorf("storage: list custom drugs: %w", ErrNotFound)
	}
	err := s.view(ctx, func(txn *badger.Txn) error {
		if ok, err := exists(txn, userKey(orgID, userID)); err != nil {
			return err
		} else if !ok {
			return ErrNotFound
		}
		if err := s.scan(txn, orgDrugsPrefix(orgID), func(_, v []byte) error { return fn("", v) }); err != nil {
			return err
		}
		return s.scan(txn, userDrugsPrefix(orgID, userID), func(_, v []byte) error { return fn(userID, v) })
	})
	if err != nil {
		return fmt.Errorf("storage: list custom drugs: %w", err)
	}
	return nil
}

// UpdateCustomDrug reads the user's own drug, lets fn change it and writes
// it back in one transaction (fn may run again on a conflict). An
// organization-level drug or another user's drug is ErrNotFound.
func (s *Store) UpdateCustomDrug(ctx context.Context, orgID, userID, drugID string, fn func(*CustomDrug) error) (*CustomDrug, error) {
	if !validIDs(orgID, userID, drugID) {
		return nil, fmt.Errorf("storage: update custom drug: %w", ErrNotFound)
	}
	key := userDrugKey(orgID, userID, drugID)
	var d CustomDrug
	err := s.update(ctx, func(txn *badger.Txn) error {
		d = CustomDrug{OrgID: orgID, UserID: userID}
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

// DeleteCustomDrug removes the user's own drug; see UpdateCustomDrug for
// what is not found.
func (s *Store) DeleteCustomDrug(ctx context.Context, orgID, userID, drugID string) error {
	if !validIDs(orgID, userID, drugID) {
		return fmt.Errorf("storage: delete custom drug: %w", ErrNotFound)
	}
	key := userDrugKey(orgID, userID, drugID)
	err := s.update(ctx, func(txn *badger.Txn) error {
		if ok, err := exists(txn, key); err != nil {
			return err
		} else if !ok {
			return ErrNotFound
		}
		return txn.Delete(key)
	})
	if err != nil {
		return fmt.Errorf("storage: delete custom drug: %w", err)
	}
	return nil
}
