package testsuite_test

import (
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/app/auth"
	"github.com/rxgate/rxgate/config"
	"github.com/rxgate/rxgate/testsuite"
)

// fieldsInclude returns a Check that error.validation names every field.
func fieldsInclude(fields ...string) func(testing.TB, *testsuite.Response) {
	return func(t testing.TB, r *testsuite.Response) {
		t.Helper()
		assert.Subset(t, r.ValidationFields(), fields, "error.validation: %s", r.Body)
	}
}

// isUUID asserts that the string at path is a uuid.
func isUUID(t testing.TB, r *testsuite.Response, path string) string {
	t.Helper()
	s := r.String(t, path)
	_, err := uuid.Parse(s)
	assert.NoError(t, err, "%s = %q is not a uuid", path, s)
	return s
}

// TestOperatorPartners checks partner creation, listing and ids.
func TestOperatorPartners(t *testing.T) {
	t.Parallel()
	env := testsuite.Start(t)
	key, path := env.AdminKey, env.AdminPath("/admin/v1/partners")
	id := uuid.NewString()
	var secret string

	tests := []testsuite.Scenario{
		{Name: "create", Method: http.MethodPost, Path: path, Token: key, Body: map[string]any{"name": "Acme Health"},
			Status: http.StatusCreated, Check: func(t testing.TB, r *testsuite.Response) {
				isUUID(t, r, "data.partner_id")
				secret = r.String(t, "data.partner_secret")
				assert.GreaterOrEqual(t, len(secret), 32, "a partner secret has at least 32 characters")
				assert.Equal(t, "Acme Health", r.String(t, "data.name"))
			}},
		{Name: "create with a supplied uuid keeps it", Method: http.MethodPost, Path: path, Token: key,
			Body: map[string]any{"partner_id": id, "name": "Supplied"}, Status: http.StatusCreated,
			Check: func(t testing.TB, r *testsuite.Response) { assert.Equal(t, id, r.String(t, "data.partner_id")) }},
		{Name: "create with a supplied uuid already taken", Method: http.MethodPost, Path: path, Token: key,
			Body: map[string]any{"partner_id": id, "name": "Again"}, Status: http.StatusConflict, Slug: "conflict"},
		{Name: "create with a supplied id that is not a uuid", Method: http.MethodPost, Path: path, Token: key,
			Body: map[string]any{"partner_id": "acme", "name": "Bad"}, Status: http.StatusUnprocessableEntity,
			Slug: "validation-error", Check: fieldsInclude("partner_id")},
		{Name: "create without a name", Method: http.MethodPost, Path: path, Token: key, Body: map[string]any{},
			Status: http.StatusUnprocessableEntity, Slug: "validation-error", Check: fieldsInclude("name")},
		{Name: "create with a blank name", Method: http.MethodPost, Path: path, Token: key, Body: map[string]any{"name": "   "},
			Status: http.StatusUnprocessableEntity, Slug: "validation-error", Check: fieldsInclude("name")},
		{Name: "create with an unknown member", Method: http.MethodPost, Path: path, Token: key,
			Body: map[string]any{"name": "X", "partner_secret": "mine"}, Status: http.StatusUnprocessableEntity,
			Check: fieldsInclude("partner_secret")},
		{Name: "list never shows secrets", Path: path, Token: key, Status: http.StatusOK,
			NotContains: []string{"partner_secret", "secret_hash"},
			Check: func(t testing.TB, r *testsuite.Response) {
				require.NotEmpty(t, secret)
				assert.NotContains(t, string(r.Body), secret)
				var partners []map[string]any
				r.DecodeData(t, &partners)
				ids := make([]any, len(partners))
				for i, p := range partners {
					ids[i] = p["partner_id"]
					assert.NotContains(t, p, "partner_secret")
				}
				assert.Contains(t, ids, id)
			}},
	}
	testsuite.RunScenarios(t, env, tests)
}

