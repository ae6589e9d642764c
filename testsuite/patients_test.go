package testsuite_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/app/auth"
	"github.com/rxgate/rxgate/testsuite"
)

// Patient members (spec 2.3, 4.1).
var (
	// patientMembers are every member of spec 2.3.
	patientMembers = []string{
		"family_name", "given_name", "date_of_birth", "sex", "title", "phone", "email", "ctg_eligible",
		"indigenous_type", "concession_pension_number", "entitlement_number", "ihi_number", "racf_id",
		"is_inpatient", "medicare_card_number", "medicare_irn", "medicare_valid_to", "dva_file_number",
		"dva_card_color", "australian_address",
	}
	// updateAnswerMembers are the members spec 4.1 shows in the update's
	// answer; every answer holds them.
	updateAnswerMembers = []string{
		"patient_id", "family_name", "given_name", "date_of_birth", "sex", "phone", "email",
		"medicare_card_number", "medicare_irn", "medicare_valid_to",
	}
)

// fullPatient is a valid body setting every member of spec 2.3.
func fullPatient() map[string]any {
	return map[string]any{
		"family_name": "Citizen", "given_name": "Jane", "date_of_birth": "1980-06-15", "sex": "F", "title": "Ms",
		"phone": "+61412345678", "email": "jane.citizen@example.test", "ctg_eligible": true, "indigenous_type": "Neither",
		"concession_pension_number": "123456789A", "entitlement_number": "E123", "ihi_number": "8003608166690503",
		"racf_id": "R1", "is_inpatient": false, "medicare_card_number": "2123456701", "medicare_irn": "1",
		"medicare_valid_to": "2027-05-31", "dva_file_number": "NX123456", "dva_card_color": "G",
		"australian_address": map[string]any{
			"street_number": "12A", "street_name": "Collins Street", "suburb": "Melbourne", "state": "VIC", "postcode": "3000",
		},
	}
}

// minimalPatient is a valid body with only the four members a create
// requires.
func minimalPatient() map[string]any {
	return map[string]any{"family_name": "Citizen", "given_name": "Jane", "date_of_birth": "1980-06-15", "sex": "F"}
}

// partnerPatientsPath is the partner path of user's patients (user is a
// role or an id).
func partnerPatientsPath(tn *testsuite.Tenant, user string) string {
	return "/v1/organizations/" + tn.OrgID + "/users/" + tn.UserID(user) + "/patients"
}

// partnerPatientPath is the partner path of one patient of user.
func partnerPatientPath(tn *testsuite.Tenant, user, patientID string) string {
	return partnerPatientsPath(tn, user) + "/" + patientID
}

// adminPatientPath is the operator path of one patient of user.
func adminPatientPath(tn *testsuite.Tenant, user, patientID string) string {
	return tn.UserPath(user) + "/patients/" + patientID
}

// newPatient creates a patient of user through the operator API with the
// given members (fullPatient when nil) and returns its id.
func newPatient(t testing.TB, env *testsuite.Env, tn *testsuite.Tenant, user string, members map[string]any) string {
	t.Helper()
	if members == nil {
		members = fullPatient()
	}
	r := env.MustAdmin(t, http.MethodPost, tn.UserPath(user)+"/patients", members, http.StatusCreated)
	return r.String(t, "data.patient_id")
}

// storedPatient reads a patient through the operator API and returns its
// data object.
func storedPatient(t testing.TB, env *testsuite.Env, tn *testsuite.Tenant, user, patientID string) map[string]any {
	t.Helper()
	r := env.MustAdmin(t, http.MethodGet, adminPatientPath(tn, user, patientID), nil, http.StatusOK)
	return dataObject(t, r)
}

// dataObject returns the envelope's data member, which must be an object.
func dataObject(t testing.TB, r *testsuite.Response) map[string]any {
	t.Helper()
	v, ok := r.Get("data")
	require.True(t, ok, "no data in %s", r.Body)
	m, ok := v.(map[string]any)
	require.True(t, ok, "data is %T, not an object, in %s", v, r.Body)
	return m
}

// asJSON is v as encoding/json decodes it into an any (numbers become
// float64, maps map[string]any), to compare with decoded bodies.
func asJSON(t testing.TB, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	var out any
	require.NoError(t, json.Unmarshal(b, &out))
	return out
}

// patched is start with body applied as a partial update: supplied members
// replace, null removes; then fix (values the server normalizes) applies.
func patched(start, body, fix map[string]any) map[string]any {
	out := make(map[string]any, len(start)+len(body))
	for _, m := range []map[string]any{start, body, fix} {
		for k, v := range m {
			if v == nil {
				delete(out, k)
				continue
			}
			out[k] = v
		}
	}
	return out
}

// assertPatientMembers asserts that data holds want's value for every
// member of spec 2.3 that want sets, and no value (absent or null) for the
// others.
func assertPatientMembers(t testing.TB, data, want map[string]any) {
	t.Helper()
	for _, m := range patientMembers {
		got, present := data[m]
		w, ok := want[m]
		if !ok {
			assert.True(t, !present || got == nil, "%s is %v, want it unset", m, got)
			continue
		}
		assert.Equal(t, asJSON(t, w), got, "member %s", m)
	}
}

