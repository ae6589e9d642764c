package storage

import (
	"context"
	"fmt"

	"github.com/dgraph-io/badger/v4"
)

// CreatePatient stores p under its organization and user, assigning an id
// and times when unset. ErrNotFound means the user does not exist;
// ErrAlreadyExists means the id, or the partner_patient_id within the
// organization, is taken.
func (s *Store) CreatePatient(ctx context.Context, p *Patient) error {
	if p.ID == "" {
		p.ID = NewID()
	}
	if !validIDs(p.OrgID, p.UserID, p.ID) {
		return fmt.Errorf("storage: create patient: %w", ErrNotFound)
	}
	p.CreatedAt = s.nowUTC()
	p.UpdatedAt = p.CreatedAt
	err := s.update(ctx, func(txn *badger.Txn) error {
		if ok, err := exists(txn, userKey(p.OrgID, p.UserID)); err != nil {
			return err
		} else if !ok {
			return fmt.Errorf("user %w", ErrNotFound)
		}
		if ok, err := exists(txn, patientKey(p.OrgID, p.UserID, p.ID)); err != nil {
			return err
		} else if ok {
			return ErrAlreadyExists
		}
		if p.PartnerPatientID != "" {
			k := partnerPatientKey(p.OrgID, p.PartnerPatientID)
			if ok, err := exists(txn, k); err != nil {
				return err
			} else if ok {
				return fmt.Errorf("partner_patient_id %w", ErrAlreadyExists)
			}
			if err := txn.Set(k, []byte(p.UserID+"/"+p.ID)); err != nil {
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
func (s *Store) GetPatient(ctx context.Context, orgID, userID, patientID string) (*Patient, error) {
	if !validIDs(orgID, userID, patientID) {
		return nil, fmt.Errorf("storage: get patient: %w", ErrNotFound)
	}
	var r patientRecord
	err := s.view(ctx, func(txn *badger.Txn) error {
		return getRecord(txn, patientKey(orgID, userID, patientID), &r)
	})
	if err != nil {
		return nil, fmt.Errorf("storage: get patient: %w", err)
	}
	p := r.patient()
	return &p, nil
}

// UpdatePatient reads the patient, lets fn change it and writes the result,
// all in one transaction. fn may run more than once when a concurrent
// writer conflicts, each time on a fresh read; an error from fn aborts the
// update and is returned as it is. fn must not change the ids.
func (s *Store) UpdatePatient(ctx context.Context, orgID, userID, patientID string, fn func(*Patient) error) (*Patient, error) {
	if !validIDs(orgID, userID, patientID) {
		return nil, fmt.Errorf("storage: update patient: %w", ErrNotFound)
	}
	var p Patient
	key := patientKey(orgID, userID, patientID)
	err := s.update(ctx, func(txn *badger.Txn) error {
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
