package postgres

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/rxgate/rxgate/storage"
)

// CreatePrescription implements storage.Store: the prescription, its
// event and the event's jobs in one transaction. The event's round depends
// on the organization's validation and the partner's endpoints, so the
// transaction holds share locks on the organization and the partner rows
// while it reads them: a validation, or an endpoint registered or deleted
// (which lock those rows for update), comes wholly before or wholly after
// the create. Row locks rather than a serializable transaction: under
// serializable isolation concurrent creates for one patient failed to
// serialize (predicate locks on shared index pages) until they ran out of
// retries.
func (s *Store) CreatePrescription(ctx context.Context, p *storage.Prescription) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	now := s.nowUTC() // the prescription's time and its event's
	if err := p.PrepareCreate(now); err != nil {
		return fmt.Errorf("storage: create prescription: %w", err)
	}
	var ev *storage.Event
	var jobs []storage.Job
	err := s.tx(ctx, readCommitted, func(tx pgx.Tx) error {
		var org storage.Organization
		err := tx.QueryRow(ctx, `SELECT o.id, o.partner_id, o.validated_at FROM organizations o
			WHERE o.id = $1 FOR SHARE`, p.OrgID).Scan(&org.ID, &org.PartnerID, &org.ValidatedAt)
		if err != nil {
			return fmt.Errorf("organization %w", mapErr(err))
		}
		if _, err := tx.Exec(ctx, `SELECT 1 FROM partners WHERE id = $1 FOR SHARE`, org.PartnerID); err != nil {
			return err
		}
		var ppid *string
		var u storage.User
		err = tx.QueryRow(ctx, `SELECT pt.partner_patient_id, u.id, u.title, u.given_name, u.family_name
			FROM patients pt JOIN users u ON u.org_id = pt.org_id AND u.id = pt.user_id
			WHERE pt.org_id = $1 AND pt.user_id = $2 AND pt.id = $3`, p.OrgID, p.UserID, p.PatientID).Scan(
			&ppid, &u.ID, &u.Title, &u.GivenName, &u.FamilyName)
		if err != nil {
			return fmt.Errorf("patient %w", mapErr(err))
		}
		p.Prescriber = u.Prescriber()
		var endpoints []string
		if org.Validated() {
			if endpoints, err = partnerEndpointIDs(ctx, tx, org.PartnerID); err != nil {
				return err
			}
		}
		partnerPatientID := ""
		if ppid != nil {
			partnerPatientID = *ppid
		}
		if ev, err = storage.NewPrescriptionCreated(p, partnerPatientID, &org, now); err != nil {
			return err
		}
		jobs = ev.StartRound(org.Validated(), endpoints, now)
		raw, err := s.record(p)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO prescriptions (org_id, user_id, patient_id, scid, position, created_at, record)
			VALUES ($1, $2, $3, $4, $5, $6, $7)`,
			p.OrgID, p.UserID, p.PatientID, p.SCID, string(storage.PrescriptionPosition(p.CreatedAt, p.SCID)), p.CreatedAt, raw)
		if err != nil {
			return err
		}
		return insertEvent(ctx, tx, ev, jobs)
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
	err = s.tx(ctx, readOnly, func(tx pgx.Tx) error {
		var err error
		if patient, err = scanPatient(tx.QueryRow(ctx, `SELECT `+patientCols+` FROM patients WHERE org_id = $1 AND user_id = $2 AND id = $3`, orgID, userID, patientID)); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT position, record FROM prescriptions
			WHERE org_id = $1 AND user_id = $2 AND patient_id = $3 AND position > $4 ORDER BY position LIMIT $5`,
			orgID, userID, patientID, string(after), req.Limit+1)
		if err != nil {
			return err
		}
		defer rows.Close()
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
	if err != nil {
		return nil, nil, storage.PageInfo{Limit: req.Limit}, wrap("list prescriptions", err)
	}
	return patient, append(out, ']'), info, nil
}
