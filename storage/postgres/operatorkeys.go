package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/rxgate/rxgate/storage"
)

const operatorKeyCols = `id, name, role, secret_hash, created_at, revoked_at`

func scanOperatorKey(row pgx.Row) (*storage.OperatorKey, error) {
	var k storage.OperatorKey
	if err := row.Scan(&k.ID, &k.Name, &k.Role, &k.SecretHash, &k.CreatedAt, &k.RevokedAt); err != nil {
		return nil, err
	}
	k.CreatedAt = utc(k.CreatedAt)
	k.RevokedAt = utcp(k.RevokedAt)
	return &k, nil
}

// CreateOperatorKey implements storage.Store.
func (s *Store) CreateOperatorKey(ctx context.Context, k *storage.OperatorKey) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if err := k.PrepareCreate(s.now()); err != nil {
		return fmt.Errorf("storage: create operator key: %w", err)
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO operator_keys (`+operatorKeyCols+`) VALUES ($1, $2, $3, $4, $5, NULL)`,
		k.ID, k.Name, k.Role, k.SecretHash, k.CreatedAt)
	return wrap("create operator key", err)
}

// GetOperatorKey implements storage.Store.
func (s *Store) GetOperatorKey(ctx context.Context, id string) (*storage.OperatorKey, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if !storage.ValidID(id) {
		return nil, fmt.Errorf("storage: get operator key: %w", storage.ErrNotFound)
	}
	k, err := scanOperatorKey(s.pool.QueryRow(ctx, `SELECT `+operatorKeyCols+` FROM operator_keys WHERE id = $1`, id))
	return k, wrap("get operator key", err)
}

// ListOperatorKeys implements storage.Store.
func (s *Store) ListOperatorKeys(ctx context.Context) ([]storage.OperatorKey, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT `+operatorKeyCols+` FROM operator_keys ORDER BY id`)
	if err != nil {
		return nil, wrap("list operator keys", err)
	}
	out, err := collect(rows, scanOperatorKey)
	return out, wrap("list operator keys", err)
}

// RevokeOperatorKey implements storage.Store: a second revocation keeps
// the first time.
func (s *Store) RevokeOperatorKey(ctx context.Context, id string) (*storage.OperatorKey, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if !storage.ValidID(id) {
		return nil, fmt.Errorf("storage: revoke operator key: %w", storage.ErrNotFound)
	}
	k, err := scanOperatorKey(s.pool.QueryRow(ctx,
		`UPDATE operator_keys SET revoked_at = COALESCE(revoked_at, $2) WHERE id = $1 RETURNING `+operatorKeyCols,
		id, storage.Timestamp(s.now())))
	return k, wrap("revoke operator key", err)
}
