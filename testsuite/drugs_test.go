package testsuite_test

import (
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/app/auth"
	"github.com/rxgate/rxgate/testsuite"
)

// Error slugs of the custom drug and user operations.
const (
	slugInsufficientScope = "insufficient-scope"
	slugValidationError   = "validation-error"
)

// drugRequired are the members spec 4.3 requires on create.
var drugRequired = []string{
	"item_generic_name", "item_strength", "item_form", "route_of_administration",
	"quantity", "poison_class", "max_repeats",
}

// drugsPath is the partner path of user's custom drugs (user is a role or
// an id) in tn's organization.
func drugsPath(tn *testsuite.Tenant, user string) string {
	return "/v1/organizations/" + tn.OrgID + "/users/" + tn.UserID(user) + "/custom-drugs"
}

// drugPath is the partner path of one of user's custom drugs.
func drugPath(tn *testsuite.Tenant, user, drugID string) string {
	return drugsPath(tn, user) + "/" + drugID
}

// bulkDrugsPath is the partner path of bulk create in tn's organization.
func bulkDrugsPath(tn *testsuite.Tenant) string {
	return "/v1/organizations/" + tn.OrgID + "/custom-drugs"
}

// sampleDrug returns the required members of a valid drug named name, with
// quantity as a number.
func sampleDrug(name string) map[string]any {
	return map[string]any{
		"item_generic_name": name, "item_strength": "500 mg", "item_form": "capsule",
		"route_of_administration": "oral", "quantity": 20, "max_repeats": "2", "poison_class": "S4",
	}
}

// scopesWithout returns every partner scope but the named ones.
func scopesWithout(names ...string) []string {
	var out []string
	for _, s := range auth.PartnerScopes {
		if !slices.Contains(names, s) {
			out = append(out, s)
		}
	}
	return out
}

// callPartner sends a partner request with tn's organization secret and
// checks the envelope.
func callPartner(t testing.TB, env *testsuite.Env, tn *testsuite.Tenant, method, path, token string, body any) *testsuite.Response {
	t.Helper()
	r := env.Do(t, testsuite.Request{Method: method, URL: path, Token: token, Headers: tn.Headers(), Body: body})
	env.CheckEnvelope(t, r)
	return r
}

// mustCreateDrug creates a user-level drug and returns its id.
func mustCreateDrug(t testing.TB, env *testsuite.Env, tn *testsuite.Tenant, token, user string, body any) string {
	t.Helper()
	r := callPartner(t, env, tn, http.MethodPost, drugsPath(tn, user), token, body)
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	return r.String(t, "data.custom_drug_id")
}