// verifications returns the demographic_verifications of an operator read.
func verifications(t testing.TB, data map[string]any) []map[string]any {
	t.Helper()
	v, ok := data["demographic_verifications"]
	require.True(t, ok, "the operator read has no demographic_verifications: %v", data)
	list, ok := v.([]any)
	require.True(t, ok || v == nil, "demographic_verifications is %T, not an array", v)
	out := make([]map[string]any, 0, len(list))
	for i, item := range list {
		m, ok := item.(map[string]any)
		require.True(t, ok, "demographic_verifications[%d] is %T, not an object", i, item)
		out = append(out, m)
	}
	return out
}

// assertVerification asserts that v is a pending verification request
// with a requested_at date-time, naming fields when it names any.
func assertVerification(t testing.TB, v map[string]any, fields []string) {
	t.Helper()
	assert.Equal(t, "pending", v["status"], "verification %v", v)
	at, _ := v["requested_at"].(string)
	_, err := time.Parse(time.RFC3339Nano, at)
	assert.NoError(t, err, "requested_at %v is not a date-time", v["requested_at"])
	if named, ok := v["fields"]; ok {
		assert.ElementsMatch(t, asJSON(t, fields), named, "the verification names the changed members")
	}
}

// scopesExcept is every partner scope but the given ones.
func scopesExcept(scopes ...string) []string {
	return slices.DeleteFunc(slices.Clone(auth.PartnerScopes), func(s string) bool { return slices.Contains(scopes, s) })
}

// fieldsExactly returns a Check that error.validation names exactly fields.
func fieldsExactly(fields ...string) func(testing.TB, *testsuite.Response) {
	return func(t testing.TB, r *testsuite.Response) {
		t.Helper()
		assert.ElementsMatch(t, fields, r.ValidationFields(), "error.validation: %s", r.Body)
	}
}

// detailNames returns a Check that error.detail mentions s.
func detailNames(s string) func(testing.TB, *testsuite.Response) {
	return func(t testing.TB, r *testsuite.Response) {
		t.Helper()
		v, _ := r.Get("error.detail")
		detail, _ := v.(string)
		assert.Contains(t, detail, s, "error.detail")
	}
}

// runParallel runs each scenario as a parallel subtest of t and returns
// when all have finished. The scenarios must not depend on one another.
func runParallel(t *testing.T, env *testsuite.Env, scenarios []testsuite.Scenario) {
	t.Helper()
	t.Run("group", func(t *testing.T) {
		for _, sc := range scenarios {
			t.Run(sc.Name, func(t *testing.T) {
				t.Parallel()
				testsuite.RunScenario(t, env, sc)
			})
		}
	})
}

