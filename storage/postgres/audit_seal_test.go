package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage"
	"github.com/rxgate/rxgate/storage/postgres"
	"github.com/rxgate/rxgate/testsuite/storagetest"
)

// TestAuditedChangesDoNotWaitForTheHead: a transaction holds the audit
// chain's head locked, as a seal (or an append) of another replica does
// until its commit is flushed. Audited creates commit meanwhile, each with
// its entry, without waiting for it: the chain's head is no lock every
// audited change takes. Once the holder is gone, reading the chain seals
// them, chained in the order the creates committed, and leaves nothing
// unsealed; a create that rolled back left no entry.
func TestAuditedChangesDoNotWaitForTheHead(t *testing.T) {
	t.Parallel()
	s := openPostgres(t, postgres.Options{})
	ctx := t.Context()
	w := storagetest.NewWorld(t, s)
	w.Endpoint(t, s, "https://a.example/hook")
	entry := func(i int) *storage.AuditPending {
		return &storage.AuditPending{Entry: storage.AuditEntry{ActorKind: storage.AuditActorOperator, OperatorName: "ops", OperatorRole: "admin",
			Operation: "prescription.create", Resource: fmt.Sprint("rx", i), Outcome: storage.AuditCommitted, Time: time.Now()}}
	}

	holder, err := s.Pool().Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = holder.Rollback(context.Background()) })
	var seq int64
	require.NoError(t, holder.QueryRow(ctx, `SELECT seq FROM audit_head WHERE id = 1 FOR UPDATE`).Scan(&seq))

	// The store's own lock timeout bounds a create that waited for the
	// holder: it would fail with an error, not by a timing.
	const n = 3
	for i := range n {
		p := entry(i)
		rx := w.Prescription()
		rx.PrescriptionItem = storage.PrescriptionItem{ItemName: fmt.Sprint("Item ", i), Quantity: "1"}
		require.NoError(t, s.CreatePrescription(storage.WithAudit(ctx, p), &rx))
		require.True(t, p.Written(), "the create committed its entry")
	}
	refused := entry(n)
	bad := w.Prescription()
	bad.PatientID = "no-such-patient"
	require.Error(t, s.CreatePrescription(storage.WithAudit(ctx, refused), &bad))
	require.False(t, refused.Written())
	var unsealed int
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT count(*) FROM audit_unsealed`).Scan(&unsealed))
	require.Equal(t, n, unsealed, "committed, not chained yet")

	require.NoError(t, holder.Rollback(ctx))
	entries, _, err := s.ListAudit(ctx, storage.AuditFilter{}, storage.PageRequest{Limit: 100})
	require.NoError(t, err)
	require.Len(t, entries, n)
	for i, e := range entries {
		require.Equal(t, uint64(i+1), e.Seq)
		require.Equal(t, fmt.Sprint("rx", i), e.Resource, "chained in commit order")
	}
	require.Empty(t, storage.VerifyAudit(entries, nil, nil), "the chain links up")
	head, hash, err := s.AuditHead(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(n), head)
	require.Equal(t, entries[n-1].Hash, hash)
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT count(*) FROM audit_unsealed`).Scan(&unsealed))
	require.Zero(t, unsealed, "every entry sealed once")

	// An append chains after the entries committed before it.
	p := entry(10)
	rx := w.Prescription()
	rx.PrescriptionItem = storage.PrescriptionItem{ItemName: "Item 10", Quantity: "1"}
	require.NoError(t, s.CreatePrescription(storage.WithAudit(ctx, p), &rx))
	appended := []storage.AuditEntry{entry(11).Entry}
	require.NoError(t, s.AppendAudit(ctx, appended))
	require.Equal(t, uint64(n+2), appended[0].Seq, "after the create's entry")
	entries, _, err = s.ListAudit(ctx, storage.AuditFilter{}, storage.PageRequest{Limit: 100})
	require.NoError(t, err)
	require.Len(t, entries, n+2)
	require.Equal(t, "rx10", entries[n].Resource)
	require.Equal(t, appended[0].Hash, entries[n+1].Hash)
	require.Empty(t, storage.VerifyAudit(entries, nil, nil))
}
