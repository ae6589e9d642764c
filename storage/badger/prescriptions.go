package badger

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/rxgate/rxgate/storage"
)

// CreatePrescription stores p for its patient with its event and jobs in
// one transaction (storage.Store).
//
// The work is done outside the committer, which is one goroutine for every
// writer: a read transaction plans the create (reads the patient, user and
// organization through the record cache, the partner's endpoints, and
// encodes every record the create writes), and the write function only
// checks that nothing the plan read has changed since and writes the
// planned bytes. When something has changed, it plans again inside the
// write.
func (s *Store) CreatePrescription(ctx context.Context, p *storage.Prescription) error {
	now := s.nowUTC() // the prescription's time and its event's
	if err := p.PrepareCreate(now); err != nil {
		return fmt.Errorf("storage: create prescription: %w", err)
	}
	arrived := s.expectWrite()
	defer arrived()
	var planned *createPlan
	err := s.view(ctx, func(txn *tx) (err error) {
		planned, err = s.planCreate(txn, *p, now)
		return err
	})
	arrived()
	var done *createPlan
	if err == nil {
		err = s.update(ctx, func(txn *tx) error {
			plan := planned
			if ok, err := plan.holds(s, txn); err != nil {
				return err
			} else if !ok {
				if plan, err = s.planCreate(txn, *p, now); err != nil {
					return err
				}
			}
			done = plan
			return plan.write(txn)
		})
	}
	if err != nil {
		return fmt.Errorf("storage: create prescription: %w", err)
	}
	p.Prescriber, p.EventStatus = done.prescriber, done.eventStatus
	s.jobsQueued(done.jobs)
	return nil
}

// createPlan is a prescription create, read and encoded: what it read, at
// which versions, and what it writes.
type createPlan struct {
	read        []versioned // the records read, as read
	eventStatus string      // the event's status as written
	partner     string
	validated   bool     // the organization was validated: the event goes to endpoints
	endpoints   []string // the partner's endpoints, as read when validated (shared: read only)
	readTs      uint64   // the timestamp the plan read at
	scid        []byte   // the scid's key, absent when read
	prescriber  storage.Prescriber
	jobs        []storage.Job
	writes      []keyValue
}

type versioned struct {
	key     []byte
	version uint64
}

type keyValue struct{ key, value []byte }

// planCreate reads what creating p needs and encodes what it writes: the
// scid's key, the prescription, and its prescription.created event with
// the event's indexes and jobs (the event and its jobs commit with the
// prescription or not at all). now is the event's time.
func (s *Store) planCreate(txn *tx, p storage.Prescription, now time.Time) (*createPlan, error) {
	plan := &createPlan{scid: scidKey(p.OrgID, p.SCID), readTs: txn.txn.ReadTs()}
	readKey := func(key []byte, version uint64) {
		plan.read = append(plan.read, versioned{key: key, version: version})
	}
	pk, uk, ok := patientKey(p.OrgID, p.UserID, p.PatientID), userKey(p.OrgID, p.UserID), organizationKey(p.OrgID)
	patient, version, err := getVersioned[patientRecord](s, txn, pk)
	if err != nil {
		return nil, fmt.Errorf("patient %w", err)
	}
	readKey(pk, version)
	ur, version, err := getVersioned[userRecord](s, txn, uk)
	if err != nil {
		return nil, err
	}
	readKey(uk, version)
	or, version, err := getVersioned[organizationRecord](s, txn, ok)
	if err != nil {
		return nil, fmt.Errorf("organization %w", err)
	}
	readKey(ok, version)
	if taken, err := exists(txn, plan.scid); err != nil {
		return nil, err
	} else if taken {
		return nil, fmt.Errorf("scid %w", storage.ErrAlreadyExists)
	}
	u, org := ur.user(), or.organization()
	plan.prescriber = u.Prescriber()
	p.Prescriber = plan.prescriber
	plan.partner, plan.validated = org.PartnerID, org.Validated()
	if plan.validated {
		if plan.endpoints, err = s.endpointIDs(txn, org.PartnerID); err != nil {
			return nil, err
		}
	}
	ev, err := storage.NewPrescriptionCreated(&p, patient.PartnerPatientID, &org, now)
	if err != nil {
		return nil, err
	}
	plan.jobs = ev.StartRound(org.Validated(), plan.endpoints, now)
	plan.eventStatus = ev.Status

	rxKey := prescriptionKey(p.OrgID, p.UserID, p.PatientID, p.CreatedAt, p.SCID)
	add := func(key []byte, v any) error {
		b := []byte(nil)
		if v != nil {
			var err error
			if b, err = encode(v); err != nil {
				return err
			}
			if len(b) > txn.maxRecord {
				return storage.ErrTooLarge
			}
		}
		plan.writes = append(plan.writes, keyValue{key: key, value: b})
		return nil
	}
	if err := add(rxKey, &p); err != nil {
		return nil, err
	}
	plan.writes = append(plan.writes, keyValue{key: plan.scid, value: rxKey})
	if err := add(eventKey(ev.ID), fromEvent(ev)); err != nil {
		return nil, err
	}
	payload := payloadValue(ev.Payload)
	if len(payload) > txn.maxRecord { // bounded as a record is: see valueThreshold
		return nil, storage.ErrTooLarge
	}
	plan.writes = append(plan.writes, keyValue{key: eventPayloadKey(ev.ID), value: payload})
	for _, k := range eventIndexKeys(ev.PartnerID, ev.OrganizationID, ev.Status, ev.ID) {
		plan.writes = append(plan.writes, keyValue{key: k})
	}
	for i := range plan.jobs {
		j := &plan.jobs[i]
		if err := add(jobPendingKey(j.EndpointID, j.Due, j.ID), fromJob(j)); err != nil {
			return nil, err
		}
	}
	return plan, nil
}

// holds reports whether what the plan read is still so in txn. The
// records it read are read again only when a patient, a user or an
// organization may have changed since.
func (plan *createPlan) holds(s *Store, txn *tx) (bool, error) {
	if s.changedSince(txn, plan.readTs, markPlan) {
		for _, r := range plan.read {
			version, ok, err := txn.version(r.key)
			if err != nil || !ok || version != r.version {
				return false, err
			}
		}
	}
	if taken, err := exists(txn, plan.scid); err != nil || taken {
		return false, err
	}
	if plan.validated && s.changedSince(txn, plan.readTs, markHooks) {
		ids, err := partnerEndpointIDs(txn, plan.partner)
		if err != nil || !slices.Equal(ids, plan.endpoints) {
			return false, err
		}
	}
	return true, nil
}

// write writes the planned records.
func (plan *createPlan) write(txn *tx) error {
	for _, w := range plan.writes {
		if err := txn.set(w.key, w.value); err != nil {
			return err
		}
	}
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
		if pr, _, err = getCached[patientRecord](s, txn, patientKey(orgID, userID, patientID)); err != nil {
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

// getVersioned reads the record at key and its version: through the record
// cache in a read-only tx, from the transaction in a write one.
func getVersioned[T any](s *Store, txn *tx, key []byte) (T, uint64, error) {
	if txn.pending == nil {
		return getCached[T](s, txn, key)
	}
	var v T
	if err := getRecord(txn, key, &v); err != nil {
		return v, 0, err
	}
	version, _, err := txn.version(key)
	return v, version, err
}
