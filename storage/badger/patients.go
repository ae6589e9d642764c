package badger

import (
	"context"
	"fmt"

	"github.com/rxgate/rxgate/storage"
)

// CreatePatient stores p under its user (storage.Store); an index key keeps
// the partner_patient_id unique in the organization.
func (s *Store) CreatePatient(ctx context.Context, p *storage.Patient) error {
	if err := p.PrepareCreate(s.now()); err != nil {
		return fmt.Errorf("storage: create patient: %w", err)
	}
	err := s.update(ctx, func(txn *tx) error {
		if ok, err := exists(txn, userKey(p.OrgID, p.UserID)); err != nil {
			return err
		} else if !ok {
			return fmt.Errorf("user %w", storage.ErrNotFound)
		}
		if ok, err := exists(txn, patientKey(p.OrgID, p.UserID, p.ID)); err != nil {
			return err
		} else if ok {
			return storage.ErrAlreadyExists
		}
		if p.PartnerPatientID != "" {
			k := partnerPatientKey(p.OrgID, p.PartnerPatientID)
			if ok, err := exists(txn, k); err != nil {
				return err
			} else if ok {
				return fmt.Errorf("partner_patient_id %w", storage.ErrAlreadyExists)
			}
			if err := txn.set(k, []byte(p.UserID+"/"+p.ID)); err != nil {
				return err
			}
		}
		return putRecord(txn, patientKey(p.OrgID, p.UserID, p.ID), fromPatient(p))
	})
	if err != nil {
		return fmt.Errorf("storage: create patient: %w", err)
	}
	return nil
}

// GetPatient returns the patient of the organization's user.
func (s *Store) GetPatient(ctx context.Context, orgID, userID, patientID string) (*storage.Patient, error) {
	if !storage.ValidIDs(orgID, userID, patientID) {
		return nil, fmt.Errorf("storage: get patient: %w", storage.ErrNotFound)
	}
	var r patientRecord
	err := s.view(ctx, func(txn *tx) error {
		return getRecord(txn, patientKey(orgID, userID, patientID), &r)
	})
	if err != nil {
		return nil, fmt.Errorf("storage: get patient: %w", err)
	}
	p := r.patient()
	return &p, nil
}

// UpdatePatient reads the patient, lets fn change it and writes the result,
// all in one transaction, retried on a conflict (storage.Store).
func (s *Store) UpdatePatient(ctx context.Context, orgID, userID, patientID string, fn func(*storage.Patient) error) (*storage.Patient, error) {
	if !storage.ValidIDs(orgID, userID, patientID) {
		return nil, fmt.Errorf("storage: update patient: %w", storage.ErrNotFound)
	}
	var p storage.Patient
	key := patientKey(orgID, userID, patientID)
	err := s.update(ctx, func(txn *tx) error {
		var r patientRecord
		if err := getRecord(txn, key, &r); err != nil {
			return err
		}
		p = r.patient()
		if err := fn(&p); err != nil {
			return err
		}
		// The updater may not move the patient or change what is indexed.
		p.OrgID, p.UserID, p.ID, p.PartnerPatientID, p.CreatedAt = r.OrgID, r.UserID, r.ID, r.PartnerPatientID, r.CreatedAt
		p.UpdatedAt = s.nowUTC()
		return putRecord(txn, key, fromPatient(&p))
	})
	if err != nil {
		return nil, fmt.Errorf("storage: update patient: %w", err)
	}
	return &p, nil
}