// TestOperatorOrganizations checks organization creation, reading, listing
// and the allowed_scopes default.
func TestOperatorOrganizations(t *testing.T) {
	t.Parallel()
	env := testsuite.Start(t)
	key, path := env.AdminKey, env.AdminPath("/admin/v1/organizations")
	partner, _ := env.NewPartner(t)
	id := uuid.NewString()
	var secret string

	tests := []testsuite.Scenario{
		{Name: "create with the default scopes", Method: http.MethodPost, Path: path, Token: key,
			Body: map[string]any{"name": "Bondi Family Practice", "partner_id": partner}, Status: http.StatusCreated,
			Check: func(t testing.TB, r *testsuite.Response) {
				isUUID(t, r, "data.organization_id")
				secret = r.String(t, "data.organization_secret")
				assert.GreaterOrEqual(t, len(secret), 32)
				assert.Equal(t, partner, r.String(t, "data.partner_id"))
				assert.ElementsMatch(t, auth.PartnerScopes, r.Strings(t, "data.allowed_scopes"))
			}},
		{Name: "create with a supplied uuid and limited scopes", Method: http.MethodPost, Path: path, Token: key,
			Body:   map[string]any{"organization_id": id, "name": "Supplied", "partner_id": partner, "allowed_scopes": []string{"READ_USER"}},
			Status: http.StatusCreated, Check: func(t testing.TB, r *testsuite.Response) {
				assert.Equal(t, id, r.String(t, "data.organization_id"))
				assert.Equal(t, []string{"READ_USER"}, r.Strings(t, "data.allowed_scopes"))
			}},
		{Name: "read never shows the secret", Path: env.AdminPath("/admin/v1/organizations/" + id), Token: key, Status: http.StatusOK,
			NotContains: []string{"organization_secret"}, Check: func(t testing.TB, r *testsuite.Response) {
				assert.Equal(t, id, r.String(t, "data.organization_id"))
				v, _ := r.Get("data.validated")
				assert.Equal(t, false, v)
			}},
		{Name: "list never shows secrets", Path: path, Token: key, Status: http.StatusOK,
			NotContains: []string{"organization_secret"}, Check: func(t testing.TB, r *testsuite.Response) {
				require.NotEmpty(t, secret)
				assert.NotContains(t, string(r.Body), secret)
			}},
		{Name: "create with a supplied uuid already taken", Method: http.MethodPost, Path: path, Token: key,
			Body: map[string]any{"organization_id": id, "name": "Again", "partner_id": partner}, Status: http.StatusConflict},
		{Name: "unknown partner_id", Method: http.MethodPost, Path: path, Token: key,
			Body: map[string]any{"name": "Orphan", "partner_id": uuid.NewString()}, Status: http.StatusUnprocessableEntity,
			Slug: "validation-error", Check: func(t testing.TB, r *testsuite.Response) {
				assert.Equal(t, []string{"partner_id"}, r.ValidationFields())
			}},
		{Name: "blank name", Method: http.MethodPost, Path: path, Token: key,
			Body: map[string]any{"name": " \t ", "partner_id": partner}, Status: http.StatusUnprocessableEntity,
			Check: fieldsInclude("name")},
		{Name: "partner_id that is not a uuid", Method: http.MethodPost, Path: path, Token: key,
			Body: map[string]any{"name": "Orphan", "partner_id": "acme"}, Status: http.StatusUnprocessableEntity,
			Check: fieldsInclude("partner_id")},
		{Name: "supplied id that is not a uuid", Method: http.MethodPost, Path: path, Token: key,
			Body: map[string]any{"organization_id": "org-1", "name": "Bad", "partner_id": partner}, Status: http.StatusUnprocessableEntity,
			Check: fieldsInclude("organization_id")},
		{Name: "scope that is not a partner scope", Method: http.MethodPost, Path: path, Token: key,
			Body:   map[string]any{"name": "Bad", "partner_id": partner, "allowed_scopes": []string{"read:custom_drug", "admin"}},
			Status: http.StatusUnprocessableEntity, Slug: "validation-error", Check: func(t testing.TB, r *testsuite.Response) {
				fields := r.ValidationFields()
				require.NotEmpty(t, fields)
				assert.True(t, strings.HasPrefix(fields[0], "allowed_scopes"), "field %q", fields[0])
			}},
	}
	testsuite.RunScenarios(t, env, tests)
}

