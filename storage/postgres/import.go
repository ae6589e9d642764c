package postgres

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/rxgate/rxgate/storage"
)

var _ storage.Importer = (*Store)(nil)

// ErrNotEmpty: an import into a database that holds data already.
var ErrNotEmpty = errors.New("storage: postgres: the database holds data already; import into an empty one")

// importBatch is how many rows are sent to the server at once.
const importBatch = 500

// Import implements storage.Importer: every record in one transaction, so
// a failed import leaves the database empty. Records are written as they
// are, with their ids, times, secret hashes and stored bytes; jobs arrive
// pending.
func (s *Store) Import(ctx context.Context, records iter.Seq2[storage.Record, error]) (int, error) {
	n := 0
	err := pgx.BeginTxFunc(ctx, s.pool, readCommitted, func(tx pgx.Tx) error {
		var any bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM partners) OR EXISTS (SELECT 1 FROM organizations)
			OR EXISTS (SELECT 1 FROM audit_entries) OR EXISTS (SELECT 1 FROM audit_unsealed)`).Scan(&any); err != nil {
			return err
		}
		if any {
			return ErrNotEmpty
		}
		// The cursor key and the signing key are the copy's: the ones this
		// store made when it was opened give way.
		if _, err := tx.Exec(ctx, `DELETE FROM meta`); err != nil {
			return err
		}
		b := &pgx.Batch{}
		// The import is as long as the data: no bound on the whole, but
		// each batch is under the call's.
		flush := func() error {
			if b.Len() == 0 {
				return nil
			}
			bctx, cancel := s.bound(ctx)
			defer cancel()
			err := tx.SendBatch(bctx, b).Close()
			b = &pgx.Batch{}
			return err
		}
		for r, err := range records {
			if err != nil {
				return err
			}
			if err := queueRecord(b, r, s.maxRecord); err != nil {
				return err
			}
			n++
			if b.Len() >= importBatch {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		return flush()
	})
	if err != nil {
		if errors.Is(err, ErrNotEmpty) {
			return 0, err
		}
		return 0, fmt.Errorf("storage: postgres: import (nothing was written): %w", mapErr(err))
	}
	return n, nil
}

// queueRecord adds the insert of one record to b.
func queueRecord(b *pgx.Batch, r storage.Record, limit int) error {
	switch {
	case r.Meta != nil:
		b.Queue(`INSERT INTO meta (name, value) VALUES ($1, $2)`, r.Meta.Name, r.Meta.Value)
	case r.Partner != nil:
		p := r.Partner
		b.Queue(`INSERT INTO partners (`+partnerCols+`) VALUES ($1, $2, $3, $4)`, p.ID, p.Name, p.SecretHash, p.CreatedAt)
	case r.Organization != nil:
		o := r.Organization
		b.Queue(`INSERT INTO organizations (`+organizationCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
			o.ID, o.PartnerID, o.Name, o.AllowedScopes, o.SecretHash, o.ValidatedAt, o.CreatedAt)
	case r.User != nil:
		u := r.User
		b.Queue(`INSERT INTO users (org_id, id, email, email_key, given_name, family_name, title, role, disabled, disabled_at, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
			u.OrgID, u.ID, u.Email, strings.ToLower(u.Email), u.GivenName, u.FamilyName, u.Title, u.Role, u.Disabled, nullTime(u.DisabledAt), u.CreatedAt, u.UpdatedAt)
	case r.Patient != nil:
		p := r.Patient
		raw, err := record(patientRecord{PatientFields: p.PatientFields, Verifications: p.Verifications}, limit)
		if err != nil {
			return err
		}
		b.Queue(`INSERT INTO patients (`+patientCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
			p.OrgID, p.UserID, p.ID, nullString(p.PartnerPatientID), raw, p.CreatedAt, p.UpdatedAt)
	case r.Prescription != nil:
		p := r.Prescription
		b.Queue(`INSERT INTO prescriptions (org_id, user_id, patient_id, scid, position, created_at, record) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
			p.OrgID, p.UserID, p.PatientID, p.SCID, string(storage.PrescriptionPosition(p.CreatedAt, p.SCID)), storage.Timestamp(p.CreatedAt), p.JSON)
	case r.CustomDrug != nil:
		d := r.CustomDrug
		b.Queue(`INSERT INTO custom_drugs (org_id, user_id, id, record) VALUES ($1, $2, $3, $4)`, d.OrgID, d.UserID, d.ID, d.JSON)
	case r.Endpoint != nil:
		e := r.Endpoint
		b.Queue(`INSERT INTO webhook_endpoints (`+endpointCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
			e.ID, e.PartnerID, e.URL, e.Secret, e.PreviousSecret, nullTime(e.PreviousUntil), e.CreatedAt, e.RotatedAt, e.Scheme(),
			e.FailingSince, e.DisabledAt, e.DisabledReason)
	case r.Event != nil:
		e := r.Event
		targets, attempts, err := eventLists(e)
		if err != nil {
			return err
		}
		b.Queue(`INSERT INTO events (`+eventCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
			e.ID, e.Type, orgParam(e.OrganizationID), e.PartnerID, e.CreatedAt, e.Payload, e.Status, e.SkipReason, e.Round, targets, attempts)
	case r.Job != nil:
		j := r.Job
		b.Queue(insertJobsSQL, jobArrays([]storage.Job{*j})...)
	case r.OperatorKey != nil:
		k := r.OperatorKey
		b.Queue(`INSERT INTO operator_keys (`+operatorKeyCols+`) VALUES ($1, $2, $3, $4, $5, $6)`,
			k.ID, k.Name, k.Role, k.SecretHash, k.CreatedAt, k.RevokedAt)
	case r.AuditEntry != nil:
		e := r.AuditEntry
		b.Queue(`INSERT INTO audit_entries (`+auditCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)`,
			int64(e.Seq), e.Time, e.ActorKind, e.PartnerID, e.OrgID, e.UserID, e.OperatorName, e.OperatorRole,
			e.Operation, e.PatientID, e.Resource, e.RequestID, e.Outcome, nonNil(e.PrevHash), e.Hash)
	case r.AuditCheckpoint != nil:
		c := r.AuditCheckpoint
		b.Queue(`INSERT INTO audit_checkpoints (seq, hash, at, start, signature) VALUES ($1, $2, $3, $4, $5)`,
			int64(c.Seq), nonNil(c.Hash), c.Time, c.Start, c.Signature)
	case r.AuditHead != nil:
		b.Queue(`UPDATE audit_head SET seq = $1, hash = $2 WHERE id = 1`, int64(r.AuditHead.Seq), nonNil(r.AuditHead.Hash))
	default:
		return errors.New("storage: postgres: import: an empty record")
	}
	return nil
}

// nonNil is b, or an empty slice for nil: a hash column is NOT NULL, and
// the first entry's previous hash is empty.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
