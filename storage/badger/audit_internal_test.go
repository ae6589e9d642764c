package badger

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage"
)

// auditFixture is a store holding a chain of n entries and checkpoints
// signed at seq 2 and at the head.
func auditFixture(t *testing.T, n int) (*Store, ed25519.PublicKey) {
	t.Helper()
	s, err := Open(Options{InMemory: true})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	pub, key, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	entries := make([]storage.AuditEntry, n)
	for i := range entries {
		entries[i] = storage.AuditEntry{Time: time.Date(2026, 3, 2, 9, 0, i, 0, time.UTC), ActorKind: storage.AuditActorPartner,
			PartnerID: "pa", OrgID: "or", UserID: "us", Operation: "prescriptions.list", PatientID: "pt", RequestID: "rq", Outcome: 200}
	}
	ctx := context.Background()
	require.NoError(t, s.AppendAudit(ctx, entries))
	require.NoError(t, s.AddAuditCheckpoint(ctx, storage.SignAuditCheckpoint(key, 2, entries[1].Hash, false, time.Now())))
	require.NoError(t, s.AddAuditCheckpoint(ctx, storage.SignAuditCheckpoint(key, uint64(n), entries[n-1].Hash, false, time.Now())))
	return s, pub
}

// verifyStored reads the chain as the operator API serves it and verifies
// it; a record that no longer decodes is a finding too (the API answers
// 500, and verify fails).
func verifyStored(t *testing.T, s *Store, pub ed25519.PublicKey) []storage.AuditFinding {
	t.Helper()
	ctx := context.Background()
	entries, _, err := s.ListAudit(ctx, storage.AuditFilter{}, storage.PageRequest{Limit: 1000})
	if err != nil {
		return []storage.AuditFinding{{Reason: "unreadable: " + err.Error()}}
	}
	cps, err := s.ListAuditCheckpoints(ctx)
	require.NoError(t, err)
	return storage.VerifyAudit(entries, cps, pub)
}

func rawSet(t *testing.T, s *Store, key, value []byte) {
	t.Helper()
	require.NoError(t, s.update(context.Background(), func(txn *tx) error {
		if value == nil {
			return txn.delete(key)
		}
		return txn.set(key, value)
	}))
}

// TestAuditEveryStoredByte changes every byte of one stored entry in turn
// (each to two other values) and restores it: each change is reported, as
// a broken chain or as a record that no longer parses.
func TestAuditEveryStoredByte(t *testing.T) {
	t.Parallel()
	s, pub := auditFixture(t, 5)
	require.Empty(t, verifyStored(t, s, pub))
	key := auditEntryKey(3)
	var orig []byte
	require.NoError(t, s.view(context.Background(), func(txn *tx) (err error) { orig, err = getRaw(txn, key); return err }))
	caught := 0
	for i := range orig {
		for _, flip := range []byte{0x01, 0x80} {
			b := bytes.Clone(orig)
			b[i] ^= flip
			rawSet(t, s, key, b)
			require.NotEmpty(t, verifyStored(t, s, pub), "byte %d ^ %#x went unnoticed: %q", i, flip, b)
			caught++
		}
	}
	rawSet(t, s, key, orig)
	require.Empty(t, verifyStored(t, s, pub), "restored, the chain is whole again")
	t.Logf("%d changes of %d bytes caught", caught, len(orig))
}

// TestAuditStoredTampering deletes, swaps and truncates stored entries.
func TestAuditStoredTampering(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		tamper func(t *testing.T, s *Store)
		seq    uint64
	}{
		{"deleted", func(t *testing.T, s *Store) { rawSet(t, s, auditEntryKey(3), nil) }, 3},
		{"swapped", func(t *testing.T, s *Store) {
			var a, b []byte
			require.NoError(t, s.view(context.Background(), func(txn *tx) (err error) {
				if a, err = getRaw(txn, auditEntryKey(2)); err != nil {
					return err
				}
				b, err = getRaw(txn, auditEntryKey(3))
				return err
			}))
			rawSet(t, s, auditEntryKey(2), b)
			rawSet(t, s, auditEntryKey(3), a)
		}, 2},
		{"tail truncated", func(t *testing.T, s *Store) {
			rawSet(t, s, auditEntryKey(5), nil)
			rawSet(t, s, auditEntryKey(4), nil)
		}, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, pub := auditFixture(t, 5)
			tc.tamper(t, s)
			findings := verifyStored(t, s, pub)
			require.NotEmpty(t, findings)
			require.Equal(t, tc.seq, findings[0].Seq, "%v", findings)
		})
	}
}