// TestPatientUpdate checks successful updates (spec 4.1): the answer and
// the stored patient hold exactly the supplied members changed, null clears
// a nullable member, and a demographic change records one pending
// verification request while an update that leaves the demographics equal
// records none.
func TestPatientUpdate(t *testing.T) {
	t.Parallel()
	env := testsuite.Start(t)
	tn := env.NewTenant(t)
	token := tn.Token(t, testsuite.RolePrescriber)
	sydney := map[string]any{"street_number": "9", "street_name": "George Street", "suburb": "Sydney", "state": "NSW", "postcode": "2000"}

	tests := []struct {
		name  string
		start map[string]any // the patient before; fullPatient when nil
		body  map[string]any
		fix   map[string]any // stored values that differ from what was sent
		// verified are the members a verification request names; nil
		// when the update must record none.
		verified []string
	}{
		{name: "one member changes, every other stays", body: map[string]any{"phone": "0312345678"}},
		{name: "several members change, every other stays", body: map[string]any{
			"title": "Dr", "email": "jane.new@example.test", "ctg_eligible": false, "is_inpatient": true,
			"indigenous_type": "Prefer not to say", "concession_pension_number": "C-2", "entitlement_number": "E-2",
			"ihi_number": "8003608166690511", "racf_id": "R2", "medicare_card_number": "3123456701", "medicare_valid_to": "2028-01-31",
		}},
		{name: "phone in international form", body: map[string]any{"phone": "61312345678"}},
		{name: "null clears every nullable member", body: map[string]any{
			"ihi_number": nil, "medicare_card_number": nil, "medicare_irn": nil, "medicare_valid_to": nil,
			"dva_file_number": nil, "dva_card_color": nil,
		}},
		{name: "null clears one nullable member, the others stay", body: map[string]any{"ihi_number": nil}},
		{name: "medicare_irn is stored trimmed", body: map[string]any{"medicare_irn": "  2 "}, fix: map[string]any{"medicare_irn": "2"}},
		{name: "australian_address is replaced whole", body: map[string]any{"australian_address": sydney}},
		{name: "members set on a patient that had none", start: minimalPatient(), body: map[string]any{
			"phone": "0412345678", "dva_card_color": "W", "dva_file_number": "QX1", "australian_address": sydney,
			"medicare_irn": "3", "medicare_valid_to": "2029-12-31",
		}},
		{name: "empty object changes nothing", body: map[string]any{}},
		{name: "demographics re-sent equal", body: map[string]any{
			"family_name": "Citizen", "given_name": "Jane", "date_of_birth": "1980-06-15", "sex": "F",
		}},
		{name: "demographics re-sent equal beside other members", body: map[string]any{
			"family_name": "Citizen", "sex": "F", "email": "jane.other@example.test",
		}},
		{name: "family_name changed", body: map[string]any{"family_name": "Smith"}, verified: []string{"family_name"}},
		{name: "given_name changed", body: map[string]any{"given_name": "Janet"}, verified: []string{"given_name"}},
		{name: "given_name changed in case only", body: map[string]any{"given_name": "JANE"}, verified: []string{"given_name"}},
		{name: "date_of_birth changed", body: map[string]any{"date_of_birth": "1980-06-16"}, verified: []string{"date_of_birth"}},
		{name: "sex changed", body: map[string]any{"sex": "N"}, verified: []string{"sex"}},
		{name: "all four demographics changed", body: map[string]any{
			"family_name": "Smith", "given_name": "John", "date_of_birth": "1979-01-01", "sex": "M",
		}, verified: []string{"family_name", "given_name", "date_of_birth", "sex"}},
		{name: "one demographic changed, one re-sent equal, one other member", body: map[string]any{
			"given_name": "Janet", "family_name": "Citizen", "phone": "0312345678",
		}, verified: []string{"given_name"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			start := tt.start
			if start == nil {
				start = fullPatient()
			}
			id := newPatient(t, env, tn, testsuite.RolePrescriber, start)
			want := patched(start, tt.body, tt.fix)

			r := env.Do(t, testsuite.Request{Method: http.MethodPut, URL: partnerPatientPath(tn, testsuite.RolePrescriber, id),
				Token: token, Headers: tn.Headers(), Body: tt.body})
			require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)
			env.CheckEnvelope(t, r)
			message, _ := r.Get("message")
			assert.Contains(t, strings.ToLower(fmt.Sprint(message)), "updated", "the message states the patient was updated")
			data := dataObject(t, r)
			assert.Equal(t, id, data["patient_id"])
			for _, m := range updateAnswerMembers {
				assert.Contains(t, data, m, "the answer holds every member spec 4.1 shows")
			}
			assertPatientMembers(t, data, want)

			stored := storedPatient(t, env, tn, testsuite.RolePrescriber, id)
			assertPatientMembers(t, stored, want)
			got := verifications(t, stored)
			if tt.verified == nil {
				assert.Empty(t, got, "an update that leaves the demographics equal records no verification")
				return
			}
			require.Len(t, got, 1, "a demographic change records one verification request")
			assertVerification(t, got[0], tt.verified)
		})
	}
}

// TestPatientUpdateVerificationsAccumulate checks that each demographic
// change adds a request to those already recorded, and that updates
// leaving the demographics equal add none.
func TestPatientUpdateVerificationsAccumulate(t *testing.T) {
	t.Parallel()
	env := testsuite.Start(t)
	tn := env.NewTenant(t)
	token := tn.Token(t, testsuite.RolePrescriber)
	path := partnerPatientPath(tn, testsuite.RolePrescriber, tn.PatientID)

	steps := []struct {
		body     map[string]any
		wantLen  int
		verified []string // of the newest entry, when it is new
	}{
		{body: map[string]any{"phone": "0312345678"}, wantLen: 0},
		{body: map[string]any{"given_name": "Charlie"}, wantLen: 1, verified: []string{"given_name"}},
		{body: map[string]any{"given_name": "Charlie"}, wantLen: 1},
		{body: map[string]any{"sex": "N", "given_name": "Charlie"}, wantLen: 2, verified: []string{"sex"}},
		{body: map[string]any{"given_name": "Charlotte", "family_name": "Wilson", "date_of_birth": "1984-07-19"}, wantLen: 3,
			verified: []string{"given_name"}},
		{body: map[string]any{"email": "c.wilson@example.test", "sex": "N"}, wantLen: 3},
	}
	for i, st := range steps {
		r := env.Do(t, testsuite.Request{Method: http.MethodPut, URL: path, Token: token, Headers: tn.Headers(), Body: st.body})
		require.Equal(t, http.StatusOK, r.Status, "step %d: %s", i, r.Body)
		got := verifications(t, storedPatient(t, env, tn, testsuite.RolePrescriber, tn.PatientID))
		require.Len(t, got, st.wantLen, "step %d (%v)", i, st.body)
		if st.verified != nil {
			assertVerification(t, got[len(got)-1], st.verified)
		}
	}
}

