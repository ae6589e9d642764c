package storagetest

import (
	"crypto/ed25519"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage"
)

// auditTests cover storage.AuditLog: append order and gap-free seq under
// concurrent appends, the entry appended in a change's transaction (and
// not when the change fails), pages and filters, and the purge with its
// start marker.
var auditTests = []test{
	{name: "AuditAppend", run: testAuditAppend},
	{name: "AuditWithChange", run: testAuditWithChange},
	{name: "AuditPagesAndFilters", run: testAuditPages},
	{name: "AuditPurge", run: testAuditPurge},
}

func auditLog(t testing.TB, e *env) storage.AuditLog {
	t.Helper()
	l, ok := e.s.(storage.AuditLog)
	require.True(t, ok, "the store implements storage.AuditLog")
	return l
}

// allAudit reads the whole chain page by page.
func allAudit(t testing.TB, l storage.AuditLog, f storage.AuditFilter, limit int) []storage.AuditEntry {
	t.Helper()
	var out []storage.AuditEntry
	req := storage.PageRequest{Limit: limit}
	for {
		page, info, err := l.ListAudit(t.Context(), f, req)
		require.NoError(t, err)
		require.Len(t, page, info.Count)
		out = append(out, page...)
		if !info.HasNext {
			return out
		}
		req.Cursor = info.LastKey
	}
}

func operatorEntry(name, op string) storage.AuditEntry {
	return storage.AuditEntry{ActorKind: storage.AuditActorOperator, OperatorName: name, OperatorRole: "admin", Operation: op, Outcome: 200, Time: time.Now()}
}

func testAuditAppend(t *testing.T, e *env) {
	ctx := t.Context()
	l := auditLog(t, e)
	seq, hash, err := l.AuditHead(ctx)
	require.NoError(t, err)
	require.Zero(t, seq)
	require.Empty(t, hash)

	const writers, each = 8, 5
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				batch := []storage.AuditEntry{operatorEntry("w", "a"), operatorEntry("w", "b")}
				batch[0].Resource = string(rune('a'+w)) + string(rune('0'+i))
				if err := l.AppendAudit(ctx, batch); err != nil {
					t.Error(err)
					return
				}
				if batch[1].Seq != batch[0].Seq+1 {
					t.Errorf("one batch's entries are consecutive: %d, %d", batch[0].Seq, batch[1].Seq)
				}
			}
		}()
	}
	wg.Wait()
	all := allAudit(t, l, storage.AuditFilter{}, 7)
	require.Len(t, all, writers*each*2)
	for i, en := range all {
		require.Equal(t, uint64(i+1), en.Seq, "seq is gap-free, in list order")
	}
	require.Empty(t, storage.VerifyAudit(all, nil, nil), "the chain links up")
	seq, hash, err = l.AuditHead(ctx)
	require.NoError(t, err)
	require.Equal(t, all[len(all)-1].Seq, seq)
	require.Equal(t, all[len(all)-1].Hash, hash)
}

func testAuditWithChange(t *testing.T, e *env) {
	ctx := t.Context()
	l := auditLog(t, e)
	ten := createTenant(t, e.s, "Acme")
	patient := ten.patient

	entry := storage.AuditEntry{ActorKind: storage.AuditActorPartner, OrgID: ten.org.ID, UserID: ten.user.ID,
		Operation: "patient.update", PatientID: patient.ID, RequestID: "r1", Time: time.Now()}
	refused := &storage.AuditPending{Entry: entry}
	_, err := e.s.UpdatePatient(storage.WithAudit(ctx, refused), ten.org.ID, ten.user.ID, patient.ID, func(*storage.Patient) error { return errUpdater })
	require.ErrorIs(t, err, errUpdater)
	require.False(t, refused.Written(), "a failed change appends nothing")
	require.Empty(t, allAudit(t, l, storage.AuditFilter{}, 10))

	done := &storage.AuditPending{Entry: entry}
	_, err = e.s.UpdatePatient(storage.WithAudit(ctx, done), ten.org.ID, ten.user.ID, patient.ID, func(p *storage.Patient) error {
		p.GivenName = ptr("Changed")
		return nil
	})
	require.NoError(t, err)
	require.True(t, done.Written(), "the change committed its entry")
	created := &storage.AuditPending{Entry: entry}
	created.Entry.Operation = "patient.create"
	other := *ten.patient
	other.ID, other.PartnerPatientID = "", ""
	require.NoError(t, e.s.CreatePatient(storage.WithAudit(ctx, created), &other))
	require.True(t, created.Written())

	all := allAudit(t, l, storage.AuditFilter{}, 10)
	require.Len(t, all, 2)
	require.Equal(t, "patient.update", all[0].Operation)
	require.Equal(t, "patient.create", all[1].Operation)
	require.Equal(t, patient.ID, all[0].PatientID)
	require.Empty(t, storage.VerifyAudit(all, nil, nil))

	_, err = e.s.UpdatePatient(storage.WithAudit(ctx, done), ten.org.ID, ten.user.ID, patient.ID, func(*storage.Patient) error { return nil })
	require.NoError(t, err)
	require.Len(t, allAudit(t, l, storage.AuditFilter{}, 10), 2, "an entry is appended once, whatever else its request writes")
}

