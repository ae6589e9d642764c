package storage_test

import (
	"crypto/ed25519"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage"
)

// auditChain returns a chain of n entries with checkpoints at 2 and n, and
// the public key that verifies them.
func auditChain(t testing.TB, n int) ([]storage.AuditEntry, []storage.AuditCheckpoint, ed25519.PublicKey) {
	t.Helper()
	pub, key, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	var seq uint64
	var hash []byte
	var out []storage.AuditEntry
	for i := range n {
		e := storage.AuditEntry{
			Time: time.Date(2026, 3, 2, 9, 0, i, 0, time.UTC), ActorKind: storage.AuditActorPartner,
			PartnerID: "pa", OrgID: "or", UserID: "us", Operation: "prescriptions.list", PatientID: "pt",
			RequestID: "req", Outcome: 200,
		}
		seq, hash = storage.ChainAudit(seq, hash, &e)
		out = append(out, e)
	}
	cps := []storage.AuditCheckpoint{
		storage.SignAuditCheckpoint(key, 2, out[1].Hash, false, time.Now()),
		storage.SignAuditCheckpoint(key, seq, hash, false, time.Now()),
	}
	return out, cps, pub
}

func TestVerifyAuditWhole(t *testing.T) {
	entries, cps, pub := auditChain(t, 5)
	require.Empty(t, storage.VerifyAudit(entries, cps, pub))
	require.Empty(t, storage.VerifyAudit(nil, nil, pub), "an empty chain is whole")
}

// TestVerifyAuditEveryByte changes every byte of one entry's stored form
// (its JSON, as the embedded store keeps it) in turn: each change that
// still decodes to a different entry is reported at that entry's seq. A
// change that no longer decodes is caught by the decoder; one that decodes
// to the same entry (a member name's case, which encoding/json ignores)
// changes nothing verify reads.
func TestVerifyAuditEveryByte(t *testing.T) {
	entries, cps, pub := auditChain(t, 5)
	const target = 2 // seq 3
	stored, err := json.Marshal(entries[target])
	require.NoError(t, err)
	caught := 0
	for i := range stored {
		for _, flip := range []byte{0x01, 0x20} {
			b := slices.Clone(stored)
			b[i] ^= flip
			var changed storage.AuditEntry
			if json.Unmarshal(b, &changed) != nil {
				continue
			}
			if reflect.DeepEqual(normalize(changed), normalize(entries[target])) {
				continue
			}
			tampered := slices.Clone(entries)
			tampered[target] = changed
			findings := storage.VerifyAudit(tampered, cps, pub)
			require.NotEmpty(t, findings, "byte %d ^ %#x (%q) went unnoticed", i, flip, b)
			require.LessOrEqual(t, findings[0].Seq, uint64(target+1), "the first finding is at or before the changed entry")
			caught++
		}
	}
	require.Positive(t, caught)
}

func normalize(e storage.AuditEntry) storage.AuditEntry {
	e.Time = e.Time.UTC()
	return e
}

func TestVerifyAuditFindings(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func([]storage.AuditEntry, []storage.AuditCheckpoint) ([]storage.AuditEntry, []storage.AuditCheckpoint)
		seq    uint64
		reason string
	}{
		{"deleted", func(e []storage.AuditEntry, c []storage.AuditCheckpoint) ([]storage.AuditEntry, []storage.AuditCheckpoint) {
			return slices.Delete(e, 2, 3), c
		}, 3, "missing"},
		{"first deleted", func(e []storage.AuditEntry, c []storage.AuditCheckpoint) ([]storage.AuditEntry, []storage.AuditCheckpoint) {
			return e[1:], c
		}, 1, "without a start marker"},
		{"swapped", func(e []storage.AuditEntry, c []storage.AuditCheckpoint) ([]storage.AuditEntry, []storage.AuditCheckpoint) {
			e[1], e[2] = e[2], e[1]
			return e, c
		}, 2, "out of order"},
		{"swapped with seqs renumbered", func(e []storage.AuditEntry, c []storage.AuditCheckpoint) ([]storage.AuditEntry, []storage.AuditCheckpoint) {
			e[1], e[2] = e[2], e[1]
			e[1].Seq, e[2].Seq = 2, 3
			return e, c
		}, 2, "previous hash"},
		{"tail truncated", func(e []storage.AuditEntry, c []storage.AuditCheckpoint) ([]storage.AuditEntry, []storage.AuditCheckpoint) {
			return e[:4], c
		}, 5, "truncated"},
		{"rewritten and rehashed", func(e []storage.AuditEntry, c []storage.AuditCheckpoint) ([]storage.AuditEntry, []storage.AuditCheckpoint) {
			e[1].PatientID = "other"
			e[1].Hash = storage.AuditHash(e[1].PrevHash, &e[1])
			for i := 2; i < len(e); i++ {
				e[i].PrevHash = e[i-1].Hash
				e[i].Hash = storage.AuditHash(e[i].PrevHash, &e[i])
			}
			return e, c
		}, 2, "checkpoint"},
		{"forged checkpoint", func(e []storage.AuditEntry, c []storage.AuditCheckpoint) ([]storage.AuditEntry, []storage.AuditCheckpoint) {
			c[0].Signature[0] ^= 1
			return e, c
		}, 2, "not signed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			entries, cps, pub := auditChain(t, 5)
			entries, cps = tc.change(entries, cps)
			findings := storage.VerifyAudit(entries, cps, pub)
			require.NotEmpty(t, findings)
			require.Equal(t, tc.seq, findings[0].Seq, "%v", findings)
			require.True(t, strings.Contains(findings[0].Reason, tc.reason), "%v", findings)
		})
	}
}

// TestAppendChainedAuditRecord: encoding once gives what ChainAudit and
// AppendAuditRecord give, and what DecodeAuditRecord reads back.
func TestAppendChainedAuditRecord(t *testing.T) {
	var seqA, seqB uint64
	var hashA, hashB []byte
	var buf []byte
	for i := range 3 {
		e := storage.AuditEntry{Time: time.Date(2026, 1, 2, 3, 4, 5, 6789, time.UTC), ActorKind: storage.AuditActorPartner,
			PartnerID: "p1", OrgID: "o1", UserID: "u1", Operation: "prescriptions.list", PatientID: "pt" + strings.Repeat("x", i),
			RequestID: "r1", Outcome: 200}
		a, b := e, e
		seqA, hashA = storage.ChainAudit(seqA, hashA, &a)
		want := storage.AppendAuditRecord(nil, &a)
		start := len(buf)
		buf = storage.AppendChainedAuditRecord(buf, seqB, hashB, &b)
		seqB, hashB = b.Seq, b.Hash
		require.Equal(t, want, buf[start:])
		require.Equal(t, a, b)
		got, err := storage.DecodeAuditRecord(buf[start:])
		require.NoError(t, err)
		require.Equal(t, a.Hash, got.Hash)
		require.Equal(t, a.PrevHash, got.PrevHash)
	}
	require.Equal(t, seqA, seqB)
}