// TestPatientUpdateRefused checks every refusal of the update (spec 4.1,
// 5, 7): 400, 401, 403, 404, 415 and 422, each with its slug. Every body
// would change the patient if it were accepted; afterwards the patient is
// unchanged.
func TestPatientUpdateRefused(t *testing.T) {
	t.Parallel()
	env := testsuite.Start(t)
	tn, other := env.NewTenant(t), env.NewTenant(t)
	ownersPatient := newPatient(t, env, tn, testsuite.RoleOwner, nil)
	prescriber := tn.Token(t, testsuite.RolePrescriber)
	noScope := tn.Token(t, testsuite.RolePrescriber, scopesExcept("update:patient")...)
	admin := tn.Token(t, testsuite.RoleAdmin)
	owner := tn.Token(t, testsuite.RoleOwner)
	member := tn.Token(t, testsuite.RoleMember)
	otherToken := other.Token(t, testsuite.RolePrescriber)
	otherOwner := other.Token(t, testsuite.RoleOwner)

	path := partnerPatientPath(tn, testsuite.RolePrescriber, tn.PatientID)
	secret := tn.Headers()
	wrongSecret := map[string]string{testsuite.HeaderOrganizationSecret: "wrong-" + tn.OrgSecret}
	change := map[string]any{"title": "Mallory", "phone": "0399999999"}
	with := func(m map[string]any) map[string]any { return merge(change, m) }
	const unprocessable = http.StatusUnprocessableEntity
	// Refusals of another tenant must not show the patient.
	hidden := []string{"Charlotte", "Wilson", "0412345678"}

	tests := []testsuite.Scenario{
		{Name: "400 malformed JSON", Body: `{"title":"Mallory"`, Status: http.StatusBadRequest},
		{Name: "400 JSON followed by garbage", Body: `{"title":"Mallory"} x`, Status: http.StatusBadRequest},
		{Name: "400 array body", Body: `[{"title":"Mallory"}]`, Status: http.StatusBadRequest},
		{Name: "400 string body", Body: `"Mallory"`, Status: http.StatusBadRequest},
		{Name: "400 number body", Body: `42`, Status: http.StatusBadRequest},
		{Name: "400 null body", Body: `null`, Status: http.StatusBadRequest},

		{Name: "401 no token", Token: "-", Status: http.StatusUnauthorized, Slug: slugAuth, NotContains: hidden},
		{Name: "401 token that is not a JWT", Token: "not-a-token", Status: http.StatusUnauthorized, Slug: slugAuth, NotContains: hidden},
		{Name: "401 tampered token", Token: prescriber[:len(prescriber)-4] + "AAAA", Status: http.StatusUnauthorized, Slug: slugAuth},
		{Name: "401 wrong organization secret", Headers: wrongSecret, Status: http.StatusUnauthorized, Slug: slugAuth, NotContains: hidden},
		{Name: "401 no organization secret", Headers: map[string]string{}, Status: http.StatusUnauthorized, Slug: slugAuth, NotContains: hidden},
		{Name: "401 another tenant's token and secret", Token: otherToken, Headers: other.Headers(),
			Status: http.StatusUnauthorized, Slug: slugAuth, NotContains: hidden},
		{Name: "401 another tenant's owner token and secret", Token: otherOwner, Headers: other.Headers(),
			Status: http.StatusUnauthorized, Slug: slugAuth, NotContains: hidden},
		{Name: "401 another tenant's token with this organization's secret", Token: otherToken,
			Status: http.StatusUnauthorized, Slug: slugAuth, NotContains: hidden},

		{Name: "403 token without update:patient", Token: noScope, Status: http.StatusForbidden, Slug: "insufficient-scope",
			Check: func(t testing.TB, r *testsuite.Response) {
				detailNames("update:patient")(t, r)
				assert.Equal(t, "Insufficient permissions", r.String(t, "error.title"))
			}},
		{Name: "403 prescriber token on another user's patient", Path: partnerPatientPath(tn, testsuite.RoleOwner, ownersPatient),
			Status: http.StatusForbidden},
		{Name: "403 member token on the prescriber's patient", Token: member, Status: http.StatusForbidden, NotContains: hidden},

		{Name: "404 unknown patient", Path: partnerPatientPath(tn, testsuite.RolePrescriber, uuid.NewString()),
			Status: http.StatusNotFound, Slug: "patient-not-found"},
		{Name: "404 patient id that is not a uuid", Path: partnerPatientPath(tn, testsuite.RolePrescriber, "not-a-uuid"),
			Status: http.StatusNotFound, Slug: "patient-not-found"},
		{Name: "404 user id that is not a uuid, admin token", Token: admin,
			Path: "/v1/organizations/" + tn.OrgID + "/users/not-a-uuid/patients/" + tn.PatientID, Status: http.StatusNotFound, Slug: "patient-not-found"},
		{Name: "404 another user's patient through an admin token", Token: admin,
			Path: partnerPatientPath(tn, testsuite.RoleAdmin, tn.PatientID), Status: http.StatusNotFound, Slug: "patient-not-found"},
		{Name: "404 another user's patient under the prescriber's own path",
			Path: partnerPatientPath(tn, testsuite.RolePrescriber, ownersPatient), Status: http.StatusNotFound, Slug: "patient-not-found"},
		{Name: "404 another organization's patient through an owner token", Token: owner,
			Path:   partnerPatientPath(tn, other.Users[testsuite.RolePrescriber], other.PatientID),
			Status: http.StatusNotFound, Slug: "patient-not-found", NotContains: hidden},

		{Name: "415 text/plain", Headers: merge(secret, map[string]string{"Content-Type": "text/plain"}),
			Status: http.StatusUnsupportedMediaType, Slug: "unsupported-media-type"},
		{Name: "415 form", Body: "title=Mallory", Headers: merge(secret, map[string]string{"Content-Type": "application/x-www-form-urlencoded"}),
			Status: http.StatusUnsupportedMediaType, Slug: "unsupported-media-type"},

		{Name: "422 several bad members, each named", Body: with(map[string]any{
			"phone": "04-1234-5678", "sex": "X", "email": "not-an-email", "ihi_number": "123", "medicare_irn": "1a",
			"date_of_birth": "2023-02-30", "medicare_valid_to": "31/12/2027", "indigenous_type": "Maybe", "dva_card_color": "B",
			"dva_file_number":    "NX1",
			"australian_address": map[string]any{"street_number": "1", "street_name": "Collins Street", "suburb": "Melbourne", "state": "VIC", "postcode": "12a4"},
		}), Status: unprocessable, Slug: "validation-error", Check: func(t testing.TB, r *testsuite.Response) {
			fieldsExactly("phone", "sex", "email", "ihi_number", "medicare_irn", "date_of_birth", "medicare_valid_to",
				"indigenous_type", "dva_card_color", "australian_address.postcode")(t, r)
			assert.Equal(t, "Validation failed", r.String(t, "error.title"))
			assert.Equal(t, "There were some problems with your input.", r.String(t, "error.detail"))
		}},
		{Name: "422 nested address members by path", Body: with(map[string]any{
			"australian_address": map[string]any{"street_number": "1234567890123", "street_name": "", "suburb": strings.Repeat("x", 101),
				"state": "Victoria", "postcode": "30000"},
		}), Status: unprocessable, Slug: "validation-error", Check: fieldsExactly("australian_address.street_number",
			"australian_address.street_name", "australian_address.suburb", "australian_address.state", "australian_address.postcode")},
		{Name: "422 incomplete address", Body: with(map[string]any{"australian_address": map[string]any{"street_name": "Collins Street"}}),
			Status: unprocessable, Check: fieldsExactly("australian_address.street_number", "australian_address.suburb",
				"australian_address.state", "australian_address.postcode")},
		{Name: "422 wrong JSON types", Body: with(map[string]any{
			"given_name": 42, "ctg_eligible": "true", "is_inpatient": "no", "sex": []string{"M"}, "phone": map[string]any{"n": "0412345678"},
			"australian_address": map[string]any{"street_number": 1, "street_name": "Collins Street", "suburb": "Melbourne", "state": "VIC", "postcode": 3000},
		}), Status: unprocessable, Slug: "validation-error", Check: fieldsExactly("given_name", "ctg_eligible", "is_inpatient", "sex", "phone",
			"australian_address.street_number", "australian_address.postcode")},
		{Name: "422 australian_address not an object", Body: with(map[string]any{"australian_address": "12 Collins Street"}),
			Status: unprocessable, Check: fieldsExactly("australian_address")},
		{Name: "422 unknown member", Body: with(map[string]any{"foo": 1}), Status: unprocessable, Slug: "validation-error",
			Check: fieldsExactly("foo")},
		{Name: "422 ids are not updatable members", Body: with(map[string]any{"patient_id": uuid.NewString(), "partner_patient_id": "pp-x"}),
			Status: unprocessable, Check: fieldsExactly("patient_id", "partner_patient_id")},
		{Name: "422 member name in another case", Body: with(map[string]any{"Given_Name": "Mallory"}), Status: unprocessable,
			Check: fieldsExactly("Given_Name")},
		{Name: "422 null for members that are not nullable", Body: with(map[string]any{"given_name": nil, "sex": nil, "australian_address": nil}),
			Status: unprocessable, Check: fieldsExactly("given_name", "sex", "australian_address")},
		{Name: "422 dva_card_color without dva_file_number", Body: with(map[string]any{"dva_card_color": "W"}), Status: unprocessable,
			Slug: "validation-error", Check: fieldsExactly("dva_file_number")},
		{Name: "422 date_of_birth in the future", Body: with(map[string]any{"date_of_birth": time.Now().AddDate(1, 0, 0).Format("2006-01-02")}),
			Status: unprocessable, Check: fieldsExactly("date_of_birth")},
		{Name: "422 invalid members beside valid ones", Body: with(map[string]any{"given_name": "Mallory", "phone": "0123456789"}),
			Status: unprocessable, Check: fieldsExactly("phone")},
	}
	// Defaults: the path above, the prescriber's token (Token "-" sends
	// none) and this organization's secret.
	scenarioDefaults(tests, http.MethodPut, path, prescriber, secret, change)
	runParallel(t, env, tests)

	// Nothing refused changed anything.
	stored := storedPatient(t, env, tn, testsuite.RolePrescriber, tn.PatientID)
	assert.Equal(t, "Charlotte", stored["given_name"])
	assert.Equal(t, "0412345678", stored["phone"])
	assert.NotContains(t, stored, "title")
	assert.Empty(t, verifications(t, stored))
	assert.Equal(t, "Ms", storedPatient(t, env, tn, testsuite.RoleOwner, ownersPatient)["title"])
	otherStored := storedPatient(t, env, other, testsuite.RolePrescriber, other.PatientID)
	assert.NotContains(t, otherStored, "title")
	assert.Equal(t, "0412345678", otherStored["phone"])
}

