package badger

import (
	"context"
	"fmt"

	"github.com/rxgate/rxgate/storage"
)

// CreateOperatorKey stores k, assigning an id and creation time when
// unset; the name index keeps names unique.
func (s *Store) CreateOperatorKey(ctx context.Context, k *storage.OperatorKey) error {
	if err := k.PrepareCreate(s.now()); err != nil {
		return fmt.Errorf("storage: create operator key: %w", err)
	}
	err := s.update(ctx, func(txn *tx) error {
		for _, key := range [][]byte{operatorKeyKey(k.ID), operatorNameKey(k.Name)} {
			if ok, err := exists(txn, key); err != nil {
				return err
			} else if ok {
				return storage.ErrAlreadyExists
			}
		}
		if err := txn.set(operatorNameKey(k.Name), []byte(k.ID)); err != nil {
			return err
		}
		return putRecord(txn, operatorKeyKey(k.ID), fromOperatorKey(k))
	})
	if err != nil {
		return fmt.Errorf("storage: create operator key: %w", err)
	}
	return nil
}

// GetOperatorKey returns the operator key with id.
func (s *Store) GetOperatorKey(ctx context.Context, id string) (*storage.OperatorKey, error) {
	if !storage.ValidID(id) {
		return nil, fmt.Errorf("storage: get operator key: %w", storage.ErrNotFound)
	}
	var r operatorKeyRecord
	if err := s.view(ctx, func(txn *tx) error { return getRecord(txn, operatorKeyKey(id), &r) }); err != nil {
		return nil, fmt.Errorf("storage: get operator key: %w", err)
	}
	k := r.operatorKey()
	return &k, nil
}

// ListOperatorKeys returns every operator key in id order.
func (s *Store) ListOperatorKeys(ctx context.Context) ([]storage.OperatorKey, error) {
	var out []storage.OperatorKey
	err := s.view(ctx, func(txn *tx) error {
		return s.scan(txn, operatorKeysPrefix(), func(_, v []byte) error {
			var r operatorKeyRecord
			if err := decode(v, &r); err != nil {
				return err
			}
			out = append(out, r.operatorKey())
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("storage: list operator keys: %w", err)
	}
	return out, nil
}

// RevokeOperatorKey marks the key revoked, keeping the first revocation
// time.
func (s *Store) RevokeOperatorKey(ctx context.Context, id string) (*storage.OperatorKey, error) {
	if !storage.ValidID(id) {
		return nil, fmt.Errorf("storage: revoke operator key: %w", storage.ErrNotFound)
	}
	var r operatorKeyRecord
	err := s.update(ctx, func(txn *tx) error {
		r = operatorKeyRecord{}
		if err := getRecord(txn, operatorKeyKey(id), &r); err != nil {
			return err
		}
		if r.RevokedAt != nil {
			return nil
		}
		now := storage.Timestamp(s.now())
		r.RevokedAt = &now
		return putRecord(txn, operatorKeyKey(id), r)
	})
	if err != nil {
		return nil, fmt.Errorf("storage: revoke operator key: %w", err)
	}
	k := r.operatorKey()
	return &k, nil
}
