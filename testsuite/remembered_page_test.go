package testsuite_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/testsuite"
)

// TestRememberedPageNeverStale: a 200 of the first prescription page,
// which the server may answer from the page it remembers without reading
// the store (app/page_tags.go), is never stale and never skips a check,
// whoever asks. Each read is asked twice (the second may come from
// memory): a patient update, a new prescription and a status change show
// at once; an owner reads the prescriber's page as the prescriber does; a
// member is refused another user's page, a rotated organization secret
// and a disabled user are refused at once, remembered page or not.
func TestRememberedPageNeverStale(t *testing.T) {
	t.Parallel()
	env := testsuite.Start(t)
	tn := env.NewTenant(t)
	token := tn.Token(t, testsuite.RolePrescriber)
	newPrescription(t, env, tn, testsuite.RolePrescriber, tn.PatientID, fullPrescription("Amoxicillin 500 mg capsule"))
	path := prescriptionsPath(tn, testsuite.RolePrescriber, tn.PatientID, nil)
	// read asks twice and requires the same page both times.
	read := func(token string) *testsuite.Response {
		t.Helper()
		first := poll(t, env, tn, token, path, nil)
		tag := requirePage(t, env, first)
		second := poll(t, env, tn, token, path, nil)
		require.Equal(t, tag, requirePage(t, env, second))
		assert.JSONEq(t, member(t, first, "data"), member(t, second, "data"))
		assert.JSONEq(t, member(t, first, "pagination"), member(t, second, "pagination"))
		return second
	}
	read(token)

	r := env.Do(t, testsuite.Request{Method: http.MethodPut, URL: partnerPatientPath(tn, testsuite.RolePrescriber, tn.PatientID),
		Token: token, Headers: tn.Headers(), Body: map[string]any{"given_name": "Renamed"}})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Equal(t, "Renamed", read(token).String(t, "data.patient.given_name"), "a patient update shows at once")

	scid := newPrescription(t, env, tn, testsuite.RolePrescriber, tn.PatientID, shortPrescription("Paracetamol 500 mg"))
	assert.Contains(t, member(t, read(token), "data.prescriptions"), scid, "a new prescription shows at once")

	env.MustAdmin(t, http.MethodPatch, tn.PatientPath()+"/prescriptions/"+scid, map[string]any{"status": "Ceased"}, http.StatusOK)
	assert.Contains(t, member(t, read(token), "data.prescriptions"), `"Ceased"`, "a status change shows at once")

	owner := read(tn.Token(t, testsuite.RoleOwner))
	assert.Equal(t, tn.UserID(testsuite.RolePrescriber), owner.String(t, "data.prescriber.user_id"), "the page is the prescriber's, whoever reads it")
	r = poll(t, env, tn, tn.Token(t, testsuite.RoleMember), path, nil)
	assert.Equal(t, http.StatusForbidden, r.Status, "a member reads another user's remembered page: %s", r.Body)

	old := tn.RotateOrgSecret(t)
	r = poll(t, env, tn, token, path, map[string]string{testsuite.HeaderOrganizationSecret: old})
	assert.Equal(t, http.StatusUnauthorized, r.Status, "the old secret: %s", r.Body)
	read(token)

	r = env.Do(t, testsuite.Request{Method: http.MethodPut, URL: strings.TrimPrefix(tn.UserPath(testsuite.RolePrescriber), "/admin") + "/disable",
		Token: token, Headers: tn.Headers()})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	r = poll(t, env, tn, token, path, nil)
	assert.Equal(t, http.StatusUnauthorized, r.Status, "a disabled user: %s", r.Body)
}

// member is the JSON of the envelope's member at path.
func member(t *testing.T, r *testsuite.Response, path string) string {
	t.Helper()
	v, ok := r.Get(path)
	require.True(t, ok, "%s is missing from %s", path, r.Body)
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}