// TestPatientUpdateByManager checks that an owner or admin token may
// update a patient of another user of the organization.
func TestPatientUpdateByManager(t *testing.T) {
	t.Parallel()
	env := testsuite.Start(t)
	tn := env.NewTenant(t)
	tests := []struct {
		name string
		role string
	}{
		{name: "owner", role: testsuite.RoleOwner},
		{name: "admin", role: testsuite.RoleAdmin},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			id := newPatient(t, env, tn, testsuite.RolePrescriber, nil)
			r := env.Do(t, testsuite.Request{Method: http.MethodPut, URL: partnerPatientPath(tn, testsuite.RolePrescriber, id),
				Token: tn.Token(t, tt.role), Headers: tn.Headers(), Body: map[string]any{"phone": "0298765432"}})
			require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)
			assert.Equal(t, "0298765432", storedPatient(t, env, tn, testsuite.RolePrescriber, id)["phone"])
		})
	}
}

// TestPatientUpdateDVA checks the dva_card_color rule (spec 4.1 rule 2, 7.3)
// against what is already stored. docs/api.md's choice: dva_card_color
// needs dva_file_number in the same request even when one is stored.
// Whatever an update does, the stored patient never holds a card color
// without a file number.
func TestPatientUpdateDVA(t *testing.T) {
	t.Parallel()
	env := testsuite.Start(t)
	tn := env.NewTenant(t)
	token := tn.Token(t, testsuite.RolePrescriber)
	withDVA := fullPatient() // G and NX123456

	tests := []struct {
		name       string
		start      map[string]any
		body       map[string]any
		status     int
		wantFields []string
		wantFile   any // the stored dva_file_number, nil when unset
		wantColor  any
	}{
		{name: "color without file, none stored", start: minimalPatient(), body: map[string]any{"dva_card_color": "W"},
			status: http.StatusUnprocessableEntity, wantFields: []string{"dva_file_number"}},
		{name: "color with a null file", start: minimalPatient(), body: map[string]any{"dva_card_color": "W", "dva_file_number": nil},
			status: http.StatusUnprocessableEntity, wantFields: []string{"dva_file_number"}},
		{name: "color with a blank file", start: minimalPatient(), body: map[string]any{"dva_card_color": "W", "dva_file_number": "  "},
			status: http.StatusUnprocessableEntity, wantFields: []string{"dva_file_number"}},
		{name: "color with a file", start: minimalPatient(), body: map[string]any{"dva_card_color": "O", "dva_file_number": "QX9"},
			status: http.StatusOK, wantFile: "QX9", wantColor: "O"},
		{name: "file without color", start: minimalPatient(), body: map[string]any{"dva_file_number": "QX9"},
			status: http.StatusOK, wantFile: "QX9"},
		{name: "color without file, one stored (docs/api.md: same request)", start: withDVA, body: map[string]any{"dva_card_color": "W"},
			status: http.StatusUnprocessableEntity, wantFields: []string{"dva_file_number"}, wantFile: "NX123456", wantColor: "G"},
		{name: "new file, color stays", start: withDVA, body: map[string]any{"dva_file_number": "NX999"},
			status: http.StatusOK, wantFile: "NX999", wantColor: "G"},
		{name: "both cleared", start: withDVA, body: map[string]any{"dva_file_number": nil, "dva_card_color": nil}, status: http.StatusOK},
		{name: "color cleared, file stays", start: withDVA, body: map[string]any{"dva_card_color": nil},
			status: http.StatusOK, wantFile: "NX123456"},
		{name: "file cleared while the stored color stays", start: withDVA, body: map[string]any{"dva_file_number": nil},
			status: http.StatusUnprocessableEntity, wantFields: []string{"dva_file_number"}, wantFile: "NX123456", wantColor: "G"},
		{name: "file cleared beside another bad member: both named at once", start: withDVA,
			body: map[string]any{"dva_file_number": nil, "phone": "0123456789"}, status: http.StatusUnprocessableEntity,
			wantFields: []string{"dva_file_number", "phone"}, wantFile: "NX123456", wantColor: "G"},
		{name: "file blanked while the stored color stays", start: withDVA, body: map[string]any{"dva_file_number": ""},
			status: http.StatusUnprocessableEntity, wantFields: []string{"dva_file_number"}, wantFile: "NX123456", wantColor: "G"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			id := newPatient(t, env, tn, testsuite.RolePrescriber, tt.start)
			r := env.Do(t, testsuite.Request{Method: http.MethodPut, URL: partnerPatientPath(tn, testsuite.RolePrescriber, id),
				Token: token, Headers: tn.Headers(), Body: tt.body})
			env.CheckEnvelope(t, r)
			assert.Equal(t, tt.status, r.Status, "body: %s", r.Body)
			if tt.wantFields != nil {
				assert.ElementsMatch(t, tt.wantFields, r.ValidationFields(), "body: %s", r.Body)
			}
			stored := storedPatient(t, env, tn, testsuite.RolePrescriber, id)
			assert.Equal(t, tt.wantFile, stored["dva_file_number"], "stored dva_file_number")
			assert.Equal(t, tt.wantColor, stored["dva_card_color"], "stored dva_card_color")
			if color, ok := stored["dva_card_color"]; ok && color != nil {
				file, _ := stored["dva_file_number"].(string)
				assert.NotEmpty(t, strings.TrimSpace(file), "a stored dva_card_color without a dva_file_number")
			}
		})
	}
}

