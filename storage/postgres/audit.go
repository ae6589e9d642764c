package postgres

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/rxgate/rxgate/storage"
)

var _ storage.AuditLog = (*Store)(nil)

const auditCols = `seq, at, actor_kind, partner_id, org_id, user_id, operator_name, operator_role,
	operation, patient_id, resource, request_id, outcome, prev_hash, hash`

// The chain's order. An entry appended with a change (storage.WithAudit:
// the change's transaction writes it, or neither commits) is not chained
// in that transaction: it is inserted unchained into audit_unsealed, a row
// of its own, and the change commits without touching the chain's head.
// Chaining it there would hold the head's row lock through the commit and
// its WAL flush, so every audited change, on every replica, would take
// turns on one row, one flush each. The sealer (seal) chains the committed
// rows later, many in one transaction:
//
//   - A seal locks the head (FOR UPDATE) first, then reads the unsealed
//     rows in a statement of its own, whose snapshot is taken once the lock
//     is held: it sees every row the seal before it deleted as gone, and
//     every row whose transaction committed by then. It chains them after
//     the head in id order, inserts them into audit_entries, deletes them
//     from audit_unsealed and moves the head, and commits. So each
//     committed entry is chained exactly once (the delete and the chained
//     insert commit together, under the head's lock), seq stays gap-free
//     and each entry's prev_hash is its predecessor's hash, however many
//     replicas seal; an entry whose change rolled back is never seen.
//   - Chain order follows commit order wherever commit order is defined:
//     if A's change committed before B's began, then A's row has the lower
//     id (taken when it was inserted) and is visible to any seal that sees
//     B's, so A is chained in the same seal, before B, or in an earlier
//     one. Changes that overlapped are chained in either order, as they
//     were when the head's lock decided.
//   - Whoever reads the chain (AuditHead, ListAudit, AppendAudit, so the
//     checkpoints, verify and the backup) seals first: every entry
//     committed before the read began is in the chain it reads. The audit
//     trail's flush (app.AuditTrail) reads the head every flush period,
//     which is what seals the entries of a process that reads nothing.
//
// What this gives up: between its commit and its seal (at most a flush
// period while a trail runs) an entry is a plain row that someone with
// write access to the database could change or delete without breaking
// the chain. The checkpoints never covered it either until the next one
// was signed, which is after a seal.

// sealBatch bounds the entries one seal chains: one transaction, one
// flush, for as many entries as came in a flush period on a busy server.
const sealBatch = 1000

// auditUnsealedCols are audit_unsealed's columns but its id, in the order
// insertUnsealedSQL takes them and sealReadSQL reads them.
const auditUnsealedCols = `at, actor_kind, partner_id, org_id, user_id, operator_name, operator_role,
	operation, patient_id, resource, request_id, outcome`

const insertUnsealedSQL = `INSERT INTO audit_unsealed (` + auditUnsealedCols + `)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`

// queueUnsealed queues e's insert into audit_unsealed on b: the entry a
// change appends, in the change's transaction.
func queueUnsealed(b *pgx.Batch, e *storage.AuditEntry) {
	b.Queue(insertUnsealedSQL, unsealedArgs(e)...)
}

func unsealedArgs(e *storage.AuditEntry) []any {
	return []any{storage.Timestamp(e.Time), e.ActorKind, e.PartnerID, e.OrgID, e.UserID, e.OperatorName, e.OperatorRole,
		e.Operation, e.PatientID, e.Resource, e.RequestID, e.Outcome}
}

// sealReadSQL locks nothing itself: it runs after auditHeadSQL in the
// seal's transaction, so its snapshot is taken with the head's lock held.
const sealReadSQL = `SELECT id, ` + auditUnsealedCols + ` FROM audit_unsealed ORDER BY id LIMIT $1`

// auditHeadSQL reads and locks the chain's head.
const auditHeadSQL = `SELECT seq, hash FROM audit_head WHERE id = 1 FOR UPDATE`

// sealTx chains, in the transaction p, after the head it locks: the
// committed unsealed entries (up to sealBatch), then entries, unless
// unsealed ones may be left (more), which come first. It returns the new
// head and commits p.
func sealTx(ctx context.Context, p *pipeTx, entries []storage.AuditEntry) (seq int64, hash []byte, more bool, err error) {
	var ids []int64
	var unsealed []storage.AuditEntry
	b := p.batch()
	b.Queue(auditHeadSQL).QueryRow(func(row pgx.Row) error { return row.Scan(&seq, &hash) })
	b.Queue(sealReadSQL, sealBatch).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var id int64
			var e storage.AuditEntry
			if err := rows.Scan(&id, &e.Time, &e.ActorKind, &e.PartnerID, &e.OrgID, &e.UserID, &e.OperatorName, &e.OperatorRole,
				&e.Operation, &e.PatientID, &e.Resource, &e.RequestID, &e.Outcome); err != nil {
				return err
			}
			e.Time = e.Time.UTC()
			ids, unsealed = append(ids, id), append(unsealed, e)
		}
		return rows.Err()
	})
	if err := p.send(ctx, b); err != nil {
		return 0, nil, false, err
	}
	if more = len(ids) == sealBatch; more {
		entries = nil
	}
	all := append(unsealed, entries...)
	b = p.batch()
	if len(all) > 0 {
		seq, hash = queueAudit(b, seq, hash, all)
	}
	if len(ids) > 0 {
		b.Queue(`DELETE FROM audit_unsealed WHERE id = ANY($1::bigint[])`, ids)
	}
	b.Queue(`COMMIT`)
	if err := p.send(ctx, b); err != nil {
		return 0, nil, false, err
	}
	p.open = false
	copy(entries, all[len(unsealed):])
	return seq, hash, more, nil
}