// TestOperatorUsers checks user creation: e-mail uniqueness per
// organization and caller-supplied ids.
func TestOperatorUsers(t *testing.T) {
	t.Parallel()
	env := testsuite.Start(t)
	a, b := env.NewTenant(t), env.NewTenant(t)
	key := env.AdminKey
	usersA, usersB := env.AdminPath(a.OrgPath()+"/users"), env.AdminPath(b.OrgPath()+"/users")
	user := func(email string) map[string]any {
		return map[string]any{"email": email, "given_name": "Priya", "family_name": "Sharma", "title": "Dr", "role": "prescriber"}
	}
	withID := func(id string) map[string]any {
		u := user(testsuite.Unique("id-") + "@example.test")
		u["user_id"] = id
		return u
	}
	id := uuid.NewString()

	tests := []testsuite.Scenario{
		{Name: "create", Method: http.MethodPost, Path: usersA, Token: key, Body: user("priya@example.test"), Status: http.StatusCreated,
			Check: func(t testing.TB, r *testsuite.Response) {
				isUUID(t, r, "data.user_id")
				assert.Equal(t, "priya@example.test", r.String(t, "data.email"))
				assert.Equal(t, "prescriber", r.String(t, "data.role"))
			}},
		{Name: "same e-mail in the same organization", Method: http.MethodPost, Path: usersA, Token: key,
			Body: user("priya@example.test"), Status: http.StatusConflict, Slug: "conflict"},
		{Name: "same e-mail in another case", Method: http.MethodPost, Path: usersA, Token: key,
			Body: user("Priya@Example.TEST"), Status: http.StatusConflict, Slug: "conflict"},
		{Name: "same e-mail in another organization", Method: http.MethodPost, Path: usersB, Token: key,
			Body: user("priya@example.test"), Status: http.StatusCreated},
		{Name: "supplied uuid is kept", Method: http.MethodPost, Path: usersA, Token: key, Body: withID(id), Status: http.StatusCreated,
			Check: func(t testing.TB, r *testsuite.Response) { assert.Equal(t, id, r.String(t, "data.user_id")) }},
		{Name: "supplied uuid is readable", Path: env.AdminPath(a.OrgPath() + "/users/" + id), Token: key, Status: http.StatusOK,
			Check: func(t testing.TB, r *testsuite.Response) { assert.Equal(t, id, r.String(t, "data.user_id")) }},
		{Name: "supplied uuid already taken", Method: http.MethodPost, Path: usersA, Token: key, Body: withID(id), Status: http.StatusConflict},
		{Name: "supplied id that is not a uuid", Method: http.MethodPost, Path: usersA, Token: key, Body: withID("user-1"),
			Status: http.StatusUnprocessableEntity, Slug: "validation-error", Check: fieldsInclude("user_id")},
		{Name: "blank names", Method: http.MethodPost, Path: usersA, Token: key,
			Body:   merge(user(testsuite.Unique("b-")+"@example.test"), map[string]any{"given_name": " ", "family_name": "  "}),
			Status: http.StatusUnprocessableEntity, Check: fieldsInclude("given_name", "family_name")},
		{Name: "unknown role", Method: http.MethodPost, Path: usersA, Token: key,
			Body: merge(user(testsuite.Unique("r-")+"@example.test"), map[string]any{"role": "superuser"}), Status: http.StatusUnprocessableEntity,
			Check: fieldsInclude("role")},
		{Name: "organization id that is not a uuid", Method: http.MethodPost, Path: env.AdminPath("/admin/v1/organizations/org-1/users"), Token: key,
			Body: user("x@example.test"), Status: http.StatusNotFound},
	}
	testsuite.RunScenarios(t, env, tests)

	t.Run("concurrent creates with one e-mail", func(t *testing.T) {
		email := testsuite.Unique("race-") + "@example.test"
		statuses := make([]int, 16)
		var wg sync.WaitGroup
		for i := range statuses {
			wg.Go(func() {
				r := env.Admin(t, http.MethodPost, a.OrgPath()+"/users", user(email))
				env.CheckEnvelope(t, r)
				statuses[i] = r.Status
			})
		}
		wg.Wait()
		created := 0
		for _, s := range statuses {
			if s == http.StatusCreated {
				created++
			} else {
				assert.Equal(t, http.StatusConflict, s)
			}
		}
		assert.Equal(t, 1, created, "exactly one create wins: %v", statuses)
	})
}