// TestPatientUpdateConcurrent checks that concurrent updates of different
// members of one patient both survive, and never answer 500: transaction
// conflicts are retried.
func TestPatientUpdateConcurrent(t *testing.T) {
	t.Parallel()
	env := testsuite.Start(t)
	tn := env.NewTenant(t)
	token := tn.Token(t, testsuite.RolePrescriber)

	// put sends the bodies at once and requires 200 for each.
	put := func(t *testing.T, path string, bodies []map[string]any) {
		t.Helper()
		start := make(chan struct{})
		statuses := make([]int, len(bodies))
		answers := make([][]byte, len(bodies))
		var wg sync.WaitGroup
		for i, body := range bodies {
			wg.Go(func() {
				<-start
				r := env.Do(t, testsuite.Request{Method: http.MethodPut, URL: path, Token: token, Headers: tn.Headers(), Body: body})
				statuses[i], answers[i] = r.Status, r.Body
			})
		}
		close(start)
		wg.Wait()
		for i := range bodies {
			require.Equal(t, http.StatusOK, statuses[i], "update %v: %s", bodies[i], answers[i])
		}
	}

	t.Run("phone and email, 20 rounds", func(t *testing.T) {
		t.Parallel()
		id := newPatient(t, env, tn, testsuite.RolePrescriber, nil)
		path := partnerPatientPath(tn, testsuite.RolePrescriber, id)
		for round := range 20 {
			phone, email := fmt.Sprintf("04%08d", round), fmt.Sprintf("round%d@example.test", round)
			put(t, path, []map[string]any{{"phone": phone}, {"email": email}})
			stored := storedPatient(t, env, tn, testsuite.RolePrescriber, id)
			require.Equal(t, phone, stored["phone"], "round %d: the phone update was lost", round)
			require.Equal(t, email, stored["email"], "round %d: the email update was lost", round)
		}
	})

	t.Run("twelve members at once", func(t *testing.T) {
		t.Parallel()
		id := newPatient(t, env, tn, testsuite.RolePrescriber, nil)
		bodies := []map[string]any{
			{"title": "Prof"}, {"phone": "0298765432"}, {"email": "all.at.once@example.test"}, {"ctg_eligible": false},
			{"indigenous_type": "Both"}, {"concession_pension_number": "C-9"}, {"entitlement_number": "E-9"},
			{"ihi_number": "8003608166690599"}, {"racf_id": "R9"}, {"is_inpatient": true}, {"medicare_card_number": "9123456701"},
			{"medicare_valid_to": "2030-01-31"},
		}
		put(t, partnerPatientPath(tn, testsuite.RolePrescriber, id), bodies)
		want := fullPatient()
		for _, b := range bodies {
			want = patched(want, b, nil)
		}
		assertPatientMembers(t, storedPatient(t, env, tn, testsuite.RolePrescriber, id), want)
	})
}