func testAuditPages(t *testing.T, e *env) {
	ctx := t.Context()
	l := auditLog(t, e)
	base := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	var entries []storage.AuditEntry
	for i := range 30 {
		en := storage.AuditEntry{ActorKind: storage.AuditActorPartner, OrgID: "o", Operation: "prescriptions.list", Outcome: 200,
			Time: base.Add(time.Duration(i) * time.Minute)}
		switch i % 3 {
		case 0:
			en.UserID, en.PatientID = "u1", "p1"
		case 1:
			en.UserID, en.PatientID = "u2", "p2"
		default:
			en = operatorEntry("ops", "operator.tokens.mint")
			en.Time = base.Add(time.Duration(i) * time.Minute)
		}
		entries = append(entries, en)
	}
	require.NoError(t, l.AppendAudit(ctx, entries))
	for name, tc := range map[string]struct {
		f    storage.AuditFilter
		want int
	}{
		"all":      {storage.AuditFilter{}, 30},
		"patient":  {storage.AuditFilter{PatientID: "p1"}, 10},
		"user":     {storage.AuditFilter{UserID: "u2"}, 10},
		"operator": {storage.AuditFilter{Operator: "ops"}, 10},
		"time":     {storage.AuditFilter{From: base.Add(10 * time.Minute), To: base.Add(20 * time.Minute)}, 10},
		"both":     {storage.AuditFilter{PatientID: "p1", From: base.Add(10 * time.Minute)}, 6},
		"none":     {storage.AuditFilter{PatientID: "nobody"}, 0},
	} {
		t.Run(name, func(t *testing.T) {
			got := allAudit(t, l, tc.f, 4)
			require.Len(t, got, tc.want)
			for i, en := range got {
				require.True(t, tc.f.Match(&en), "entry %d passes the filter", en.Seq)
				if i > 0 {
					require.Greater(t, en.Seq, got[i-1].Seq, "seq order")
				}
			}
		})
	}
	_, info, err := l.ListAudit(ctx, storage.AuditFilter{PatientID: "p1"}, storage.PageRequest{Limit: 2})
	require.NoError(t, err)
	_, _, err = l.ListAudit(ctx, storage.AuditFilter{PatientID: "p2"}, storage.PageRequest{Limit: 2, Cursor: info.LastKey})
	require.ErrorIs(t, err, storage.ErrBadCursor, "a cursor is bound to its filter")
}

func testAuditPurge(t *testing.T, e *env) {
	ctx := t.Context()
	l := auditLog(t, e)
	pub, key, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	var entries []storage.AuditEntry
	for range 20 {
		entries = append(entries, operatorEntry("ops", "operator.keys.list"))
	}
	require.NoError(t, l.AppendAudit(ctx, entries))
	seq, hash, err := l.AuditHead(ctx)
	require.NoError(t, err)
	require.NoError(t, l.AddAuditCheckpoint(ctx, storage.SignAuditCheckpoint(key, 5, entries[4].Hash, false, time.Now())))
	require.NoError(t, l.AddAuditCheckpoint(ctx, storage.SignAuditCheckpoint(key, seq, hash, false, time.Now())))

	start := storage.SignAuditCheckpoint(key, 11, entries[10].Hash, true, time.Now())
	n, err := l.PurgeAudit(ctx, 12, start)
	require.NoError(t, err)
	require.Equal(t, 11, n)
	all := allAudit(t, l, storage.AuditFilter{}, 100)
	require.Len(t, all, 9)
	require.Equal(t, uint64(12), all[0].Seq)
	cps, err := l.ListAuditCheckpoints(ctx)
	require.NoError(t, err)
	require.Len(t, cps, 2, "the start marker and the checkpoint after it stay")
	require.Empty(t, storage.VerifyAudit(all, cps, pub), "a purged chain with its marker verifies")

	// Without the marker, the same chain is reported.
	var noStart []storage.AuditCheckpoint
	for _, c := range cps {
		if !c.Start {
			noStart = append(noStart, c)
		}
	}
	require.NotEmpty(t, storage.VerifyAudit(all, noStart, pub), "a chain starting after seq 1 needs the marker")

	require.NoError(t, l.AppendAudit(ctx, []storage.AuditEntry{operatorEntry("ops", "after")}))
	all = allAudit(t, l, storage.AuditFilter{}, 100)
	require.Equal(t, uint64(21), all[len(all)-1].Seq, "appends continue the chain after a purge")
	require.Empty(t, storage.VerifyAudit(all, cps, pub))
}
