package testsuite_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/config"
	"github.com/rxgate/rxgate/testsuite"
)

// TestEnvelopeErrorClasses checks that every error class the server can
// produce from outside answers in the spec 2.2 envelope, with its status and
// slug (the runner checks the envelope of each).
func TestEnvelopeErrorClasses(t *testing.T) {
	t.Parallel()
	env := testsuite.Start(t)
	tn := env.NewTenant(t)
	key := env.AdminKey
	admin := env.AdminPath
	unknown := uuid.NewString()

	tests := []testsuite.Scenario{
		// Unknown routes.
		{Name: "unknown partner route", Path: "/v1/nothing-here", Status: http.StatusNotFound, Slug: "not-found"},
		{Name: "unknown path outside the base path", Path: env.PartnerURL + "/nothing-here", Status: http.StatusNotFound, Slug: "not-found"},
		{Name: "unknown operator route", Path: admin("/admin/v1/nothing-here"), Token: key, Status: http.StatusNotFound, Slug: "not-found"},
		{Name: "unknown operator root route", Path: admin("/nothing-here"), Status: http.StatusNotFound, Slug: "not-found"},

		// Wrong method on a known path.
		{Name: "DELETE on the operator partner list", Method: http.MethodDelete, Path: admin("/admin/v1/partners"), Token: key,
			Status: http.StatusMethodNotAllowed, Slug: "method-not-allowed", Check: func(t testing.TB, r *testsuite.Response) {
				allow := r.Header.Get("Allow")
				assert.Contains(t, allow, "GET", "a 405 names the allowed methods (RFC 9110 15.5.6)")
				assert.Contains(t, allow, "POST", "a 405 names the allowed methods (RFC 9110 15.5.6)")
			}},
		{Name: "PUT on an operator organization", Method: http.MethodPut, Path: admin(tn.OrgPath()), Token: key,
			Body: map[string]any{"name": "x"}, Status: http.StatusMethodNotAllowed, Slug: "method-not-allowed"},
		{Name: "POST on the partner validate operation", Method: http.MethodPost, Path: tn.ValidatePath(),
			Status: http.StatusMethodNotAllowed, Slug: "method-not-allowed"},
		{Name: "POST on the partner healthz", Method: http.MethodPost, Path: env.PartnerURL + "/healthz",
			Status: http.StatusMethodNotAllowed, Slug: "method-not-allowed"},

		// Malformed JSON on operator POSTs.
		{Name: "truncated JSON", Method: http.MethodPost, Path: admin("/admin/v1/partners"), Token: key,
			Body: `{"name": "acme"`, Status: http.StatusBadRequest, Slug: "invalid-request"},
		{Name: "not JSON at all", Method: http.MethodPost, Path: admin("/admin/v1/organizations"), Token: key,
			Body: `name=acme`, Status: http.StatusBadRequest, Slug: "invalid-request"},
		{Name: "JSON that is not an object", Method: http.MethodPost, Path: admin("/admin/v1/partners"), Token: key,
			Body: `["acme"]`, Status: http.StatusBadRequest},

		// Wrong content type.
		{Name: "text/plain body", Method: http.MethodPost, Path: admin("/admin/v1/partners"), Token: key,
			Headers: map[string]string{"Content-Type": "text/plain"}, Body: `{"name": "acme"}`,
			Status: http.StatusUnsupportedMediaType, Slug: "unsupported-media-type"},
		{Name: "form body", Method: http.MethodPost, Path: admin("/admin/v1/partners"), Token: key,
			Headers: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, Body: `name=acme`,
			Status: http.StatusUnsupportedMediaType, Slug: "unsupported-media-type"},

		{Name: "JSON with a charset parameter is accepted", Method: http.MethodPost, Path: admin("/admin/v1/partners"), Token: key,
			Headers: map[string]string{"Content-Type": "application/json; charset=utf-8"}, Body: `{"name": "acme"}`,
			Status: http.StatusCreated},
		{Name: "no content type", Method: http.MethodPost, Path: admin("/admin/v1/partners"), Token: key,
			Headers: map[string]string{"Content-Type": ""}, Body: `{"name": "acme"}`,
			Status: http.StatusUnsupportedMediaType, Slug: "unsupported-media-type"},

		// Operator validation: every problem at once.
		{Name: "user create with several invalid fields", Method: http.MethodPost, Path: admin(tn.OrgPath() + "/users"), Token: key,
			Body:   map[string]any{"user_id": "not-a-uuid", "email": "not-an-email", "role": "boss", "title": strings.Repeat("t", 31)},
			Status: http.StatusUnprocessableEntity, Slug: "validation-error",
			Check: func(t testing.TB, r *testsuite.Response) {
				assert.Subset(t, r.ValidationFields(), []string{"user_id", "email", "given_name", "family_name", "title", "role"})
			}},
		{Name: "organization create with nothing", Method: http.MethodPost, Path: admin("/admin/v1/organizations"), Token: key,
			Body: map[string]any{}, Status: http.StatusUnprocessableEntity, Slug: "validation-error",
			Check: func(t testing.TB, r *testsuite.Response) {
				assert.Subset(t, r.ValidationFields(), []string{"name", "partner_id"})
			}},
		{Name: "member of the wrong JSON type", Method: http.MethodPost, Path: admin("/admin/v1/partners"), Token: key,
			Body: map[string]any{"name": 42}, Status: http.StatusUnprocessableEntity, Slug: "validation-error",
			Check: func(t testing.TB, r *testsuite.Response) {
				assert.Equal(t, []string{"name"}, r.ValidationFields())
			}},

		// Unknown ids on the operator API.
		{Name: "unknown organization", Path: admin("/admin/v1/organizations/" + unknown), Token: key,
			Status: http.StatusNotFound, NotContains: []string{"storage:", "badger"}},
		{Name: "organization id that is not a uuid", Path: admin("/admin/v1/organizations/not-a-uuid"), Token: key,
			Status: http.StatusNotFound},
		{Name: "rotate the secret of an unknown partner", Method: http.MethodPost, Path: admin("/admin/v1/partners/" + unknown + "/rotate-secret"),
			Token: key, Status: http.StatusNotFound},
		{Name: "rotate the secret of an unknown organization", Method: http.MethodPost, Path: admin("/admin/v1/organizations/" + unknown + "/rotate-secret"),
			Token: key, Status: http.StatusNotFound},
		{Name: "user in an unknown organization", Method: http.MethodPost, Path: admin("/admin/v1/organizations/" + unknown + "/users"), Token: key,
			Body:   map[string]any{"email": "x@example.test", "given_name": "X", "family_name": "Y", "role": "member"},
			Status: http.StatusNotFound},
		{Name: "unknown user", Path: admin(tn.OrgPath() + "/users/" + unknown), Token: key, Status: http.StatusNotFound},
		{Name: "unknown patient", Path: admin(tn.UserPath(testsuite.RolePrescriber) + "/patients/" + unknown), Token: key,
			Status: http.StatusNotFound},
		{Name: "patient of another user", Path: admin(tn.UserPath(testsuite.RoleMember) + "/patients/" + tn.PatientID), Token: key,
			Status: http.StatusNotFound},
		{Name: "prescription for an unknown patient", Method: http.MethodPost,
			Path: admin(tn.UserPath(testsuite.RolePrescriber) + "/patients/" + unknown + "/prescriptions"), Token: key,
			Body: map[string]any{"item_name": "Amoxicillin 500 mg capsule", "quantity": "20"}, Status: http.StatusNotFound},
		{Name: "status of an unknown prescription", Method: http.MethodPatch, Path: admin(tn.PatientPath() + "/prescriptions/ABCDEFGHIJ12345678"),
			Token: key, Body: map[string]any{"status": "Ceased"}, Status: http.StatusNotFound},
		{Name: "token for an unknown user", Method: http.MethodPost, Path: admin("/admin/v1/tokens"), Token: key,
			Body: map[string]any{"organization_id": tn.OrgID, "user_id": unknown}, Status: http.StatusNotFound},

		// Duplicate e-mail in one organization, whatever its case.
		{Name: "duplicate user e-mail", Method: http.MethodPost, Path: admin(tn.OrgPath() + "/users"), Token: key,
			Body:   map[string]any{"email": tn.Emails[testsuite.RoleMember], "given_name": "Sam", "family_name": "Lee", "role": "member"},
			Status: http.StatusConflict, Slug: "conflict"},
		{Name: "duplicate user e-mail in other case", Method: http.MethodPost, Path: admin(tn.OrgPath() + "/users"), Token: key,
			Body:   map[string]any{"email": strings.ToUpper(tn.Emails[testsuite.RoleMember]), "given_name": "Sam", "family_name": "Lee", "role": "member"},
			Status: http.StatusConflict, Slug: "conflict"},
	}
	testsuite.RunScenarios(t, env, tests)
}

