package badger

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage"
	"github.com/rxgate/rxgate/testsuite/storagetest"
)

// auditFixture is a store holding a chain of n entries and checkpoints
// signed at seq 2 and at the head, each entry in its own value (as a
// change appends it).
func auditFixture(t *testing.T, n int) (*Store, ed25519.PublicKey) {
	return auditFixtureBatch(t, n, 1)
}

// auditFixtureBatch is auditFixture with entries appended batch at a time,
// each batch one stored value.
func auditFixtureBatch(t *testing.T, n, batch int) (*Store, ed25519.PublicKey) {
	t.Helper()
	s, err := Open(Options{InMemory: true})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s, storagetest.SeedAudit(t, s, n, batch)
}

// verifyStored reads the chain as the operator API serves it and verifies
// it. The listing never fails on a stored value: one that no longer
// decodes is listed as a corrupt placeholder, which verify reports.
func verifyStored(t *testing.T, s *Store, pub ed25519.PublicKey) []storage.AuditFinding {
	t.Helper()
	ctx := context.Background()
	entries, _, err := s.ListAudit(ctx, storage.AuditFilter{}, storage.PageRequest{Limit: 1000})
	require.NoError(t, err, "a damaged value is listed, not an error")
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
	t.Run("entry", func(t *testing.T) { testAuditEveryStoredByte(t, 1, 3) })
	// A batch's value: entries 3 and 4, under the key of 4.
	t.Run("batch", func(t *testing.T) { testAuditEveryStoredByte(t, 2, 4) })
}

func testAuditEveryStoredByte(t *testing.T, batch int, keySeq uint64) {
	t.Parallel()
	s, pub := auditFixtureBatch(t, 6, batch)
	require.Empty(t, verifyStored(t, s, pub))
	key := auditEntryKey(keySeq)
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

// TestAuditBatchValues lists a chain stored in batches page by page, and
// purges across a batch: the entries before the cut go, those after stay.
func TestAuditBatchValues(t *testing.T) {
	t.Parallel()
	s, _ := auditFixtureBatch(t, 6, 3) // values under the keys of 3 and 6
	ctx := context.Background()
	seqs := func() []uint64 {
		var out []uint64
		req := storage.PageRequest{Limit: 2}
		for {
			page, info, err := s.ListAudit(ctx, storage.AuditFilter{}, req)
			require.NoError(t, err)
			for _, e := range page {
				out = append(out, e.Seq)
			}
			if !info.HasNext {
				return out
			}
			req.Cursor = info.LastKey
		}
	}
	require.Equal(t, []uint64{1, 2, 3, 4, 5, 6}, seqs())
	start := storage.AuditCheckpoint{Seq: 1, Start: true}
	n, err := s.PurgeAudit(ctx, 2, start)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, []uint64{2, 3, 4, 5, 6}, seqs())
	start.Seq = 4
	n, err = s.PurgeAudit(ctx, 5, start)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	require.Equal(t, []uint64{5, 6}, seqs())
}

// TestAuditUndecodableValue damages stored values until they no longer
// decode: the listing goes on past each, with a corrupt placeholder at the
// first seq the value covered, pages resume across it, any filter lists
// it, and verify names its seq first.
func TestAuditUndecodableValue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	garbage := []byte("\x00\x00\x00\x07damaged")
	for _, tc := range []struct {
		name    string
		keySeq  uint64 // the value damaged, by its key
		purge   uint64 // purge the entries before this seq first (0: none)
		want    []uint64
		corrupt uint64
	}{
		// Values under the keys of 2, 4 and 6 (two entries each).
		{"middle", 4, 0, []uint64{1, 2, 3, 5, 6}, 3},
		{"first", 2, 0, []uint64{1, 3, 4, 5, 6}, 1},
		{"last", 6, 0, []uint64{1, 2, 3, 4, 5}, 5},
		// The first value kept after a purge starts after the marker.
		{"first after a purge", 4, 3, []uint64{3, 5, 6}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, pub := auditFixtureBatch(t, 6, 2)
			if tc.purge > 0 {
				pubKey, key, err := ed25519.GenerateKey(nil)
				require.NoError(t, err)
				pub = pubKey
				entries, _, err := s.ListAudit(ctx, storage.AuditFilter{}, storage.PageRequest{Limit: 100})
				require.NoError(t, err)
				last := entries[tc.purge-2]
				_, err = s.PurgeAudit(ctx, tc.purge, storage.SignAuditCheckpoint(key, last.Seq, last.Hash, true, time.Now()))
				require.NoError(t, err)
				for _, f := range verifyStored(t, s, pub) {
					require.Contains(t, f.Reason, "not signed", "only the fixture's checkpoint is signed by another key")
				}
			}
			rawSet(t, s, auditEntryKey(tc.keySeq), garbage)

			for _, limit := range []int{1, 2, 100} {
				var seqs []uint64
				req := storage.PageRequest{Limit: limit}
				for {
					page, info, err := s.ListAudit(ctx, storage.AuditFilter{}, req)
					require.NoError(t, err)
					for _, e := range page {
						seqs = append(seqs, e.Seq)
						require.Equal(t, e.Seq == tc.corrupt, e.Corrupt, "seq %d", e.Seq)
					}
					if !info.HasNext {
						break
					}
					req.Cursor = info.LastKey
				}
				require.Equal(t, tc.want, seqs, "pages of %d go on past the damaged value", limit)
			}
			page, _, err := s.ListAudit(ctx, storage.AuditFilter{PatientID: "nobody"}, storage.PageRequest{Limit: 10})
			require.NoError(t, err)
			require.Len(t, page, 1, "the placeholder passes any filter")
			require.True(t, page[0].Corrupt)

			var findings []storage.AuditFinding
			for _, f := range verifyStored(t, s, pub) {
				if !strings.Contains(f.Reason, "not signed") {
					findings = append(findings, f)
				}
			}
			require.NotEmpty(t, findings)
			require.Equal(t, tc.corrupt, findings[0].Seq, "%v", findings)
			require.Contains(t, findings[0].Reason, "unreadable")
		})
	}
}
