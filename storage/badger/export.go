package badger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"

	"github.com/rxgate/rxgate/storage"
)

var _ storage.Exporter = (*Store)(nil)

// Export implements storage.Exporter: every record, parents first, read in
// one transaction.
func (s *Store) Export(ctx context.Context) iter.Seq2[storage.Record, error] {
	return func(yield func(storage.Record, error) bool) {
		stopped := false
		emit := func(r storage.Record) error {
			if !yield(r, nil) {
				stopped = true
				return errStopExport
			}
			return ctx.Err()
		}
		err := s.view(ctx, func(txn *tx) error {
			return exportAll(s, txn, emit)
		})
		if err != nil && !stopped {
			yield(storage.Record{}, fmt.Errorf("storage: export: %w", err))
		}
	}
}

var errStopExport = fmt.Errorf("export stopped")

func exportAll(s *Store, txn *tx, emit func(storage.Record) error) error {
	each := func(prefix string, fn func(key, v []byte) error) error {
		return s.scan(txn, []byte(prefix), fn)
	}
	steps := []struct {
		prefix string
		fn     func(key, v []byte) error
	}{
		{prefixMeta, func(k, v []byte) error {
			name := string(k[len(prefixMeta):])
			if name == metaFormat {
				return nil // this backend's own on-disk format
			}
			return emit(storage.Record{Meta: &storage.MetaEntry{Name: name, Value: bytes.Clone(v)}})
		}},
		{prefixPartner, func(_, v []byte) error {
			var r partnerRecord
			if err := decode(v, &r); err != nil {
				return err
			}
			p := r.partner()
			return emit(storage.Record{Partner: &p})
		}},
		{prefixOrganization, func(_, v []byte) error {
			var r organizationRecord
			if err := decode(v, &r); err != nil {
				return err
			}
			o := r.organization()
			return emit(storage.Record{Organization: &o})
		}},
		{prefixUser, func(_, v []byte) error {
			var r userRecord
			if err := decode(v, &r); err != nil {
				return err
			}
			u := r.user()
			return emit(storage.Record{User: &u})
		}},
		{prefixPatient, func(_, v []byte) error {
			var r patientRecord
			if err := decode(v, &r); err != nil {
				return err
			}
			p := r.patient()
			return emit(storage.Record{Patient: &p})
		}},
		{prefixPrescription, func(k, v []byte) error {
			parts := strings.SplitN(string(k[len(prefixPrescription):]), "/", 4)
			if len(parts) != 4 {
				return fmt.Errorf("a prescription key of %d parts", len(parts))
			}
			created, scid, ok := storage.ParsePrescriptionPosition([]byte(parts[3]))
			if !ok || len(v) < 2 || v[0] != recordV1 {
				return fmt.Errorf("a prescription record that does not decode")
			}
			return emit(storage.Record{Prescription: &storage.StoredPrescription{
				OrgID: parts[0], UserID: parts[1], PatientID: parts[2], SCID: scid, CreatedAt: created, JSON: bytes.Clone(v[1:]),
			}})
		}},
		{prefixOrgDrug, func(k, v []byte) error { return emitDrug(emit, k[len(prefixOrgDrug):], v, false) }},
		{prefixUserDrug, func(k, v []byte) error { return emitDrug(emit, k[len(prefixUserDrug):], v, true) }},
		{prefixEndpoint, func(_, v []byte) error {
			var r endpointRecord
			if err := decode(v, &r); err != nil {
				return err
			}
			e := r.endpoint()
			return emit(storage.Record{Endpoint: &e})
		}},
		{prefixEvent, func(_, v []byte) error {
			var r eventRecord
			if err := decode(v, &r); err != nil {
				return err
			}
			e, err := withPayload(txn, &r)
			if err != nil {
				return err
			}
			return emit(storage.Record{Event: &e})
		}},
		{prefixJobPending, func(_, v []byte) error {
			var r jobRecord
			if err := decode(v, &r); err != nil {
				return err
			}
			j := r.job()
			return emit(storage.Record{Job: &j})
		}},
		{prefixOperatorKey, func(_, v []byte) error {
			var r operatorKeyRecord
			if err := decode(v, &r); err != nil {
				return err
			}
			k := r.operatorKey()
			return emit(storage.Record{OperatorKey: &k})
		}},
		{prefixAuditEntry, func(_, v []byte) error {
			entries, err := decodeAuditValue(v)
			if err != nil {
				return err
			}
			for i := range entries {
				if err := emit(storage.Record{AuditEntry: &entries[i]}); err != nil {
					return err
				}
			}
			return nil
		}},
		{prefixAuditCheckpoint, func(_, v []byte) error {
			var c storage.AuditCheckpoint
			if err := decode(v, &c); err != nil {
				return err
			}
			return emit(storage.Record{AuditCheckpoint: &c})
		}},
	}
	for _, st := range steps {
		if err := each(st.prefix, st.fn); err != nil {
			return err
		}
	}
	var head auditHead
	switch err := getRecord(txn, auditHeadKey(), &head); {
	case errors.Is(err, storage.ErrNotFound):
		return nil
	case err != nil:
		return err
	}
	return emit(storage.Record{AuditHead: &storage.AuditChainHead{Seq: head.Seq, Hash: head.Hash}})
}

func emitDrug(emit func(storage.Record) error, rest, v []byte, user bool) error {
	parts := strings.Split(string(rest), "/")
	d := &storage.StoredCustomDrug{}
	switch {
	case !user && len(parts) == 2:
		d.OrgID, d.ID = parts[0], parts[1]
	case user && len(parts) == 3:
		d.OrgID, d.UserID, d.ID = parts[0], parts[1], parts[2]
	default:
		return fmt.Errorf("a custom drug key of %d parts", len(parts))
	}
	if len(v) < 2 || v[0] != recordV1 {
		return fmt.Errorf("a custom drug record that does not decode")
	}
	d.JSON = bytes.Clone(v[1:])
	return emit(storage.Record{CustomDrug: d})
}