// TestEnvelopeBodyLimit checks the 413 answer to a body over
// http.max_body_bytes, whether its length is announced or streamed.
func TestEnvelopeBodyLimit(t *testing.T) {
	t.Parallel()
	const limit = 256
	env := testsuite.Start(t, testsuite.WithConfig(func(c *config.Config) { c.HTTP.MaxBodyBytes = limit }))
	big := `{"name": "` + strings.Repeat("a", 2*limit) + `"}`

	tests := []struct {
		name string
		body any
		want int
	}{
		{name: "announced length over the limit", body: big, want: http.StatusRequestEntityTooLarge},
		{name: "streamed body over the limit", body: strings.NewReader(big), want: http.StatusRequestEntityTooLarge},
		{name: "body under the limit", body: `{"name": "small"}`, want: http.StatusCreated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := env.Do(t, testsuite.Request{Method: http.MethodPost, URL: env.AdminPath("/admin/v1/partners"), Token: env.AdminKey, Body: tt.body})
			require.Equal(t, tt.want, r.Status, "body: %s", r.Body)
			env.CheckEnvelope(t, r)
			if tt.want == http.StatusRequestEntityTooLarge {
				assert.Equal(t, "payload-too-large", r.Slug())
			}
		})
	}
}

// TestEnvelopeRequestID checks X-Request-Id: a caller's safe id is echoed in
// the header and requestId; an unsafe one is replaced by the server's own.
func TestEnvelopeRequestID(t *testing.T) {
	t.Parallel()
	env := testsuite.Start(t)

	tests := []struct {
		name   string
		url    string
		id     string
		echoed bool
	}{
		{name: "safe id on a success", url: env.PartnerURL + "/healthz", id: "req-42_a.B", echoed: true},
		{name: "safe id on an error", url: "/v1/nothing-here", id: "trace-0001", echoed: true},
		{name: "safe id on the operator API", url: env.AdminPath("/admin/v1/partners"), id: "op-7", echoed: true},
		{name: "id of 64 characters", url: env.PartnerURL + "/healthz", id: strings.Repeat("a", 64), echoed: true},
		{name: "id with markup", url: env.PartnerURL + "/healthz", id: "<script>alert(1)</script>"},
		{name: "id with spaces", url: "/v1/nothing-here", id: "a b"},
		{name: "id with a quote", url: env.PartnerURL + "/healthz", id: `a"b`},
		{name: "id of 65 characters", url: env.PartnerURL + "/healthz", id: strings.Repeat("a", 65)},
		{name: "no id", url: env.PartnerURL + "/healthz"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := testsuite.Request{URL: tt.url, Token: env.AdminKey}
			if tt.id != "" {
				req.Headers = map[string]string{"X-Request-Id": tt.id}
			}
			r := env.Do(t, req)
			env.CheckEnvelope(t, r)
			got := r.Header.Get("X-Request-Id")
			require.NotEmpty(t, got)
			if tt.echoed {
				assert.Equal(t, tt.id, got)
				return
			}
			if tt.id != "" {
				assert.NotEqual(t, tt.id, got)
				assert.NotContains(t, string(r.Body), tt.id, "the unsafe id must not be reflected anywhere")
			}
			_, err := uuid.Parse(got)
			assert.NoError(t, err, "a replaced id is a uuid, got %q", got)
		})
	}

	t.Run("ids differ between requests", func(t *testing.T) {
		a := env.Do(t, testsuite.Request{URL: env.PartnerURL + "/healthz"})
		b := env.Do(t, testsuite.Request{URL: env.PartnerURL + "/healthz"})
		assert.NotEqual(t, a.RequestID(), b.RequestID())
	})
}

// TestEnvelopeHealth checks /healthz and /readyz on both listeners.
func TestEnvelopeHealth(t *testing.T) {
	t.Parallel()
	env := testsuite.Start(t)

	var tests []testsuite.Scenario
	for _, listener := range []struct{ name, root string }{
		{"partner", env.PartnerURL},
		{"operator", env.AdminURL},
	} {
		tests = append(tests,
			testsuite.Scenario{Name: listener.name + " healthz", Path: listener.root + "/healthz", Status: http.StatusOK,
				Check: func(t testing.TB, r *testsuite.Response) { assert.Equal(t, "ok", r.String(t, "data.status")) }},
			testsuite.Scenario{Name: listener.name + " readyz", Path: listener.root + "/readyz", Status: http.StatusOK,
				Check: func(t testing.TB, r *testsuite.Response) { assert.Equal(t, "ready", r.String(t, "data.status")) }},
			testsuite.Scenario{Name: listener.name + " healthz needs no key", Path: listener.root + "/healthz",
				Headers: map[string]string{"Authorization": "Bearer wrong"}, Status: http.StatusOK},
		)
	}
	testsuite.RunScenarios(t, env, tests)
}