// TestOperatorPatients checks patient creation through the operator API.
func TestOperatorPatients(t *testing.T) {
	t.Parallel()
	env := testsuite.Start(t)
	tn := env.NewTenant(t)
	key, path := env.AdminKey, env.AdminPath(tn.UserPath(testsuite.RolePrescriber)+"/patients")
	id := uuid.NewString()
	valid := map[string]any{"given_name": "Jack", "family_name": "Taylor", "date_of_birth": "1979-02-28", "sex": "M"}

	tests := []testsuite.Scenario{
		{Name: "create with a supplied uuid", Method: http.MethodPost, Path: path, Token: key,
			Body: merge(valid, map[string]any{"patient_id": id, "partner_patient_id": "ext-1001",
				"australian_address": map[string]any{"street_number": "12", "street_name": "George Street", "suburb": "Sydney", "state": "NSW", "postcode": "2000"}}),
			Status: http.StatusCreated, Check: func(t testing.TB, r *testsuite.Response) {
				assert.Equal(t, id, r.String(t, "data.patient_id"))
				assert.Equal(t, "ext-1001", r.String(t, "data.partner_patient_id"))
				assert.Equal(t, "2000", r.String(t, "data.australian_address.postcode"))
			}},
		{Name: "read it back", Path: env.AdminPath(tn.UserPath(testsuite.RolePrescriber) + "/patients/" + id), Token: key, Status: http.StatusOK,
			Check: func(t testing.TB, r *testsuite.Response) {
				assert.Equal(t, "Taylor", r.String(t, "data.family_name"))
				assert.Equal(t, "1979-02-28", r.String(t, "data.date_of_birth"))
			}},
		{Name: "every invalid field is listed", Method: http.MethodPost, Path: path, Token: key,
			Body: map[string]any{
				"patient_id":     "p-1",
				"given_name":     "Jack",
				"date_of_birth":  "1979-02-30",
				"sex":            "X",
				"phone":          "02-9999-0000",
				"email":          "not-an-email",
				"ihi_number":     "800360",
				"medicare_irn":   "1a",
				"dva_card_color": "G",
				"australian_address": map[string]any{
					"street_number": "12", "street_name": "George Street", "suburb": "Sydney", "state": "XYZ", "postcode": "20000",
				},
			},
			Status: http.StatusUnprocessableEntity, Slug: "validation-error",
			Check: fieldsInclude("patient_id", "family_name", "date_of_birth", "sex", "phone", "email", "ihi_number",
				"medicare_irn", "dva_file_number", "australian_address.state", "australian_address.postcode")},
		{Name: "missing demographics", Method: http.MethodPost, Path: path, Token: key, Body: map[string]any{},
			Status: http.StatusUnprocessableEntity, Check: fieldsInclude("given_name", "family_name", "date_of_birth", "sex")},
		{Name: "date of birth in the future", Method: http.MethodPost, Path: path, Token: key,
			Body: merge(valid, map[string]any{"date_of_birth": "2999-01-01"}), Status: http.StatusUnprocessableEntity,
			Check: fieldsInclude("date_of_birth")},
		{Name: "incomplete address", Method: http.MethodPost, Path: path, Token: key,
			Body:   merge(valid, map[string]any{"australian_address": map[string]any{"street_name": "George Street"}}),
			Status: http.StatusUnprocessableEntity,
			Check: fieldsInclude("australian_address.street_number", "australian_address.suburb", "australian_address.state",
				"australian_address.postcode")},
		{Name: "supplied uuid already taken", Method: http.MethodPost, Path: path, Token: key,
			Body: merge(valid, map[string]any{"patient_id": id}), Status: http.StatusConflict},
		{Name: "partner_patient_id already taken in the organization", Method: http.MethodPost,
			Path: env.AdminPath(tn.UserPath(testsuite.RoleOwner) + "/patients"), Token: key,
			Body: merge(valid, map[string]any{"partner_patient_id": "ext-1001"}), Status: http.StatusConflict},
		{Name: "user of another organization", Method: http.MethodPost, Path: env.AdminPath(tn.OrgPath() + "/users/" + uuid.NewString() + "/patients"),
			Token: key, Body: valid, Status: http.StatusNotFound},
	}
	testsuite.RunScenarios(t, env, tests)
}

// scidPattern is an 18-character scid of digits and capitals.
var scidPattern = regexp.MustCompile(`^[0-9A-Z]{18}$`)