// seal chains every entry committed unsealed before it was called (see
// above), then entries, which it sets as AppendAudit says, and returns
// the chain's head.
func (s *Store) seal(ctx context.Context, entries []storage.AuditEntry) (seq int64, hash []byte, err error) {
	// The seal is no change of the caller's: a pending entry in ctx is
	// not its to append.
	ctx = storage.WithAudit(ctx, nil)
	for {
		out := slices.Clone(entries)
		more := false
		err = s.pipe(ctx, beginReadCommitted, func(p *pipeTx) error {
			copy(out, entries)
			var err error
			seq, hash, more, err = sealTx(ctx, p, out)
			return err
		})
		if err != nil {
			return 0, nil, err
		}
		if !more {
			copy(entries, out)
			return seq, hash, nil
		}
	}
}

// queueAudit queues on b the writes that chain entries after the head
// (seq, hash), read with auditHeadSQL in the same transaction, and
// returns the new head.
func queueAudit(b *pgx.Batch, seq int64, hash []byte, entries []storage.AuditEntry) (int64, []byte) {
	head := uint64(seq)
	n := len(entries)
	seqs, ats, prevs, hashes, outcomes := make([]int64, n), make([]time.Time, n), make([][]byte, n), make([][]byte, n), make([]int32, n)
	kinds, partners, orgs, users, ops, roles, opers, patients, resources, requests :=
		make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n),
		make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	for i := range entries {
		e := &entries[i]
		head, hash = storage.ChainAudit(head, hash, e)
		seqs[i], ats[i], prevs[i], hashes[i], outcomes[i] = int64(e.Seq), e.Time, e.PrevHash, e.Hash, int32(e.Outcome)
		kinds[i], partners[i], orgs[i], users[i], ops[i], roles[i] = e.ActorKind, e.PartnerID, e.OrgID, e.UserID, e.OperatorName, e.OperatorRole
		opers[i], patients[i], resources[i], requests[i] = e.Operation, e.PatientID, e.Resource, e.RequestID
	}
	// One statement for the batch, set-based.
	b.Queue(`INSERT INTO audit_entries (`+auditCols+`)
		SELECT * FROM unnest($1::bigint[], $2::timestamptz[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
			$9::text[], $10::text[], $11::text[], $12::text[], $13::integer[], $14::bytea[], $15::bytea[])`,
		seqs, ats, kinds, partners, orgs, users, ops, roles, opers, patients, resources, requests, outcomes, prevs, hashes)
	b.Queue(`UPDATE audit_head SET seq = $1, hash = $2 WHERE id = 1`, int64(head), hash)
	return int64(head), hash
}

// withAudit wraps a write transaction's fn so that it appends ctx's
// pending audit entry, unsealed, after fn's writes, in fn's transaction.
func withAudit(ctx context.Context, opts pgx.TxOptions, fn func(pgx.Tx) error) (func(pgx.Tx) error, *storage.AuditPending) {
	p := storage.PendingAudit(ctx)
	if p == nil || opts.AccessMode == pgx.ReadOnly {
		return fn, nil
	}
	return func(tx pgx.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, insertUnsealedSQL, unsealedArgs(&p.Entry)...)
		return err
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

// AppendAudit implements storage.AuditLog: the entries are chained at
// once, after the unsealed entries committed before them (seal), in one
// transaction.
func (s *Store) AppendAudit(ctx context.Context, entries []storage.AuditEntry) error {
	if len(entries) == 0 {
		return nil
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if _, _, err := s.seal(ctx, entries); err != nil {
		return wrap("append audit", err)
	}
	return nil
}

// AuditHead implements storage.AuditLog: the head once every entry
// committed before the call is chained (seal).
func (s *Store) AuditHead(ctx context.Context) (uint64, []byte, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	seq, hash, err := s.seal(ctx, nil)
	if err != nil {
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
	// Every entry committed before the listing is chained and listed.
	if _, _, err := s.seal(ctx, nil); err != nil {
		return nil, info, wrap("list audit", err)
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