// listDrugs returns user's custom drugs as answered, by id.
func listDrugs(t testing.TB, env *testsuite.Env, tn *testsuite.Tenant, token, user string) map[string]map[string]any {
	t.Helper()
	r := callPartner(t, env, tn, http.MethodGet, drugsPath(tn, user), token, nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var drugs []map[string]any
	r.DecodeData(t, &drugs)
	out := make(map[string]map[string]any, len(drugs))
	for _, d := range drugs {
		id, _ := d["custom_drug_id"].(string)
		require.NotEmpty(t, id, "a drug without custom_drug_id: %v", d)
		out[id] = d
	}
	require.Len(t, out, len(drugs), "duplicate custom_drug_id in %s", r.Body)
	return out
}

// mustBulkDrugs bulk-creates drugs named names at organization level and
// returns their ids, read back through user's list.
func mustBulkDrugs(t testing.TB, env *testsuite.Env, tn *testsuite.Tenant, names ...string) []string {
	t.Helper()
	admin := tn.Token(t, testsuite.RoleAdmin)
	before := listDrugs(t, env, tn, admin, testsuite.RoleAdmin)
	items := make([]any, len(names))
	for i, n := range names {
		items[i] = sampleDrug(n)
	}
	r := callPartner(t, env, tn, http.MethodPost, bulkDrugsPath(tn), admin, items)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var ids []string
	for id := range listDrugs(t, env, tn, admin, testsuite.RoleAdmin) {
		if _, ok := before[id]; !ok {
			ids = append(ids, id)
		}
	}
	require.Len(t, ids, len(names))
	return ids
}

// insufficientScope checks the 401 of a custom drug operation without its
// scope (spec 5.4).
func insufficientScope(t testing.TB, r *testsuite.Response) {
	t.Helper()
	assert.Equal(t, "Insufficient scope", r.String(t, "error.detail"))
}

// dataEquals returns a Check that data equals want.
func dataEquals(want any) func(testing.TB, *testsuite.Response) {
	return func(t testing.TB, r *testsuite.Response) {
		t.Helper()
		got, _ := r.Get("data")
		assert.Equal(t, want, got)
	}
}

// TestCustomDrugsList covers spec 4.2: the organization's drugs and the
// user's own, each with custom_drug_id, optional members left out when not
// set, the count in the message.
func TestCustomDrugsList(t *testing.T) {
	t.Parallel()
	env := testsuite.Start(t)
	tn, empty := env.NewTenant(t), env.NewTenant(t)
	rx := tn.Token(t, testsuite.RolePrescriber)
	adminTok := tn.Token(t, testsuite.RoleAdmin)
	orgIDs := mustBulkDrugs(t, env, tn, "Org drug one", "Org drug two")
	own := mustCreateDrug(t, env, tn, rx, testsuite.RolePrescriber, sampleDrug("Own drug"))
	full := sampleDrug("Own full drug")
	maps.Copy(full, map[string]any{
		"item_trade_name": "Trade", "brand_name": "Brand", "custom_product_id": "P-1", "description": "Descr",
		"patient_instructions": "With food", "doctor_instructions": "Check",
	})
	ownFull := mustCreateDrug(t, env, tn, rx, testsuite.RolePrescriber, full)
	adminOwn := mustCreateDrug(t, env, tn, adminTok, testsuite.RoleAdmin, sampleDrug("Admin drug"))

	testsuite.RunScenarios(t, env, []testsuite.Scenario{
		{
			Name: "organization drugs and the user's own", Path: drugsPath(tn, testsuite.RolePrescriber), Token: rx, Headers: tn.Headers(),
			Status: http.StatusOK, NotContains: []string{adminOwn, "Admin drug"},
			Check: func(t testing.TB, r *testsuite.Response) {
				assert.Contains(t, r.String(t, "message"), "4")
				var drugs []map[string]any
				r.DecodeData(t, &drugs)
				var ids []string
				for _, d := range drugs {
					id, _ := d["custom_drug_id"].(string)
					ids = append(ids, id)
				}
				assert.ElementsMatch(t, append([]string{own, ownFull}, orgIDs...), ids)
				for _, d := range drugs {
					want := append([]string{"custom_drug_id"}, drugRequired...)
					if d["custom_drug_id"] == ownFull {
						want = append(want, "item_trade_name", "brand_name", "custom_product_id", "description",
							"patient_instructions", "doctor_instructions")
					}
					assert.ElementsMatch(t, want, slices.Collect(maps.Keys(d)), "members of %v", d)
					assert.Equal(t, "20", d["quantity"], "quantity is a string")
				}
			},
		},
		{
			Name: "a manager lists another user's drugs", Path: drugsPath(tn, testsuite.RolePrescriber), Token: adminTok, Headers: tn.Headers(),
			Status: http.StatusOK, Contains: []string{own, ownFull}, NotContains: []string{adminOwn},
		},
		{
			Name: "empty list", Path: drugsPath(empty, testsuite.RolePrescriber), Token: empty.Token(t, testsuite.RolePrescriber),
			Headers: empty.Headers(), Status: http.StatusOK, Check: func(t testing.TB, r *testsuite.Response) {
				assert.Contains(t, r.String(t, "message"), "0")
				dataEquals([]any{})(t, r)
			},
		},
		{
			Name: "unknown user", Path: drugsPath(tn, uuid.NewString()), Token: adminTok, Headers: tn.Headers(),
			Status: http.StatusUnauthorized, NotContains: orgIDs,
		},
		{
			Name: "missing read:custom_drug", Path: drugsPath(tn, testsuite.RolePrescriber),
			Token: tn.Token(t, testsuite.RolePrescriber, scopesWithout("read:custom_drug")...), Headers: tn.Headers(),
			Status: http.StatusUnauthorized, Slug: slugInsufficientScope, NotContains: []string{own}, Check: insufficientScope,
		},
		{
			Name: "another user's drugs", Path: drugsPath(tn, testsuite.RoleAdmin), Token: rx, Headers: tn.Headers(),
			Status: http.StatusUnauthorized, Slug: slugAuth, NotContains: []string{adminOwn},
		},
		{
			Name: "no token", Path: drugsPath(tn, testsuite.RolePrescriber), Headers: tn.Headers(),
			Status: http.StatusUnauthorized, Slug: slugAuth, NotContains: []string{own},
		},
	})
}

// TestCustomDrugsCreate covers spec 4.3.
func TestCustomDrugsCreate(t *testing.T) {
	t.Parallel()
	env := testsuite.Start(t)
	tn := env.NewTenant(t)
	rx := tn.Token(t, testsuite.RolePrescriber)
	adminTok := tn.Token(t, testsuite.RoleAdmin)
	path := drugsPath(tn, testsuite.RolePrescriber)

	multiByte := sampleDrug(strings.Repeat("药", 280))
	maps.Copy(multiByte, map[string]any{"item_form": strings.Repeat("é", 50), "poison_class": "S8", "quantity": 2.5, "max_repeats": 0})

	bad := map[string]any{
		"item_generic_name": strings.Repeat("药", 281), "item_strength": "500 mg", "item_form": strings.Repeat("é", 51),
		"route_of_administration": "oral", "max_repeats": true, "poison_class": "S44", "brand_name": strings.Repeat("b", 101),
		"colour": "red",
	}
	badFields := []string{"brand_name", "colour", "item_form", "item_generic_name", "max_repeats", "poison_class", "quantity"}

	testsuite.RunScenarios(t, env, []testsuite.Scenario{
		{
			Name: "created with quantity as a number", Method: http.MethodPost, Path: path, Token: rx, Headers: tn.Headers(),
			Body: sampleDrug("Amoxicillin"), Status: http.StatusCreated,
			Check: func(t testing.TB, r *testsuite.Response) {
				var d map[string]any
				r.DecodeData(t, &d)
				assert.NotEmpty(t, d["custom_drug_id"])
				want := map[string]any{"custom_drug_id": d["custom_drug_id"], "item_generic_name": "Amoxicillin", "item_strength": "500 mg",
					"item_form": "capsule", "route_of_administration": "oral", "quantity": "20", "max_repeats": "2", "poison_class": "S4"}
				assert.Equal(t, want, d, "optional members not set are absent")
				stored := listDrugs(t, env, tn, rx, testsuite.RolePrescriber)[d["custom_drug_id"].(string)]
				assert.Equal(t, want, stored, "the list answers the drug as created")
			},
		},
		{
			Name: "multi-byte text at the limits, numbers as strings", Method: http.MethodPost, Path: path, Token: rx, Headers: tn.Headers(),
			Body: multiByte, Status: http.StatusCreated,
			Check: func(t testing.TB, r *testsuite.Response) {
				assert.Equal(t, strings.Repeat("药", 280), r.String(t, "data.item_generic_name"))
				assert.Equal(t, strings.Repeat("é", 50), r.String(t, "data.item_form"))
				assert.Equal(t, "2.5", r.String(t, "data.quantity"))
				assert.Equal(t, "0", r.String(t, "data.max_repeats"))
			},
		},
		{
			Name: "a manager creates for another user", Method: http.MethodPost, Path: path, Token: adminTok, Headers: tn.Headers(),
			Body: sampleDrug("By the admin"), Status: http.StatusCreated,
		},
		{
			Name: "every bad field named", Method: http.MethodPost, Path: path, Token: rx, Headers: tn.Headers(),
			Body: bad, Status: http.StatusBadRequest, Slug: slugValidationError,
			Check: func(t testing.TB, r *testsuite.Response) {
				assert.Equal(t, badFields, slices.Sorted(slices.Values(r.ValidationFields())))
			},
		},
		{
			Name: "empty object names every required member", Method: http.MethodPost, Path: path, Token: rx, Headers: tn.Headers(),
			Body: map[string]any{}, Status: http.StatusBadRequest, Slug: slugValidationError,
			Check: func(t testing.TB, r *testsuite.Response) {
				assert.ElementsMatch(t, drugRequired, r.ValidationFields())
			},
		},
		{
			Name: "array body", Method: http.MethodPost, Path: path, Token: rx, Headers: tn.Headers(),
			Body: []any{sampleDrug("In an array")}, Status: http.StatusBadRequest,
		},
		{
			Name: "no body", Method: http.MethodPost, Path: path, Token: rx, Headers: tn.Headers(), Status: http.StatusBadRequest,
		},
		{
			Name: "missing create:custom_drug", Method: http.MethodPost, Path: path,
			Token: tn.Token(t, testsuite.RolePrescriber, scopesWithout("create:custom_drug")...), Headers: tn.Headers(),
			Body: sampleDrug("Refused"), Status: http.StatusUnauthorized, Slug: slugInsufficientScope, Check: insufficientScope,
		},
		{
			Name: "for another user", Method: http.MethodPost, Path: drugsPath(tn, testsuite.RoleAdmin), Token: rx, Headers: tn.Headers(),
			Body: sampleDrug("Refused"), Status: http.StatusUnauthorized, Slug: slugAuth,
		},
		{
			Name: "unknown user", Method: http.MethodPost, Path: drugsPath(tn, uuid.NewString()), Token: adminTok, Headers: tn.Headers(),
			Body: sampleDrug("Refused"), Status: http.StatusUnauthorized,
		},
		{
			Name: "no token", Method: http.MethodPost, Path: path, Headers: tn.Headers(),
			Body: sampleDrug("Refused"), Status: http.StatusUnauthorized, Slug: slugAuth,
		},
	})

	t.Run("only the created drugs were stored", func(t *testing.T) {
		drugs := listDrugs(t, env, tn, adminTok, testsuite.RolePrescriber)
		assert.Len(t, drugs, 3)
		assert.Empty(t, listDrugs(t, env, tn, adminTok, testsuite.RoleAdmin), "nothing at organization level or for the admin")
		for _, d := range drugs {
			assert.NotEqual(t, "Refused", d["item_generic_name"])
		}
	})
}

// TestCustomDrugsUpdate covers spec 4.5.
func TestCustomDrugsUpdate(t *testing.T) {
	t.Parallel()
	env := testsuite.Start(t)
	tn := env.NewTenant(t)
	rx := tn.Token(t, testsuite.RolePrescriber)
	adminTok := tn.Token(t, testsuite.RoleAdmin)
	orgDrug := mustBulkDrugs(t, env, tn, "Org drug")[0]
	full := sampleDrug("Amoxicillin")
	maps.Copy(full, map[string]any{"brand_name": "Amoxil", "description": "Broad spectrum"})
	own := mustCreateDrug(t, env, tn, rx, testsuite.RolePrescriber, full)
	adminOwn := mustCreateDrug(t, env, tn, adminTok, testsuite.RoleAdmin, sampleDrug("Admin drug"))
	path := drugPath(tn, testsuite.RolePrescriber, own)

	testsuite.RunScenarios(t, env, []testsuite.Scenario{
		{
			Name: "partial update", Method: http.MethodPut, Path: path, Token: rx, Headers: tn.Headers(),
			Body: map[string]any{"item_strength": "250 mg", "quantity": 10}, Status: http.StatusOK,
			Check: func(t testing.TB, r *testsuite.Response) {
				want := map[string]any{"custom_drug_id": own, "item_generic_name": "Amoxicillin", "item_strength": "250 mg",
					"item_form": "capsule", "route_of_administration": "oral", "quantity": "10", "max_repeats": "2", "poison_class": "S4",
					"brand_name": "Amoxil", "description": "Broad spectrum"}
				dataEquals(want)(t, r)
				assert.Equal(t, want, listDrugs(t, env, tn, rx, testsuite.RolePrescriber)[own])
			},
		},
		{
			Name: "null clears an optional member", Method: http.MethodPut, Path: path, Token: rx, Headers: tn.Headers(),
			Body: map[string]any{"description": nil}, Status: http.StatusOK, NotContains: []string{"description"},
			Check: func(t testing.TB, r *testsuite.Response) {
				assert.Equal(t, "Amoxil", r.String(t, "data.brand_name"))
			},
		},
		{
			Name: "no members", Method: http.MethodPut, Path: path, Token: rx, Headers: tn.Headers(),
			Body: map[string]any{}, Status: http.StatusOK, Contains: []string{`"item_strength":"250 mg"`},
		},
		{
			Name: "a manager updates another user's drug", Method: http.MethodPut, Path: path, Token: adminTok, Headers: tn.Headers(),
			Body: map[string]any{"max_repeats": 3}, Status: http.StatusOK, Contains: []string{`"max_repeats":"3"`},
		},
		{
			Name: "bad fields", Method: http.MethodPut, Path: path, Token: rx, Headers: tn.Headers(),
			Body:   map[string]any{"item_strength": strings.Repeat("é", 101), "item_form": nil, "quantity": []int{1}, "custom_drug_id": "x"},
			Status: http.StatusBadRequest, Slug: slugValidationError,
			Check: func(t testing.TB, r *testsuite.Response) {
				assert.ElementsMatch(t, []string{"item_strength", "item_form", "quantity", "custom_drug_id"}, r.ValidationFields())
			},
		},
		{
			Name: "an organization-level drug", Method: http.MethodPut, Path: drugPath(tn, testsuite.RolePrescriber, orgDrug), Token: rx,
			Headers: tn.Headers(), Body: map[string]any{"item_strength": "1 mg"}, Status: http.StatusNotFound, NotContains: []string{"Org drug"},
		},
		{
			Name: "another user's drug on this user's path", Method: http.MethodPut, Path: drugPath(tn, testsuite.RolePrescriber, adminOwn), Token: rx,
			Headers: tn.Headers(), Body: map[string]any{"item_strength": "1 mg"}, Status: http.StatusNotFound, NotContains: []string{"Admin drug"},
		},
		{
			Name: "an unknown id", Method: http.MethodPut, Path: drugPath(tn, testsuite.RolePrescriber, uuid.NewString()), Token: rx,
			Headers: tn.Headers(), Body: map[string]any{"item_strength": "1 mg"}, Status: http.StatusNotFound,
		},
		{
			Name: "an id that is not a uuid", Method: http.MethodPut, Path: drugPath(tn, testsuite.RolePrescriber, "not-a-drug"), Token: rx,
			Headers: tn.Headers(), Body: map[string]any{"item_strength": "1 mg"}, Status: http.StatusNotFound,
		},
		{
			Name: "another user's drug on that user's path", Method: http.MethodPut, Path: drugPath(tn, testsuite.RoleAdmin, adminOwn), Token: rx,
			Headers: tn.Headers(), Body: map[string]any{"item_strength": "1 mg"}, Status: http.StatusUnauthorized, Slug: slugAuth,
		},
		{
			Name: "missing update:custom_drug", Method: http.MethodPut, Path: path,
			Token: tn.Token(t, testsuite.RolePrescriber, scopesWithout("update:custom_drug")...), Headers: tn.Headers(),
			Body: map[string]any{"item_strength": "1 mg"}, Status: http.StatusUnauthorized, Slug: slugInsufficientScope, Check: insufficientScope,
		},
		{
			Name: "no token", Method: http.MethodPut, Path: path, Headers: tn.Headers(),
			Body: map[string]any{"item_strength": "1 mg"}, Status: http.StatusUnauthorized, Slug: slugAuth,
		},
	})

	t.Run("refused updates changed nothing", func(t *testing.T) {
		drugs := listDrugs(t, env, tn, adminTok, testsuite.RoleAdmin)
		assert.Equal(t, "500 mg", drugs[orgDrug]["item_strength"])
		assert.Equal(t, "500 mg", drugs[adminOwn]["item_strength"])
		assert.Equal(t, "250 mg", listDrugs(t, env, tn, rx, testsuite.RolePrescriber)[own]["item_strength"])
	})
}

// TestCustomDrugsDelete covers the delete operation named in spec 4.10.
func TestCustomDrugsDelete(t *testing.T) {
	t.Parallel()
	env := testsuite.Start(t)
	tn := env.NewTenant(t)
	rx := tn.Token(t, testsuite.RolePrescriber)
	adminTok := tn.Token(t, testsuite.RoleAdmin)
	orgDrug := mustBulkDrugs(t, env, tn, "Org drug")[0]
	own := mustCreateDrug(t, env, tn, rx, testsuite.RolePrescriber, sampleDrug("Own drug"))
	adminOwn := mustCreateDrug(t, env, tn, adminTok, testsuite.RoleAdmin, sampleDrug("Admin drug"))
	path := drugPath(tn, testsuite.RolePrescriber, own)

	testsuite.RunScenarios(t, env, []testsuite.Scenario{
		{
			Name: "missing update:custom_drug", Method: http.MethodDelete, Path: path,
			Token: tn.Token(t, testsuite.RolePrescriber, scopesWithout("update:custom_drug")...), Headers: tn.Headers(),
			Status: http.StatusUnauthorized, Slug: slugInsufficientScope, Check: insufficientScope,
		},
		{
			Name: "another user's drug on that user's path", Method: http.MethodDelete, Path: drugPath(tn, testsuite.RoleAdmin, adminOwn),
			Token: rx, Headers: tn.Headers(), Status: http.StatusUnauthorized, Slug: slugAuth,
		},
		{
			Name: "no token", Method: http.MethodDelete, Path: path, Headers: tn.Headers(), Status: http.StatusUnauthorized, Slug: slugAuth,
		},
		{
			Name: "an organization-level drug", Method: http.MethodDelete, Path: drugPath(tn, testsuite.RolePrescriber, orgDrug),
			Token: rx, Headers: tn.Headers(), Status: http.StatusNotFound,
		},
		{
			Name: "another user's drug on this user's path", Method: http.MethodDelete, Path: drugPath(tn, testsuite.RolePrescriber, adminOwn),
			Token: rx, Headers: tn.Headers(), Status: http.StatusNotFound,
		},
		{
			Name: "an unknown id", Method: http.MethodDelete, Path: drugPath(tn, testsuite.RolePrescriber, uuid.NewString()),
			Token: rx, Headers: tn.Headers(), Status: http.StatusNotFound,
		},
		{
			Name: "deleted", Method: http.MethodDelete, Path: path, Token: rx, Headers: tn.Headers(),
			Status: http.StatusOK, Check: dataEquals(map[string]any{"custom_drug_id": own}),
		},
		{
			Name: "deleted already", Method: http.MethodDelete, Path: path, Token: rx, Headers: tn.Headers(), Status: http.StatusNotFound,
		},
		{
			Name: "update after delete", Method: http.MethodPut, Path: path, Token: rx, Headers: tn.Headers(),
			Body: map[string]any{"item_strength": "1 mg"}, Status: http.StatusNotFound,
		},
	})

	t.Run("only the deleted drug is gone", func(t *testing.T) {
		drugs := listDrugs(t, env, tn, rx, testsuite.RolePrescriber)
		assert.Equal(t, []string{orgDrug}, slices.Collect(maps.Keys(drugs)))
		assert.Contains(t, listDrugs(t, env, tn, adminTok, testsuite.RoleAdmin), adminOwn)
	})
}

// TestCustomDrugsBulk covers spec 4.4 through the API: the 200/400 rule and
// the admin rule.
func TestCustomDrugsBulk(t *testing.T) {
	t.Parallel()
	env := testsuite.Start(t)
	tn := env.NewTenant(t)
	path := bulkDrugsPath(tn)
	badItem := map[string]any{"item_generic_name": "No quantity"}
	one := []any{sampleDrug("Bulk one")}
	summary := func(total, success, failure int, indexes ...int) func(testing.TB, *testsuite.Response) {
		return func(t testing.TB, r *testsuite.Response) {
			t.Helper()
			var got struct {
				Total        *int `json:"total"`
				SuccessCount *int `json:"successCount"`
				FailureCount *int `json:"failureCount"`
				Failures     []struct {
					Index int    `json:"index"`
					Error string `json:"error"`
				} `json:"failures"`
			}
			r.DecodeData(t, &got)
			require.NotNil(t, got.Total, "data.total")
			require.NotNil(t, got.SuccessCount, "data.successCount")
			require.NotNil(t, got.FailureCount, "data.failureCount")
			assert.Equal(t, []int{total, success, failure}, []int{*got.Total, *got.SuccessCount, *got.FailureCount})
			var idx []int
			for _, f := range got.Failures {
				idx = append(idx, f.Index)
				assert.NotEmpty(t, f.Error)
			}
			assert.Equal(t, indexes, idx)
		}
	}

	testsuite.RunScenarios(t, env, []testsuite.Scenario{
		{
			Name: "owner", Method: http.MethodPost, Path: path, Token: tn.Token(t, testsuite.RoleOwner), Headers: tn.Headers(),
			Body: one, Status: http.StatusOK, Check: summary(1, 1, 0),
		},
		{
			Name: "admin, one good among bad", Method: http.MethodPost, Path: path, Token: tn.Token(t, testsuite.RoleAdmin), Headers: tn.Headers(),
			Body: []any{badItem, sampleDrug("Bulk good"), badItem, "not a drug"}, Status: http.StatusOK, Check: summary(4, 1, 3, 1, 3, 4),
		},
		{
			Name: "all bad", Method: http.MethodPost, Path: path, Token: tn.Token(t, testsuite.RoleAdmin), Headers: tn.Headers(),
			Body: []any{badItem, badItem}, Status: http.StatusBadRequest, Slug: slugValidationError, Check: summary(2, 0, 2, 1, 2),
		},
		{
			Name: "an object", Method: http.MethodPost, Path: path, Token: tn.Token(t, testsuite.RoleAdmin), Headers: tn.Headers(),
			Body: sampleDrug("Not in an array"), Status: http.StatusBadRequest, NotContains: []string{"successCount"},
		},
		{
			Name: "an empty array", Method: http.MethodPost, Path: path, Token: tn.Token(t, testsuite.RoleAdmin), Headers: tn.Headers(),
			Body: []any{}, Status: http.StatusBadRequest, NotContains: []string{"successCount"},
		},
		{
			Name: "prescriber", Method: http.MethodPost, Path: path, Token: tn.Token(t, testsuite.RolePrescriber), Headers: tn.Headers(),
			Body: one, Status: http.StatusUnauthorized, Slug: slugAuth,
		},
		{
			Name: "member", Method: http.MethodPost, Path: path, Token: tn.Token(t, testsuite.RoleMember), Headers: tn.Headers(),
			Body: one, Status: http.StatusUnauthorized, Slug: slugAuth,
		},
		{
			Name: "missing create:custom_drug", Method: http.MethodPost, Path: path,
			Token: tn.Token(t, testsuite.RoleAdmin, scopesWithout("create:custom_drug")...), Headers: tn.Headers(),
			Body: one, Status: http.StatusUnauthorized, Slug: slugInsufficientScope, Check: insufficientScope,
		},
		{
			Name: "no token", Method: http.MethodPost, Path: path, Headers: tn.Headers(), Body: one, Status: http.StatusUnauthorized, Slug: slugAuth,
		},
	})

	t.Run("only the accepted items were stored", func(t *testing.T) {
		var names []string
		for _, d := range listDrugs(t, env, tn, tn.Token(t, testsuite.RoleMember), testsuite.RoleMember) {
			names = append(names, d["item_generic_name"].(string))
		}
		assert.ElementsMatch(t, []string{"Bulk one", "Bulk good"}, names)
	})
}

// TestCustomDrugsInsufficientScope checks that every custom drug operation
// without its scope is 401 with detail "Insufficient scope" (spec 5.4), not
// 403, even for an owner holding every other scope.
func TestCustomDrugsInsufficientScope(t *testing.T) {
	t.Parallel()
	env := testsuite.Start(t)
	tn := env.NewTenant(t)
	own := mustCreateDrug(t, env, tn, tn.Token(t, testsuite.RoleOwner), testsuite.RoleOwner, sampleDrug("Owner drug"))
	tests := []struct {
		name   string
		method string
		path   string
		scope  string
		body   any
	}{
		{name: "list", method: http.MethodGet, path: drugsPath(tn, testsuite.RoleOwner), scope: "read:custom_drug"},
		{name: "create", method: http.MethodPost, path: drugsPath(tn, testsuite.RoleOwner), scope: "create:custom_drug", body: sampleDrug("x")},
		{name: "bulk create", method: http.MethodPost, path: bulkDrugsPath(tn), scope: "create:custom_drug", body: []any{sampleDrug("x")}},
		{name: "update", method: http.MethodPut, path: drugPath(tn, testsuite.RoleOwner, own), scope: "update:custom_drug", body: map[string]any{"brand_name": "x"}},
		{name: "delete", method: http.MethodDelete, path: drugPath(tn, testsuite.RoleOwner, own), scope: "update:custom_drug"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for _, scopes := range [][]string{scopesWithout(tt.scope), {"READ_USER"}} {
				r := callPartner(t, env, tn, tt.method, tt.path, tn.Token(t, testsuite.RoleOwner, scopes...), tt.body)
				require.Equal(t, http.StatusUnauthorized, r.Status, "scopes %v: %s", scopes, r.Body)
				assert.Equal(t, slugInsufficientScope, r.Slug())
				insufficientScope(t, r)
				assert.NotContains(t, string(r.Body), "Owner drug")
			}
		})
	}
	t.Run("nothing changed", func(t *testing.T) {
		drugs := listDrugs(t, env, tn, tn.Token(t, testsuite.RoleOwner), testsuite.RoleOwner)
		require.Len(t, drugs, 1)
		assert.Equal(t, "Owner drug", drugs[own]["item_generic_name"])
		assert.NotContains(t, drugs[own], "brand_name")
	})
}
