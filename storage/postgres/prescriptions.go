package postgres

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/rxgate/rxgate/storage"
)

// CreatePrescription implements storage.Store: the prescription, its
// event and the event's jobs in one pipelined transaction of two round
// trips (three with an audit entry): BEGIN and the reads (the
// organization, the patient and user, the partner's endpoints); then the
// three INSERTs and COMMIT.
//
// The event depends on the organization's validation and the partner's
// endpoints, read before the writes; what orders the create against the
// writes that change them:
//
//   - The organization's row is read FOR KEY SHARE, the lock the event's
//     foreign key (events.org_id) takes on it anyway, so it costs nothing
//     the INSERT would not. ValidateOrganization locks the row FOR UPDATE,
//     which that lock excludes: a validation comes wholly before the
//     create (which then waits for it and reads the validated row) or
//     wholly after it (it waits for the create's commit).
//   - Endpoints are read in a statement after that lock is held, so with
//     a snapshot taken after it. CreateWebhookEndpoint and
//     DeleteWebhookEndpoint lock the partner's row and then every one of
//     its organizations' rows FOR UPDATE (lockPartnerCreates): they wait
//     for the creates in flight under any of them, and the creates that
//     start meanwhile wait for them and then read the endpoints as they
//     committed. An organization created meanwhile waits too (its foreign
//     key locks the partner's row).
//   - Nothing else a create reads changes under it: an organization never
//     changes partners, a secret rotation (SetOrganizationSecret,
//     SetPartnerSecret) changes no column the create reads and takes a
//     lock (FOR NO KEY UPDATE) that KEY SHARE does not exclude, so it
//     neither waits for creates nor they for it; an endpoint's secret
//     rotation changes its row, not the set of ids read. Disabling a user
//     is checked by the caller's authentication, before the create, as it
//     was with the share locks.
//
// So no create takes a lock on the partner's row, which would funnel
// every create of a hosting partner's organizations through one row
// (and its multixact), nor a share lock on the organization's row beyond
// the foreign key's. Row locks rather than a serializable transaction:
// under serializable isolation concurrent creates for one patient failed
// to serialize (predicate locks on shared index pages) until they ran
// out of retries.
func (s *Store) CreatePrescription(ctx context.Context, p *storage.Prescription) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	now := s.nowUTC() // the prescription's time and its event's
	if err := p.PrepareCreate(now); err != nil {
		return fmt.Errorf("storage: create prescription: %w", err)
	}
	var ev *storage.Event
	var jobs []storage.Job
	err := s.pipe(ctx, beginReadCommitted, func(ptx *pipeTx) error {
		var org storage.Organization
		var ppid *string
		var u storage.User
		var endpoints []string
		b := ptx.batch()
		b.Queue(`SELECT id, partner_id, validated_at FROM organizations WHERE id = $1 FOR KEY SHARE`, p.OrgID).QueryRow(func(row pgx.Row) error {
			if err := row.Scan(&org.ID, &org.PartnerID, &org.ValidatedAt); err != nil {
				return fmt.Errorf("organization %w", mapErr(err))
			}
			return nil
		})
		b.Queue(`SELECT pt.partner_patient_id, u.id, u.title, u.given_name, u.family_name
			FROM patients pt JOIN users u ON u.org_id = pt.org_id AND u.id = pt.user_id
			WHERE pt.org_id = $1 AND pt.user_id = $2 AND pt.id = $3`, p.OrgID, p.UserID, p.PatientID).QueryRow(func(row pgx.Row) error {
			if err := row.Scan(&ppid, &u.ID, &u.Title, &u.GivenName, &u.FamilyName); err != nil {
				return fmt.Errorf("patient %w", mapErr(err))
			}
			return nil
		})
		// A statement of its own: its snapshot is taken once the
		// organization's row is locked (see above).
		b.Queue(`SELECT w.id FROM webhook_endpoints w JOIN organizations o ON o.partner_id = w.partner_id
			WHERE o.id = $1 ORDER BY w.id`, p.OrgID).Query(func(rows pgx.Rows) error {
			var err error
			endpoints, err = pgx.CollectRows(rows, pgx.RowTo[string])
			return err
		})
		if err := ptx.send(ctx, b); err != nil {
			return err
		}
		p.Prescriber = u.Prescriber()
		if !org.Validated() {
			endpoints = nil
		}
		partnerPatientID := ""
		if ppid != nil {
			partnerPatientID = *ppid
		}
		var err error
		if ev, err = storage.NewPrescriptionCreated(p, partnerPatientID, &org, now); err != nil {
			return err
		}
		jobs = ev.StartRound(org.Validated(), endpoints, now)
		raw, err := s.record(p)
		if err != nil {
			return err
		}
		targets, attempts, err := eventLists(ev)
		if err != nil {
			return err
		}
		b = ptx.batch()
		b.Queue(`INSERT INTO prescriptions (org_id, user_id, patient_id, scid, position, created_at, record)
			VALUES ($1, $2, $3, $4, $5, $6, $7)`,
			p.OrgID, p.UserID, p.PatientID, p.SCID, string(storage.PrescriptionPosition(p.CreatedAt, p.SCID)), p.CreatedAt, raw)
		b.Queue(`INSERT INTO events (`+eventCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
			ev.ID, ev.Type, ev.OrganizationID, ev.PartnerID, ev.CreatedAt, ev.Payload, ev.Status, ev.SkipReason, ev.Round, targets, attempts)
		if len(jobs) > 0 {
			b.Queue(insertJobsSQL, jobArrays(jobs)...)
		}
		return ptx.commit(ctx, b)
	})
	if err != nil {
		return wrap("create prescription", err)
	}
	p.EventStatus = ev.Status
	if len(jobs) > 0 {
		s.queued()
	}
	return nil
}

