package testsuite_test

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage"
	"github.com/rxgate/rxgate/storage/badger"
	"github.com/rxgate/rxgate/storage/postgres"
	"github.com/rxgate/rxgate/testsuite"
)

// TestAuditRecordsPartnerRequests: a partner's patient update and
// prescription read appear in GET /admin/v1/audit, filtered by the
// patient, with the partner, organization and user who made them and the
// patient's id, but none of the patient's values.
func TestAuditRecordsPartnerRequests(t *testing.T) {
	t.Parallel()
	env := testsuite.Start(t)
	tn := env.NewTenant(t)
	token := tn.Token(t, testsuite.RolePrescriber)
	const phone, email = "0398765432", "quixote.audit@example.test"
	r := env.Do(t, testsuite.Request{Method: http.MethodPut, URL: partnerPatientPath(tn, testsuite.RolePrescriber, tn.PatientID),
		Token: token, Headers: tn.Headers(), Body: map[string]any{"phone": phone, "email": email}})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	r = env.Do(t, testsuite.Request{URL: partnerPatientPath(tn, testsuite.RolePrescriber, tn.PatientID) + "/prescriptions",
		Token: token, Headers: tn.Headers()})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)

	// The read's entry is buffered by the server that answered it and
	// appended within a second; the listing flushes only the buffer of
	// the server that answers it, another replica's may come a moment
	// later.
	var a *testsuite.Response
	ops := map[string]storage.AuditEntry{}
	require.Eventually(t, func() bool {
		a = env.MustAdmin(t, http.MethodGet, "/admin/v1/audit?patient_id="+tn.PatientID, nil, http.StatusOK)
		var entries []storage.AuditEntry
		a.DecodeData(t, &entries)
		for _, e := range entries {
			ops[e.Operation] = e
		}
		return len(ops) >= 2
	}, 10*time.Second, 20*time.Millisecond, "the update's and the read's entries appear")
	// A change's entry is appended in its transaction, before the
	// status is known (storage.AuditCommitted); a read's after it is
	// answered, with its status.
	for op, outcome := range map[string]int{"patient.update": storage.AuditCommitted, "prescriptions.list": http.StatusOK} {
		e, ok := ops[op]
		if !assert.True(t, ok, "no %s entry in %s", op, a.Body) {
			continue
		}
		assert.Equal(t, storage.AuditActorPartner, e.ActorKind, op)
		assert.Equal(t, tn.PartnerID, e.PartnerID, op)
		assert.Equal(t, tn.OrgID, e.OrgID, op)
		assert.Equal(t, tn.UserID(testsuite.RolePrescriber), e.UserID, op)
		assert.Equal(t, tn.PatientID, e.PatientID, op)
		assert.Equal(t, outcome, e.Outcome, op)
	}
	for _, v := range []string{phone, email} {
		assert.NotContains(t, string(a.Body), v, "no patient value is in the trail")
	}
}

// TestAuditListsDamagedEntry damages a stored audit entry below the API
// so that it no longer decodes (on Badger a value's bytes, on PostgreSQL
// a time Go cannot hold): GET /admin/v1/audit answers 200, in the
// contract, with a corrupt entry at the first seq the damage covers and
// the entries after it; the console's audit page shows it.
func TestAuditListsDamagedEntry(t *testing.T) {
	t.Parallel()
	env := testsuite.Start(t)
	env.RequireInProcess(t)
	// Each listing flushes the reads buffered before it: on Badger, one
	// stored value each.
	for range 4 {
		env.MustAdmin(t, http.MethodGet, "/admin/v1/organizations", nil, http.StatusOK)
		env.MustAdmin(t, http.MethodGet, "/admin/v1/audit", nil, http.StatusOK)
	}
	var before []storage.AuditEntry
	env.MustAdmin(t, http.MethodGet, "/admin/v1/audit", nil, http.StatusOK).DecodeData(t, &before)
	require.GreaterOrEqual(t, len(before), 4)

	var seq uint64
	ctx := t.Context()
	switch s := env.Store.(type) {
	case *badger.Store:
		values, err := s.RawAuditValues(ctx)
		require.NoError(t, err)
		keys := slices.Sorted(maps.Keys(values))
		require.GreaterOrEqual(t, len(keys), 3)
		require.NoError(t, s.SetRawAuditValue(ctx, keys[1], []byte("no longer an audit record")))
		seq = keys[0] + 1
	case *postgres.Store:
		seq = 2
		require.NoError(t, s.SetRawAuditTime(ctx, seq, "infinity"))
	default:
		t.Skipf("no way to damage a %T's audit trail", s)
	}

	var entries []storage.AuditEntry
	env.MustAdmin(t, http.MethodGet, "/admin/v1/audit", nil, http.StatusOK).DecodeData(t, &entries)
	var corrupt []uint64
	for _, e := range entries {
		if e.Corrupt {
			corrupt = append(corrupt, e.Seq)
		}
	}
	require.Equal(t, []uint64{seq}, corrupt, "one corrupt entry, at the first seq the damage covers")
	require.Greater(t, entries[len(entries)-1].Seq, before[len(before)-1].Seq, "the listing goes on past it")

	if _, ok := env.Store.(*badger.Store); ok {
		// On PostgreSQL the row's other columns are still read, and
		// filtered on.
		r := env.MustAdmin(t, http.MethodGet, "/admin/v1/audit?patient_id="+storage.NewID(), nil, http.StatusOK)
		require.Contains(t, string(r.Body), `"corrupt":true`, "a filter lists it too: what it held is unknown")
	}

	c := newConsole(t, env)
	c.signIn()
	p := c.get("/console/audit")
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, fmt.Sprintf("the stored entries from seq %d no longer decode", seq))
}
