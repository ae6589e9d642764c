package badger

import (
	"context"
)

// RawAuditValues returns the audit trail's stored values as they are on
// disk, by the seq each is keyed by (a batch's last entry). It and
// SetRawAuditValue exist for end-to-end tests of `rxgate audit verify`:
// they change the trail the way someone with the data directory could,
// below the chain that is meant to notice.
func (s *Store) RawAuditValues(ctx context.Context) (map[uint64][]byte, error) {
	out := map[uint64][]byte{}
	err := s.view(ctx, func(txn *tx) error {
		return s.scan(txn, []byte(prefixAuditEntry), func(k, v []byte) error {
			out[auditSeqOf(k[len(prefixAuditEntry):])] = append([]byte(nil), v...)
			return nil
		})
	})
	return out, err
}

// SetRawAuditValue replaces the stored audit value keyed by seq with v, or
// deletes it when v is nil (see RawAuditValues).
func (s *Store) SetRawAuditValue(ctx context.Context, seq uint64, v []byte) error {
	return s.update(ctx, func(txn *tx) error {
		if v == nil {
			return txn.delete(auditEntryKey(seq))
		}
		return txn.set(auditEntryKey(seq), v)
	})
}