// TestOperatorPrescriptions checks prescription creation and status
// changes through the operator API.
func TestOperatorPrescriptions(t *testing.T) {
	t.Parallel()
	env := testsuite.Start(t)
	tn := env.NewTenant(t)
	key, path := env.AdminKey, env.AdminPath(tn.PatientPath()+"/prescriptions")
	body := map[string]any{
		"prescription_type": "ELECTRONIC", "item_name": "Amoxicillin 500 mg capsule", "quantity": "20",
		"number_of_repeats_authorised": "0", "item_strength": "500 mg", "item_form": "capsule", "route_administration": "oral",
		"schedule_number": "4", "patient_instructions": "One capsule three times a day",
		"delivery": map[string]any{"method": "SMS", "recipient_type": "PATIENT", "destination": "0412345678"},
	}
	create := func(t testing.TB) string {
		t.Helper()
		r := env.MustAdmin(t, http.MethodPost, tn.PatientPath()+"/prescriptions", body, http.StatusCreated)
		return r.String(t, "data.scid")
	}
	scid := create(t)
	erred := create(t)
	suppliedSCID := "2K7" + strings.ToUpper(testsuite.Unique("")[:12]) + "ABC"
	status := func(scid string) string { return path + "/" + scid }

	tests := []testsuite.Scenario{
		{Name: "create", Method: http.MethodPost, Path: path, Token: key, Body: body, Status: http.StatusCreated,
			Check: func(t testing.TB, r *testsuite.Response) {
				s := r.String(t, "data.scid")
				assert.Regexp(t, scidPattern, s)
				assert.Contains(t, r.String(t, "data.url"), s)
				assert.NotEmpty(t, r.String(t, "data.created_date"))
				assert.Equal(t, "Active", r.String(t, "data.status"))
				assert.Equal(t, "Amoxicillin 500 mg capsule", r.String(t, "data.item_name"))
				_, hasError := r.Get("data.error")
				assert.False(t, hasError, "an Active prescription has no error member")
			}},
		{Name: "create with a supplied scid keeps it", Method: http.MethodPost, Path: path, Token: key,
			Body: merge(body, map[string]any{"scid": suppliedSCID}), Status: http.StatusCreated,
			Check: func(t testing.TB, r *testsuite.Response) { assert.Equal(t, suppliedSCID, r.String(t, "data.scid")) }},
		{Name: "create with a supplied scid already taken", Method: http.MethodPost, Path: path, Token: key,
			Body: merge(body, map[string]any{"scid": suppliedSCID}), Status: http.StatusConflict},
		{Name: "create with a malformed scid", Method: http.MethodPost, Path: path, Token: key,
			Body: merge(body, map[string]any{"scid": "abc"}), Status: http.StatusUnprocessableEntity, Check: fieldsInclude("scid")},
		{Name: "create without the required members", Method: http.MethodPost, Path: path, Token: key, Body: map[string]any{},
			Status: http.StatusUnprocessableEntity, Check: fieldsInclude("item_name", "quantity")},
		{Name: "create with a server-assigned member", Method: http.MethodPost, Path: path, Token: key,
			Body: merge(body, map[string]any{"status": "Ceased"}), Status: http.StatusUnprocessableEntity, Check: fieldsInclude("status")},
		{Name: "Error without description", Method: http.MethodPatch, Path: status(scid), Token: key,
			Body: map[string]any{"status": "Error"}, Status: http.StatusUnprocessableEntity, Slug: "validation-error"},
		{Name: "Error with an empty description", Method: http.MethodPatch, Path: status(scid), Token: key,
			Body: map[string]any{"status": "Error", "error": map[string]any{}}, Status: http.StatusUnprocessableEntity,
			Check: fieldsInclude("error.description")},
		{Name: "back to Active", Method: http.MethodPatch, Path: status(scid), Token: key,
			Body: map[string]any{"status": "Active"}, Status: http.StatusUnprocessableEntity, Check: fieldsInclude("status")},
		{Name: "Ceased", Method: http.MethodPatch, Path: status(scid), Token: key, Body: map[string]any{"status": "Ceased"}, Status: http.StatusOK,
			Check: func(t testing.TB, r *testsuite.Response) {
				assert.Equal(t, "Ceased", r.String(t, "data.status"))
				assert.Equal(t, scid, r.String(t, "data.scid"))
			}},
		{Name: "Error with a description", Method: http.MethodPatch, Path: status(erred), Token: key,
			Body:   map[string]any{"status": "Error", "error": map[string]any{"description": "Dispensing system rejected the token"}},
			Status: http.StatusOK, Check: func(t testing.TB, r *testsuite.Response) {
				assert.Equal(t, "Error", r.String(t, "data.status"))
				assert.Equal(t, "Dispensing system rejected the token", r.String(t, "data.error.description"))
			}},
		{Name: "from Error to Ceased drops the error", Method: http.MethodPatch, Path: status(erred), Token: key,
			Body: map[string]any{"status": "Ceased"}, Status: http.StatusOK, Check: func(t testing.TB, r *testsuite.Response) {
				assert.Equal(t, "Ceased", r.String(t, "data.status"))
				_, hasError := r.Get("data.error")
				assert.False(t, hasError, "only a prescription with status Error has an error member")
			}},
		{Name: "prescription of another patient", Method: http.MethodPatch,
			Path:  env.AdminPath(tn.UserPath(testsuite.RolePrescriber) + "/patients/" + uuid.NewString() + "/prescriptions/" + scid),
			Token: key, Body: map[string]any{"status": "Ceased"}, Status: http.StatusNotFound},
	}
	testsuite.RunScenarios(t, env, tests)
}

