package testsuite_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/rxgate/rxgate/testsuite"
)

// TestMalformedQuery: every call that reads its query answers a pair that
// is not correctly percent-encoded, or a ";" separator, with a 400
// validation error naming the parameter, instead of running as if the
// parameter were absent.
func TestMalformedQuery(t *testing.T) {
	t.Parallel()
	env := testsuite.Start(t)
	tn := env.NewTenant(t)
	token := tn.Token(t, testsuite.RoleOwner)
	lists := []struct {
		name    string
		path    string
		token   string
		headers map[string]string
	}{
		{name: "users", path: usersPath(tn), token: token, headers: tn.Headers()},
		{name: "prescriptions", path: prescriptionsPath(tn, testsuite.RolePrescriber, tn.PatientID, nil), token: tn.Token(t, testsuite.RolePrescriber), headers: tn.Headers()},
		{name: "events", path: env.AdminPath("/admin/v1/events"), token: env.AdminKey},
		{name: "webhook endpoints", path: env.AdminPath("/admin/v1/webhook-endpoints"), token: env.AdminKey},
	}
	queries := []struct {
		query string
		field string
	}{
		{query: "limit=%zz", field: "limit"},
		{query: "limit=%", field: "limit"},
		{query: "limit=5%2", field: "limit"},
		{query: "limit=5;x=1", field: "limit"},
		{query: "lastKey=%zz", field: "lastKey"},
		{query: "%zz=1", field: "%zz"},
		{query: "other=%g0&limit=5", field: "other"},
		{query: "limit=5&other=%g0", field: "other"},
	}
	var scenarios []testsuite.Scenario
	for _, l := range lists {
		scenarios = append(scenarios, testsuite.Scenario{Name: l.name + "/well formed", Path: l.path + "?limit=5&other=a%20b", Token: l.token,
			Headers: l.headers, Status: http.StatusOK})
		for _, q := range queries {
			field := q.field
			scenarios = append(scenarios, testsuite.Scenario{
				Name: l.name + "/" + q.query, Path: l.path + "?" + q.query, Token: l.token, Headers: l.headers,
				Status: http.StatusBadRequest,
				Check: func(t testing.TB, r *testsuite.Response) {
					assert.Equal(t, []string{field}, r.ValidationFields(), "%s", r.Body)
				},
			})
		}
	}
	testsuite.RunScenarios(t, env, scenarios)
}