// UpdatePrescription implements storage.Store.
func (s *Store) UpdatePrescription(ctx context.Context, orgID, userID, patientID, scid string, fn func(*storage.Prescription) error) (*storage.Prescription, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if !storage.ValidIDs(orgID, userID, patientID, scid) {
		return nil, fmt.Errorf("storage: update prescription: %w", storage.ErrNotFound)
	}
	var p storage.Prescription
	err := s.tx(ctx, readCommitted, func(tx pgx.Tx) error {
		var raw []byte
		err := tx.QueryRow(ctx, `SELECT created_at, record FROM prescriptions
			WHERE org_id = $1 AND scid = $2 AND user_id = $3 AND patient_id = $4 FOR UPDATE`, orgID, scid, userID, patientID).Scan(&p.CreatedAt, &raw)
		if err != nil {
			return err
		}
		created := utc(p.CreatedAt)
		p = storage.Prescription{}
		if err := json.Unmarshal(raw, &p); err != nil {
			return fmt.Errorf("storage: decode prescription: %w", err)
		}
		p.OrgID, p.UserID, p.PatientID, p.CreatedAt = orgID, userID, patientID, created
		if err := fn(&p); err != nil {
			return fnError{err}
		}
		p.OrgID, p.UserID, p.PatientID, p.CreatedAt = orgID, userID, patientID, created
		if raw, err = s.record(&p); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE prescriptions SET record = $3 WHERE org_id = $1 AND scid = $2`, orgID, scid, raw)
		return err
	})
	if err != nil {
		return nil, passThrough("update prescription", err)
	}
	return &p, nil
}

// ListPrescriptionsJSON implements storage.Store: the patient and one page
// of the stored objects, copied as stored, at one snapshot; keyset
// pagination on the position index.
func (s *Store) ListPrescriptionsJSON(ctx context.Context, orgID, userID, patientID string, req storage.PageRequest, dst []byte) (*storage.Patient, []byte, storage.PageInfo, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	info := storage.PageInfo{Limit: req.Limit}
	if !storage.ValidIDs(orgID, userID, patientID) {
		return nil, nil, info, fmt.Errorf("storage: list prescriptions: %w", storage.ErrNotFound)
	}
	first, after, err := s.cursors.StartPage(storage.PrescriptionList(orgID, userID, patientID), req)
	if err != nil {
		return nil, nil, info, fmt.Errorf("storage: list prescriptions: %w", err)
	}
	var patient *storage.Patient
	out := dst
	// One round trip: BEGIN, both reads at one snapshot, and COMMIT in a
	// batch.
	err = s.pipe(ctx, beginSnapshot, func(ptx *pipeTx) error {
		b := ptx.batch()
		b.Queue(`SELECT `+patientCols+` FROM patients WHERE org_id = $1 AND user_id = $2 AND id = $3`, orgID, userID, patientID).QueryRow(func(row pgx.Row) error {
			var err error
			patient, err = scanPatient(row)
			return err
		})
		b.Queue(`SELECT position, record FROM prescriptions
			WHERE org_id = $1 AND user_id = $2 AND patient_id = $3 AND position > $4 ORDER BY position LIMIT $5`,
			orgID, userID, patientID, string(after), req.Limit+1).Query(func(rows pgx.Rows) error {
			out = append(dst, '[')
			start, page := len(out), first
			var last []byte // the position of the page's last item
			for rows.Next() && page.Take() {
				var raw []byte
				if err := rows.Scan(&last, &raw); err != nil {
					return err
				}
				if len(out) > start {
					out = append(out, ',')
				}
				out = append(out, raw...)
			}
			if err := rows.Err(); err != nil {
				return err
			}
			info = page.Info(last)
			return nil
		})
		return ptx.commit(ctx, b)
	})
	if err != nil {
		return nil, nil, storage.PageInfo{Limit: req.Limit}, wrap("list prescriptions", err)
	}
	return patient, append(out, ']'), info, nil
}
