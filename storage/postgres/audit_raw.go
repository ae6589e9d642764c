package postgres

import (
	"context"
)

// SetRawAuditTime sets the stored time of the audit entry seq to at, a
// PostgreSQL timestamptz literal ('infinity' among them), below the chain
// meant to notice. It exists for end-to-end tests of the audit trail, as
// the embedded store's SetRawAuditValue does: it changes the trail the
// way someone with the database could.
func (s *Store) SetRawAuditTime(ctx context.Context, seq uint64, at string) error {
	_, err := s.pool.Exec(ctx, `UPDATE audit_entries SET at = $2::timestamptz WHERE seq = $1`, int64(seq), at)
	return wrap("set raw audit time", err)
}
