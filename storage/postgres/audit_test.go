package postgres_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage"
	"github.com/rxgate/rxgate/storage/postgres"
	"github.com/rxgate/rxgate/testsuite"
	"github.com/rxgate/rxgate/testsuite/storagetest"
)

// auditFixture is a store holding a chain of n entries and checkpoints
// signed at seq 2 and at the head.
func auditFixture(t *testing.T, n int) (*postgres.Store, ed25519.PublicKey) {
	t.Helper()
	s := testsuite.OpenPostgres(t, time.Now)
	return s, storagetest.SeedAudit(t, s, n, n)
}

func verifyStored(t *testing.T, s *postgres.Store, pub ed25519.PublicKey) []storage.AuditFinding {
	t.Helper()
	entries, _, err := s.ListAudit(t.Context(), storage.AuditFilter{}, storage.PageRequest{Limit: 1000})
	require.NoError(t, err)
	cps, err := s.ListAuditCheckpoints(t.Context())
	require.NoError(t, err)
	return storage.VerifyAudit(entries, cps, pub)
}

func exec(t *testing.T, s *postgres.Store, sql string, args ...any) error {
	t.Helper()
	_, err := s.Pool().Exec(context.Background(), sql, args...)
	return err
}

// TestAuditEveryStoredByte changes, with SQL, every byte of every text
// and bytea column of one stored entry in turn (each to two other
// values; a change PostgreSQL refuses, invalid UTF-8, is skipped), and
// its time, seq and outcome by one: verify reports each.
func TestAuditEveryStoredByte(t *testing.T) {
	t.Parallel()
	testsuite.PostgresURL(t)
	s, pub := auditFixture(t, 5)
	require.Empty(t, verifyStored(t, s, pub))
	caught := 0
	for _, col := range []string{"actor_kind", "partner_id", "org_id", "user_id", "operator_name", "operator_role",
		"operation", "patient_id", "resource", "request_id", "prev_hash", "hash"} {
		var orig []byte
		require.NoError(t, s.Pool().QueryRow(t.Context(), fmt.Sprintf(`SELECT %s::bytea FROM audit_entries WHERE seq = 3`, col)).Scan(&orig))
		text := col != "prev_hash" && col != "hash"
		set := func(v []byte) error {
			if text {
				return exec(t, s, fmt.Sprintf(`UPDATE audit_entries SET %s = convert_from($1, 'UTF8') WHERE seq = 3`, col), v)
			}
			return exec(t, s, fmt.Sprintf(`UPDATE audit_entries SET %s = $1 WHERE seq = 3`, col), v)
		}
		for i := range orig {
			for _, flip := range []byte{0x01, 0x20} {
				b := bytes.Clone(orig)
				b[i] ^= flip
				if set(b) != nil {
					continue
				}
				require.NotEmpty(t, verifyStored(t, s, pub), "%s byte %d ^ %#x went unnoticed", col, i, flip)
				caught++
			}
		}
		require.NoError(t, set(orig))
		require.Empty(t, verifyStored(t, s, pub), "%s restored", col)
	}
	for _, change := range []string{
		`UPDATE audit_entries SET at = at + interval '1 microsecond' WHERE seq = 3`,
		`UPDATE audit_entries SET outcome = outcome + 1 WHERE seq = 3`,
		`UPDATE audit_entries SET outcome = 404 WHERE seq = 3`,
	} {
		require.NoError(t, exec(t, s, change))
		require.NotEmpty(t, verifyStored(t, s, pub), change)
		caught++
	}
	t.Logf("%d changes caught", caught)
}

// TestAuditStoredTampering deletes, reorders and truncates entries with
// SQL.
func TestAuditStoredTampering(t *testing.T) {
	t.Parallel()
	testsuite.PostgresURL(t)
	for _, tc := range []struct {
		name string
		sql  []string
		seq  uint64
	}{
		{"deleted", []string{`DELETE FROM audit_entries WHERE seq = 3`}, 3},
		{"swapped", []string{`UPDATE audit_entries SET seq = -2 WHERE seq = 2`, `UPDATE audit_entries SET seq = 2 WHERE seq = 3`,
			`UPDATE audit_entries SET seq = 3 WHERE seq = -2`}, 2},
		{"tail truncated", []string{`DELETE FROM audit_entries WHERE seq >= 4`}, 5},
		{"first removed", []string{`DELETE FROM audit_entries WHERE seq = 1`}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, pub := auditFixture(t, 5)
			for _, sql := range tc.sql {
				require.NoError(t, exec(t, s, sql))
			}
			findings := verifyStored(t, s, pub)
			require.NotEmpty(t, findings)
			require.Equal(t, tc.seq, findings[0].Seq, "%v", findings)
		})
	}
}

// TestAuditUndecodableRow: a row whose time PostgreSQL holds but Go
// cannot (infinity, written with SQL) is listed as a corrupt entry, the
// listing goes on past it, and verify names its seq, as on the embedded
// store a value that no longer decodes is.
func TestAuditUndecodableRow(t *testing.T) {
	t.Parallel()
	testsuite.PostgresURL(t)
	for _, at := range []string{"infinity", "-infinity"} {
		t.Run(at, func(t *testing.T) {
			t.Parallel()
			s, pub := auditFixture(t, 5)
			require.NoError(t, exec(t, s, `UPDATE audit_entries SET at = $1::timestamptz WHERE seq = 3`, at))
			var seqs []uint64
			req := storage.PageRequest{Limit: 2}
			for {
				page, info, err := s.ListAudit(t.Context(), storage.AuditFilter{}, req)
				require.NoError(t, err, "a damaged row is listed, not an error")
				for _, e := range page {
					seqs = append(seqs, e.Seq)
					require.Equal(t, e.Seq == 3, e.Corrupt, "seq %d", e.Seq)
				}
				if !info.HasNext {
					break
				}
				req.Cursor = info.LastKey
			}
			require.Equal(t, []uint64{1, 2, 3, 4, 5}, seqs)
			findings := verifyStored(t, s, pub)
			require.NotEmpty(t, findings)
			require.Equal(t, uint64(3), findings[0].Seq, "%v", findings)
			require.Contains(t, findings[0].Reason, "unreadable")
		})
	}
}
