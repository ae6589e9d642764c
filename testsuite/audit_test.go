package testsuite_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage"
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
