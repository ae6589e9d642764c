package storage

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// createdDateLayout is how created_date is written: ISO 8601 in UTC with
// millisecond precision and a Z suffix (the spec notes that some hosted
// responses omit the zone; rxgate always states it).
const createdDateLayout = "2006-01-02T15:04:05.000Z"

// scidAlphabet is Crockford's base32: no I, L, O or U to misread.
const scidAlphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// NewSCID returns a new 18-character prescription identifier.
func NewSCID() string {
	b := randomBytes(18)
	for i := range b {
		b[i] = scidAlphabet[int(b[i])%len(scidAlphabet)]
	}
	return string(b)
}

// CreatePrescription stores p for its patient. The store assigns the scid
// (unless set), the creation time (unless set: seeding and imports
// back-date prescriptions) and created_date, status Active, and the
// prescriber from the patient's user; ErrNotFound means the patient does
// not exist. The prescription.created event is written in the same
// transaction (see emitPrescriptionCreated).
func (s *Store) CreatePrescription(ctx context.Context, p *Prescription) error {
	if p.SCID == "" {
		p.SCID = NewSCID()
	}
	if !validIDs(p.OrgID, p.UserID, p.PatientID, p.SCID) {
		return fmt.Errorf("storage: create prescription: %w", ErrNotFound)
	}
	if p.CreatedAt.IsZero() {
		p.CreatedAt = s.nowUTC()
	}
	p.CreatedAt = p.CreatedAt.UTC().Truncate(time.Microsecond)
	p.CreatedDate = p.CreatedAt.Format(createdDateLayout)
	p.Status = StatusActive
	p.Error = nil
	if p.PrescriptionType == "" {
		p.PrescriptionType = "ELECTRONIC"
	}
	err := s.update(ctx, func(txn *badger.Txn) error {
		var patient patientRecord
		if err := getRecord(txn, patientKey(p.OrgID, p.UserID, p.PatientID), &patient); err != nil {
			return fmt.Errorf("patient %w", err)
		}
		var u userRecord
		if err := getRecord(txn, userKey(p.OrgID, p.UserID), &u); err != nil {
			return err
		}
		p.Prescriber = Prescriber{Title: u.Title, GivenName: u.GivenName, FamilyName: u.FamilyName, UserID: u.ID}
		if ok, err := exists(txn, scidKey(p.OrgID, p.SCID)); err != nil {
			return err
		} else if ok {
			return fmt.Errorf("scid %w", ErrAlreadyExists)
		}
		key := prescriptionKey(p.OrgID, p.UserID, p.PatientID, p.CreatedAt, p.SCID)
		if err := txn.Set(scidKey(p.OrgID, p.SCID), key); err != nil {
			return err
		}
		// The event and its delivery jobs commit with the prescription or
		// not at all (events.go).
		if err := s.emitPrescriptionCreated(txn, p, &patient); err != nil {
			return err
		}
		return putRecord(txn, key, p)
	})
	if err != nil {
		return fmt.Errorf("storage: create prescription: %w", err)
	}
	return nil
}

// UpdatePrescription reads the patient's prescription with scid, lets fn
// change it and writes it back in one transaction (fn may run again on a
// conflict). fn must not change ids or the creation time.
func (s *Store) UpdatePrescription(ctx context.Context, orgID, userID, patientID, scid string, fn func(*Prescription) error) (*Prescription, error) {
	if !validIDs(orgID, userID, patientID, scid) {
		return nil, fmt.Errorf("storage: update prescription: %w", ErrNotFound)
	}
	var p Prescription
	err := s.update(ctx, func(txn *badger.Txn) error {
		key, err := getRaw(txn, scidKey(orgID, scid))
		if err != nil {
			return err
		}
		prefix := prescriptionsPrefix(orgID, userID, patientID)
		if len(key) <= len(prefix) || string(key[:len(prefix)]) != string(prefix) {
			return ErrNotFound // the scid belongs to another patient
		}
		p = Prescription{OrgID: orgID, UserID: userID, PatientID: patientID, CreatedAt: createdFromKey(key, prefix)}
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

// ListPrescriptions returns the patient and one page of its prescriptions,
// newest first, read in one transaction. ErrNotFound means the patient does
// not exist; ErrBadCursor a lastKey not issued for this patient's list.
func (s *Store) ListPrescriptions(ctx context.Context, orgID, userID, patientID string, req PageRequest) (*Patient, []Prescription, PageInfo, error) {
	info := PageInfo{Limit: req.Limit}
	if !validIDs(orgID, userID, patientID) {
		return nil, nil, info, fmt.Errorf("storage: list prescriptions: %w", ErrNotFound)
	}
	var pr patientRecord
	out := make([]Prescription, 0, req.Limit)
	prefix := prescriptionsPrefix(orgID, userID, patientID)
	err := s.view(ctx, func(txn *badger.Txn) (err error) {
		if err := getRecord(txn, patientKey(orgID, userID, patientID), &pr); err != nil {
			return err
		}
		info, err = s.listPage(txn, prefix, req, func(k, v []byte) error {
			var p Prescription
			if err := decode(v, &p); err != nil {
				return err
			}
			p.OrgID, p.UserID, p.PatientID = orgID, userID, patientID
			p.CreatedAt = createdFromKey(k, prefix)
			out = append(out, p)
			return nil
		})
		return err
	})
	if err != nil {
		return nil, nil, info, fmt.Errorf("storage: list prescriptions: %w", err)
	}
	patient := pr.patient()
	return &patient, out, info, nil
}

// ListPrescriptionsJSON is ListPrescriptions for serving: it appends the
// page to dst as one JSON array of the stored prescription objects (spec
// 2.5 shape), copied without decoding or re-encoding them.
func (s *Store) ListPrescriptionsJSON(ctx context.Context, orgID, userID, patientID string, req PageRequest, dst []byte) (*Patient, []byte, PageInfo, error) {
	info := PageInfo{Limit: req.Limit}
	if !validIDs(orgID, userID, patientID) {
		return nil, nil, info, fmt.Errorf("storage: list prescriptions: %w", ErrNotFound)
	}
	var pr patientRecord
	out := append(dst, '[')
	start := len(out)
	err := s.view(ctx, func(txn *badger.Txn) (err error) {
		if pr, err = getCached[patientRecord](s, txn, patientKey(orgID, userID, patientID)); err != nil {
			return err
		}
		info, err = s.listPage(txn, prescriptionsPrefix(orgID, userID, patientID), req, func(_, v []byte) error {
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
	var inv [8]byte
	if _, err := hex.Decode(inv[:], key[len(prefix):len(prefix)+16]); err != nil {
		return time.Time{}
	}
	return time.Unix(0, int64(^binary.BigEndian.Uint64(inv[:]))).UTC()
}
