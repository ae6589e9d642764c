package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/rxgate/rxgate/storage"
)

var _ storage.AuditLog = (*Store)(nil)

const auditCols = `seq, at, actor_kind, partner_id, org_id, user_id, operator_name, operator_role,
	operation, patient_id, resource, request_id, outcome, prev_hash, hash`

// appendAudit chains entries after the head, which it locks until the
// transaction ends: concurrent appends, on this replica or another, wait
// for it, so the chain has one order.
func appendAudit(ctx context.Context, tx pgx.Tx, entries []storage.AuditEntry) error {
	var seq int64
	var hash []byte
	if err := tx.QueryRow(ctx, auditHeadSQL).Scan(&seq, &hash); err != nil {
		return err
	}
	b := &pgx.Batch{}
	queueAudit(b, seq, hash, entries)
	return tx.SendBatch(ctx, b).Close()
}

// auditHeadSQL reads and locks the chain's head (appendAudit).
const auditHeadSQL = `SELECT seq, hash FROM audit_head WHERE id = 1 FOR UPDATE`

// queueAudit queues on b the writes that chain entries after the head
// (seq, hash), read with auditHeadSQL in the same transaction.
func queueAudit(b *pgx.Batch, seq int64, hash []byte, entries []storage.AuditEntry) {
	head := uint64(seq)
	for i := range entries {
		e := &entries[i]
		head, hash = storage.ChainAudit(head, hash, e)
		b.Queue(`INSERT INTO audit_entries (`+auditCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)`,
			int64(e.Seq), e.Time, e.ActorKind, e.PartnerID, e.OrgID, e.UserID, e.OperatorName, e.OperatorRole,
			e.Operation, e.PatientID, e.Resource, e.RequestID, e.Outcome, e.PrevHash, e.Hash)
	}
	b.Queue(`UPDATE audit_head SET seq = $1, hash = $2 WHERE id = 1`, int64(head), hash)
}

// withAudit wraps a write transaction's fn so that it appends ctx's
// pending audit entry after fn's writes, in fn's transaction.
func withAudit(ctx context.Context, opts pgx.TxOptions, fn func(pgx.Tx) error) (func(pgx.Tx) error, *storage.AuditPending) {
	p := storage.PendingAudit(ctx)
	if p == nil || opts.AccessMode == pgx.ReadOnly {
		return fn, nil
	}
	return func(tx pgx.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		return appendAudit(ctx, tx, []storage.AuditEntry{p.Entry})
	}, p
}

// execAudited runs one statement, in a transaction with ctx's pending
// audit entry when there is one, and returns the rows it affected.
func (s *Store) execAudited(ctx context.Context, sql string, args ...any) (int64, error) {
	if storage.PendingAudit(ctx) == nil {
		tag, err := s.pool.Exec(ctx, sql, args...)
		return tag.RowsAffected(), err
	}
	var n int64
	err := s.tx(ctx, readCommitted, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, sql, args...)
		n = tag.RowsAffected()
		return err
	})
	return n, err
}

// AppendAudit implements storage.AuditLog.
func (s *Store) AppendAudit(ctx context.Context, entries []storage.AuditEntry) error {
	if len(entries) == 0 {
		return nil
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	out := make([]storage.AuditEntry, len(entries))
	err := s.tx(ctx, readCommitted, func(tx pgx.Tx) error {
		copy(out, entries)
		return appendAudit(ctx, tx, out)
	})
	if err != nil {
		return wrap("append audit", err)
	}
	copy(entries, out)
	return nil
}

// AuditHead implements storage.AuditLog.
func (s *Store) AuditHead(ctx context.Context) (uint64, []byte, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var seq int64
	var hash []byte
	if err := s.pool.QueryRow(ctx, `SELECT seq, hash FROM audit_head WHERE id = 1`).Scan(&seq, &hash); err != nil {
		return 0, nil, wrap("audit head", err)
	}
	if seq == 0 {
		hash = nil
	}
	return uint64(seq), hash, nil
}

// ListAudit implements storage.AuditLog: keyset pages on seq.
func (s *Store) ListAudit(ctx context.Context, f storage.AuditFilter, req storage.PageRequest) ([]storage.AuditEntry, storage.PageInfo, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	info := storage.PageInfo{Limit: req.Limit}
	page, after, err := s.cursors.StartPage(storage.List(f.Key()), req)
	if err != nil {
		return nil, info, fmt.Errorf("storage: list audit: %w", err)
	}
	var afterSeq int64
	if after != nil {
		if afterSeq, err = strconv.ParseInt(string(after), 10, 64); err != nil {
			return nil, info, fmt.Errorf("storage: list audit: %w", storage.ErrBadCursor)
		}
	}
	where, args := []string{"seq > $1"}, []any{afterSeq}
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	if f.PatientID != "" {
		add("patient_id = $%d", f.PatientID)
	}
	if f.UserID != "" {
		add("user_id = $%d", f.UserID)
	}
	if f.Operator != "" {
		add("operator_name = $%d", f.Operator)
	}
	if !f.From.IsZero() {
		add("at >= $%d", f.From)
	}
	if !f.To.IsZero() {
		add("at < $%d", f.To)
	}
	args = append(args, req.Limit+1)
	rows, err := s.pool.Query(ctx, `SELECT `+auditCols+` FROM audit_entries WHERE `+strings.Join(where, " AND ")+
		fmt.Sprintf(` ORDER BY seq LIMIT $%d`, len(args)), args...)
	if err != nil {
		return nil, info, wrap("list audit", err)
	}
	entries, err := collect(rows, scanAuditEntry)
	if err != nil {
		return nil, info, wrap("list audit", err)
	}
	entries, info = storage.PageOf(&page, entries, func(e *storage.AuditEntry) string { return strconv.FormatUint(e.Seq, 10) })
	return entries, info, nil
}

// scanAuditEntry reads a row. Every column is typed and NOT NULL, so the
// one value a row can hold that does not fit its Go field is a time of
// infinity or -infinity, which someone with the database can write: such
// a row is marked Corrupt, with its time zero and the rest as stored, as
// the embedded store lists a value that no longer decodes, rather than
// failing the whole listing.
func scanAuditEntry(row pgx.Row) (*storage.AuditEntry, error) {
	var e storage.AuditEntry
	var seq int64
	var at pgtype.Timestamptz
	err := row.Scan(&seq, &at, &e.ActorKind, &e.PartnerID, &e.OrgID, &e.UserID, &e.OperatorName, &e.OperatorRole,
		&e.Operation, &e.PatientID, &e.Resource, &e.RequestID, &e.Outcome, &e.PrevHash, &e.Hash)
	e.Seq = uint64(seq)
	if at.Valid && at.InfinityModifier == pgtype.Finite {
		e.Time = at.Time.UTC()
	} else {
		e.Corrupt = true
	}
	return &e, err
}

// AddAuditCheckpoint implements storage.AuditLog.
func (s *Store) AddAuditCheckpoint(ctx context.Context, c storage.AuditCheckpoint) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	_, err := s.pool.Exec(ctx, `INSERT INTO audit_checkpoints (seq, hash, at, start, signature) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (seq) DO UPDATE SET hash = $2, at = $3, start = $4, signature = $5`, int64(c.Seq), c.Hash, c.Time, c.Start, c.Signature)
	return wrap("add audit checkpoint", err)
}

// ListAuditCheckpoints implements storage.AuditLog.
func (s *Store) ListAuditCheckpoints(ctx context.Context) ([]storage.AuditCheckpoint, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT seq, hash, at, start, signature FROM audit_checkpoints ORDER BY seq`)
	if err != nil {
		return nil, wrap("list audit checkpoints", err)
	}
	out, err := collect(rows, func(row pgx.Row) (*storage.AuditCheckpoint, error) {
		var c storage.AuditCheckpoint
		var seq int64
		err := row.Scan(&seq, &c.Hash, &c.Time, &c.Start, &c.Signature)
		c.Seq, c.Time = uint64(seq), c.Time.UTC()
		return &c, err
	})
	return out, wrap("list audit checkpoints", err)
}

// PurgeAudit implements storage.AuditLog: the marker and the deletes in
// one transaction.
func (s *Store) PurgeAudit(ctx context.Context, before uint64, start storage.AuditCheckpoint) (int, error) {
	if before <= 1 {
		return 0, nil
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var n int64
	err := s.tx(ctx, readCommitted, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO audit_checkpoints (seq, hash, at, start, signature) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (seq) DO UPDATE SET hash = $2, at = $3, start = $4, signature = $5`,
			int64(start.Seq), start.Hash, start.Time, start.Start, start.Signature); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `DELETE FROM audit_entries WHERE seq < $1`, int64(before))
		if err != nil {
			return err
		}
		n = tag.RowsAffected()
		_, err = tx.Exec(ctx, `DELETE FROM audit_checkpoints WHERE seq < $1 AND seq <> $2`, int64(before), int64(start.Seq))
		return err
	})
	if err != nil {
		return 0, wrap("purge audit", err)
	}
	return int(n), nil
}