// TestOperatorRequiresKey checks that every operator route refuses a
// request without the API key, with a wrong one, or with the key in
// another scheme.
func TestOperatorRequiresKey(t *testing.T) {
	t.Parallel()
	// Its wrong keys, over a hundred from one address, would reach the
	// key failure limit (TestOperatorKeyGuessing): it is raised here so
	// that every route is seen to answer 401.
	env := testsuite.Start(t, testsuite.WithConfig(func(c *config.Config) { c.Admin.KeyFailureBurst = config.MaxKeyFailureBurst }))
	tn := env.NewTenant(t)
	routes := []struct{ method, path string }{
		{http.MethodPost, "/admin/v1/partners"},
		{http.MethodGet, "/admin/v1/partners"},
		{http.MethodPost, "/admin/v1/partners/" + tn.PartnerID + "/rotate-secret"},
		{http.MethodPost, "/admin/v1/organizations"},
		{http.MethodGet, "/admin/v1/organizations"},
		{http.MethodGet, tn.OrgPath()},
		{http.MethodPost, tn.OrgPath() + "/rotate-secret"},
		{http.MethodPost, tn.OrgPath() + "/users"},
		{http.MethodGet, tn.UserPath(testsuite.RoleOwner)},
		{http.MethodPost, tn.UserPath(testsuite.RolePrescriber) + "/patients"},
		{http.MethodGet, tn.PatientPath()},
		{http.MethodPost, tn.PatientPath() + "/prescriptions"},
		{http.MethodPatch, tn.PatientPath() + "/prescriptions/ABCDEFGHIJ12345678"},
		{http.MethodPost, "/admin/v1/tokens"},
		{http.MethodGet, tn.OrgPath() + "/users"},
		{http.MethodGet, "/admin/v1/overview"},
	}
	credentials := []struct {
		name   string
		header string
	}{
		{name: "no key"},
		{name: "wrong key", header: "Bearer wrong-" + env.AdminKey},
		{name: "key prefix", header: "Bearer " + env.AdminKey[:len(env.AdminKey)-1]},
		{name: "key in another scheme", header: "Basic " + env.AdminKey},
		{name: "bare key", header: env.AdminKey},
		{name: "partner organization secret", header: "Bearer " + tn.OrgSecret},
	}
	var tests []testsuite.Scenario
	for _, route := range routes {
		for _, c := range credentials {
			sc := testsuite.Scenario{Name: route.method + " " + route.path + " " + c.name, Method: route.method, Path: env.AdminPath(route.path),
				Status: http.StatusUnauthorized, Slug: slugAuth}
			if c.header != "" {
				sc.Headers = map[string]string{"Authorization": c.header}
			}
			if route.method != http.MethodGet {
				sc.Body = map[string]any{"name": "intruder"}
			}
			tests = append(tests, sc)
		}
	}
	testsuite.RunScenarios(t, env, tests)

	t.Run("nothing was created or rotated", func(t *testing.T) {
		r := env.MustAdmin(t, http.MethodGet, "/admin/v1/partners", nil, http.StatusOK)
		assert.NotContains(t, string(r.Body), "intruder")
		testsuite.RunScenario(t, env, testsuite.Scenario{Method: http.MethodPost, Path: tokenPath,
			Headers: tn.TokenHeaders(testsuite.RoleOwner), Body: tokenBody(), Status: http.StatusOK})
	})
}