// TestPatientCreate checks the partner's patient create (beyond the spec):
// 201 with every member set, 409 on a partner_patient_id taken in the
// organization, 422 on missing demographics, 403 without create:patient.
func TestPatientCreate(t *testing.T) {
	t.Parallel()
	env := testsuite.Start(t)
	tn, other := env.NewTenant(t), env.NewTenant(t)
	prescriber := tn.Token(t, testsuite.RolePrescriber)
	noScope := tn.Token(t, testsuite.RolePrescriber, scopesExcept("create:patient")...)
	owner := tn.Token(t, testsuite.RoleOwner)
	path := partnerPatientsPath(tn, testsuite.RolePrescriber)
	secret := tn.Headers()
	ppid := testsuite.Unique("ext-")

	full := merge(fullPatient(), map[string]any{"partner_patient_id": ppid, "medicare_irn": " 7 "})
	without := func(member string) map[string]any {
		m := minimalPatient()
		delete(m, member)
		return m
	}
	// createdAs returns a Check that the answer and the operator's read
	// hold want (with patient_id assigned and no verification recorded).
	createdAs := func(user string, want map[string]any) func(testing.TB, *testsuite.Response) {
		return func(t testing.TB, r *testsuite.Response) {
			t.Helper()
			id := isUUID(t, r, "data.patient_id")
			assertPatientMembers(t, dataObject(t, r), want)
			stored := storedPatient(t, env, tn, user, id)
			assertPatientMembers(t, stored, want)
			assert.Empty(t, verifications(t, stored), "a create records no verification")
			if p, ok := want["partner_patient_id"]; ok {
				assert.Equal(t, p, r.String(t, "data.partner_patient_id"))
				assert.Equal(t, p, stored["partner_patient_id"])
			}
		}
	}

	tests := []testsuite.Scenario{
		{Name: "201 every member", Body: full, Status: http.StatusCreated,
			Check: createdAs(testsuite.RolePrescriber, merge(full, map[string]any{"medicare_irn": "7"}))},
		{Name: "201 the four required members", Body: minimalPatient(), Status: http.StatusCreated,
			Check: createdAs(testsuite.RolePrescriber, minimalPatient())},
		{Name: "201 an owner token for the prescriber", Token: owner, Body: minimalPatient(), Status: http.StatusCreated,
			Check: createdAs(testsuite.RolePrescriber, minimalPatient())},
		{Name: "409 partner_patient_id repeated", Body: merge(minimalPatient(), map[string]any{"partner_patient_id": ppid}),
			Status: http.StatusConflict, Slug: "conflict"},
		{Name: "409 partner_patient_id repeated under another user of the organization", Token: owner,
			Path: partnerPatientsPath(tn, testsuite.RoleOwner), Body: merge(minimalPatient(), map[string]any{"partner_patient_id": ppid}),
			Status: http.StatusConflict, Slug: "conflict"},
		{Name: "201 the same partner_patient_id in another organization", Token: other.Token(t, testsuite.RolePrescriber),
			Headers: other.Headers(), Path: partnerPatientsPath(other, testsuite.RolePrescriber),
			Body: merge(minimalPatient(), map[string]any{"partner_patient_id": ppid}), Status: http.StatusCreated},

		{Name: "422 family_name missing", Body: without("family_name"), Status: http.StatusUnprocessableEntity,
			Slug: "validation-error", Check: fieldsExactly("family_name")},
		{Name: "422 given_name missing", Body: without("given_name"), Status: http.StatusUnprocessableEntity, Check: fieldsExactly("given_name")},
		{Name: "422 date_of_birth missing", Body: without("date_of_birth"), Status: http.StatusUnprocessableEntity, Check: fieldsExactly("date_of_birth")},
		{Name: "422 sex missing", Body: without("sex"), Status: http.StatusUnprocessableEntity, Check: fieldsExactly("sex")},
		{Name: "422 empty object", Body: map[string]any{}, Status: http.StatusUnprocessableEntity,
			Check: fieldsExactly("family_name", "given_name", "date_of_birth", "sex")},
		{Name: "422 required members null or blank", Body: map[string]any{"family_name": " ", "given_name": nil, "date_of_birth": "", "sex": nil},
			Status: http.StatusUnprocessableEntity, Check: fieldsExactly("family_name", "given_name", "date_of_birth", "sex")},
		{Name: "422 the update's rules apply", Body: merge(minimalPatient(), map[string]any{"phone": "0412-345-678", "dva_card_color": "G", "foo": 1}),
			Status: http.StatusUnprocessableEntity, Check: fieldsExactly("phone", "dva_file_number", "foo")},
		{Name: "422 patient_id is assigned, not supplied", Body: merge(minimalPatient(), map[string]any{"patient_id": uuid.NewString()}),
			Status: http.StatusUnprocessableEntity, Check: fieldsExactly("patient_id")},
		{Name: "422 partner_patient_id of the wrong type", Body: merge(minimalPatient(), map[string]any{"partner_patient_id": 1001}),
			Status: http.StatusUnprocessableEntity, Check: fieldsExactly("partner_patient_id")},

		{Name: "400 malformed JSON", Body: `{"family_name":`, Status: http.StatusBadRequest},
		{Name: "400 array body", Body: `[]`, Status: http.StatusBadRequest},
		{Name: "401 no token", Token: "-", Status: http.StatusUnauthorized, Slug: slugAuth},
		{Name: "401 wrong organization secret", Headers: map[string]string{testsuite.HeaderOrganizationSecret: "nope"},
			Status: http.StatusUnauthorized, Slug: slugAuth},
		{Name: "401 another tenant's token and secret", Token: other.Token(t, testsuite.RoleOwner), Headers: other.Headers(),
			Status: http.StatusUnauthorized, Slug: slugAuth},
		{Name: "403 token without create:patient", Token: noScope, Status: http.StatusForbidden, Slug: "insufficient-scope",
			Check: detailNames("create:patient")},
		{Name: "403 prescriber token for another user", Path: partnerPatientsPath(tn, testsuite.RoleOwner), Status: http.StatusForbidden},
		{Name: "415 text/plain", Headers: merge(secret, map[string]string{"Content-Type": "text/plain"}),
			Status: http.StatusUnsupportedMediaType, Slug: "unsupported-media-type"},
	}
	scenarioDefaults(tests, http.MethodPost, path, prescriber, secret, minimalPatient())
	// In order: the conflicts need the first create.
	testsuite.RunScenarios(t, env, tests)
}

// scenarioDefaults fills what each scenario leaves unset: the method, the
// path, the token (Token "-" sends none), the headers and the body.
func scenarioDefaults(tests []testsuite.Scenario, method, path, token string, headers map[string]string, body any) {
	for i := range tests {
		sc := &tests[i]
		sc.Method = method
		if sc.Path == "" {
			sc.Path = path
		}
		switch sc.Token {
		case "":
			sc.Token = token
		case "-":
			sc.Token = ""
		}
		if sc.Headers == nil {
			sc.Headers = headers
		}
		if sc.Body == nil {
			sc.Body = body
		}
	}
}
