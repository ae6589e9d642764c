package badger

import (
	"context"
	"fmt"
	"time"

	"github.com/rxgate/rxgate/storage"
)

// CreatePrescription stores p for its patient with its event and jobs in
// one transaction (storage.Store).
func (s *Store) CreatePrescription(ctx context.Context, p *storage.Prescription) error {
	p.PrepareCreate(s.nowUTC())
	if !storage.ValidIDs(p.OrgID, p.UserID, p.PatientID, p.SCID) {
		return fmt.Errorf("storage: create prescription: %w", storage.ErrNotFound)
	}
	var queued []storage.Job
	err := s.update(ctx, func(txn *tx) error {
		var patient patientRecord
		if err := getRecord(txn, patientKey(p.OrgID, p.UserID, p.PatientID), &patient); err != nil {
			return fmt.Errorf("patient %w", err)
		}
		var ur userRecord
		if err := getRecord(txn, userKey(p.OrgID, p.UserID), &ur); err != nil {
			return err
		}
		u := ur.user()
		p.Prescriber = u.Prescriber()
		if ok, err := exists(txn, scidKey(p.OrgID, p.SCID)); err != nil {
			return err
		} else if ok {
			return fmt.Errorf("scid %w", storage.ErrAlreadyExists)
		}
		key := prescriptionKey(p.OrgID, p.UserID, p.PatientID, p.CreatedAt, p.SCID)
		if err := txn.set(scidKey(p.OrgID, p.SCID), key); err != nil {
			return err
		}
		// The event and its delivery jobs commit with the prescription or
		// not at all.
		var err error
		if queued, err = s.emitPrescriptionCreated(txn, p, &patient); err != nil {
			return err
		}
		return putRecord(txn, key, p)
	})
	if err != nil {
		return fmt.Errorf("storage: create prescription: %w", err)
	}
	s.jobsQueued(queued)
	return nil
}

// UpdatePrescription reads the patient's prescription with scid, lets fn
// change it and writes it back in one transaction (storage.Store).
func (s *Store) UpdatePrescription(ctx context.Context, orgID, userID, patientID, scid string, fn func(*storage.Prescription) error) (*storage.Prescription, error) {
	if !storage.ValidIDs(orgID, userID, patientID, scid) {
		return nil, fmt.Errorf("storage: update prescription: %w", storage.ErrNotFound)
	}
	var p storage.Prescription
	err := s.update(ctx, func(txn *tx) error {
		key, err := getRaw(txn, scidKey(orgID, scid))
		if err != nil {
			return err
		}
		prefix := prescriptionsPrefix(orgID, userID, patientID)
		if len(key) <= len(prefix) || string(key[:len(prefix)]) != string(prefix) {
			return storage.ErrNotFound // the scid belongs to another patient
		}
		p = storage.Prescription{OrgID: orgID, UserID: userID, PatientID: patientID, CreatedAt: createdFromKey(key, prefix)}
		if err := getRecord(txn, key, &p); err != nil {
			return err
		}
		if err := fn(&p); err != nil {
			return err
		}
		p.OrgID, p.UserID, p.PatientID = orgID, userID, patientID
		p.CreatedAt = createdFromKey(key, prefix)
		return putRecord(txn, key, &p)
	})
	if err != nil {
		return nil, fmt.Errorf("storage: update prescription: %w", err)
	}
	return &p, nil
}

// ListPrescriptionsJSON returns the patient and one page of its
// prescriptions as the stored JSON objects, copied without decoding or
// re-encoding them (storage.Store).
func (s *Store) ListPrescriptionsJSON(ctx context.Context, orgID, userID, patientID string, req storage.PageRequest, dst []byte) (*storage.Patient, []byte, storage.PageInfo, error) {
	info := storage.PageInfo{Limit: req.Limit}
	if !storage.ValidIDs(orgID, userID, patientID) {
		return nil, nil, info, fmt.Errorf("storage: list prescriptions: %w", storage.ErrNotFound)
	}
	var pr patientRecord
	out := append(dst, '[')
	start := len(out)
	list := storage.PrescriptionList(orgID, userID, patientID)
	err := s.view(ctx, func(txn *tx) (err error) {
		if pr, err = getCached[patientRecord](s, txn, patientKey(orgID, userID, patientID)); err != nil {
			return err
		}
		info, err = s.listPage(txn, list, prescriptionsPrefix(orgID, userID, patientID), req, func(_, v []byte) error {
			if len(v) < 2 || v[0] != recordV1 {
				return fmt.Errorf("storage: decode prescription: unknown record version")
			}
			if len(out) > start {
				out = append(out, ',')
			}
			out = append(out, v[1:]...)
			return nil
		})
		return err
	})
	if err != nil {
		return nil, nil, info, fmt.Errorf("storage: list prescriptions: %w", err)
	}
	out = append(out, ']')
	patient := pr.patient()
	return &patient, out, info, nil
}

// createdFromKey recovers the creation time encoded in a prescription key.
func createdFromKey(key, prefix []byte) time.Time {
	created, _, _ := storage.ParsePrescriptionPosition(key[len(prefix):])
	return created
}
