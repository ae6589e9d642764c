package testsuite_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/app"
	"github.com/rxgate/rxgate/app/openapi"
	"github.com/rxgate/rxgate/config"
	"github.com/rxgate/rxgate/queue/signature"
	"github.com/rxgate/rxgate/testsuite"
)

// TestMain runs the package's tests and removes the binary they shared
// (rxgateBinary), then fails the run when an operation of the OpenAPI
// documents was reached by no request of any test (issue 6). The check
// applies to full runs only: with -run, -skip or -list it is left out.
func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir) // rxgateBinary's build
	}
	if code == 0 {
		code = checkCoverage()
	}
	os.Exit(code)
}

func checkCoverage() int {
	for _, name := range []string{"test.run", "test.skip", "test.list"} {
		if f := flag.Lookup(name); f != nil && f.Value.String() != "" {
			fmt.Fprintf(os.Stderr, "testsuite: OpenAPI coverage not checked (-%s is set)\n", strings.TrimPrefix(name, "test."))
			return 0
		}
	}
	if os.Getenv(envOpenAPIReport) != "" {
		report()
	}
	if os.Getenv(testsuite.EnvBaseURL) != "" {
		// The in-process run proves the coverage; against a running
		// instance the tests that need an in-process server skip.
		fmt.Fprintf(os.Stderr, "testsuite: OpenAPI coverage not checked (the tests target %s)\n", os.Getenv(testsuite.EnvBaseURL))
		return 0
	}
	missing, err := testsuite.UncoveredOperations()
	if err != nil {
		fmt.Fprintf(os.Stderr, "testsuite: OpenAPI coverage: %v\n", err)
		return 1
	}
	if len(missing) == 0 {
		return 0
	}
	fmt.Fprintf(os.Stderr, "FAIL: testsuite: %d operations of the OpenAPI documents have no testsuite case:\n", len(missing))
	for _, op := range missing {
		fmt.Fprintf(os.Stderr, "\t%s\n", op)
	}
	return 1
}

// envOpenAPIReport, when set, makes TestMain list the statuses each
// operation answered during the run.
const envOpenAPIReport = "RXGATE_TEST_OPENAPI_REPORT"

func report() {
	ops, err := testsuite.ContractOperations()
	if err != nil {
		return
	}
	seen := testsuite.CoveredStatuses()
	fmt.Fprintln(os.Stderr, "testsuite: statuses answered per OpenAPI operation:")
	for _, op := range ops {
		fmt.Fprintf(os.Stderr, "\t%-75s %v\n", op, seen[op.Doc+" "+op.OperationID])
	}
}

// TestOpenAPIRoutesDocumented holds the routes the server registers against
// the operations of the documents, both ways.
func TestOpenAPIRoutesDocumented(t *testing.T) {
	t.Parallel()
	env := testsuite.Start(t)
	env.RequireInProcess(t)
	ops, err := testsuite.ContractOperations()
	require.NoError(t, err)

	documented := map[string]string{}
	for _, op := range ops {
		path := op.Path
		if op.Doc == testsuite.DocPartner && !op.Root {
			path = strings.TrimRight(env.Config.HTTP.BasePath, "/") + path
		}
		documented[op.Doc+" "+op.Method+" "+path] = op.OperationID
	}
	registered := map[string]bool{}
	partner, admin := env.App.Routes()
	for doc, routes := range map[string][]app.Route{testsuite.DocPartner: partner, testsuite.DocAdmin: admin} {
		for _, r := range routes {
			k := doc + " " + r.Method + " " + r.Path
			registered[k] = true
			assert.Contains(t, documented, k, "the server registers %s %s on the %s listener; document it", r.Method, r.Path, doc)
		}
	}
	for k, id := range documented {
		assert.True(t, registered[k], "%s (%s) is documented but the server registers no such route", k, id)
	}
}

// TestOpenAPIServed fetches both documents without credentials and checks
// that they validate, name the instance's URLs as servers and are the
// embedded documents.
func TestOpenAPIServed(t *testing.T) {
	t.Parallel()
	env := testsuite.Start(t)
	tests := []struct {
		name, url, server string
		embedded          func() ([]byte, error)
	}{
		{name: "partner", url: "/v1/openapi.json", server: env.BaseURL, embedded: func() ([]byte, error) { return openapi.Partner(env.BaseURL, env.PartnerURL) }},
		{name: "admin", url: env.AdminPath("/admin/v1/openapi.json"), server: env.AdminURL, embedded: func() ([]byte, error) { return openapi.Admin(env.AdminURL) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := env.Do(t, testsuite.Request{URL: tt.url})
			require.Equal(t, http.StatusOK, r.Status, "body: %.300s", r.Body)
			assert.Equal(t, "application/json", r.Header.Get("Content-Type"))
			doc, err := openapi3.NewLoader().LoadFromData(r.Body)
			require.NoError(t, err)
			require.NoError(t, doc.Validate(t.Context()))
			require.NotEmpty(t, doc.Servers)
			assert.Equal(t, tt.server, doc.Servers[0].URL)
			if env.InProcess() {
				want, err := tt.embedded()
				require.NoError(t, err)
				assert.True(t, bytes.Equal(want, r.Body), "the served document differs from the embedded one")
			}
		})
	}
	t.Run("partner root paths name the listener root", func(t *testing.T) {
		r := env.Do(t, testsuite.Request{URL: "/v1/openapi.json"})
		var doc struct {
			Paths map[string]struct {
				Servers []struct{ URL string } `json:"servers"`
			} `json:"paths"`
		}
		require.NoError(t, json.Unmarshal(r.Body, &doc))
		for _, p := range []string{"/healthz", "/readyz", "/.well-known/jwks.json"} {
			require.NotEmpty(t, doc.Paths[p].Servers, p)
			assert.Equal(t, env.PartnerURL, doc.Paths[p].Servers[0].URL, p)
		}
	})
}

// TestOpenAPIServiceRoutes reaches the service operations of both listeners
// (health and readiness by GET and HEAD, the JWKS), so that the contract
// hook checks their answers.
func TestOpenAPIServiceRoutes(t *testing.T) {
	t.Parallel()
	env := testsuite.Start(t)
	tests := []struct {
		name, method, url string
		status            int
	}{
		{"partner healthz", http.MethodGet, env.PartnerURL + "/healthz", http.StatusOK},
		{"partner healthz HEAD", http.MethodHead, env.PartnerURL + "/healthz", http.StatusOK},
		{"partner readyz", http.MethodGet, env.PartnerURL + "/readyz", http.StatusOK},
		{"partner readyz HEAD", http.MethodHead, env.PartnerURL + "/readyz", http.StatusOK},
		{"operator healthz", http.MethodGet, env.AdminPath("/healthz"), http.StatusOK},
		{"operator healthz HEAD", http.MethodHead, env.AdminPath("/healthz"), http.StatusOK},
		{"operator readyz", http.MethodGet, env.AdminPath("/readyz"), http.StatusOK},
		{"operator readyz HEAD", http.MethodHead, env.AdminPath("/readyz"), http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := env.Do(t, testsuite.Request{Method: tt.method, URL: tt.url})
			assert.Equal(t, tt.status, r.Status)
			assert.NotEmpty(t, r.Header.Get("X-Request-Id"))
		})
	}
	t.Run("jwks", func(t *testing.T) {
		env.RequireBuiltinIssuer(t)
		r := env.Do(t, testsuite.Request{URL: env.PartnerURL + "/.well-known/jwks.json"})
		require.Equal(t, http.StatusOK, r.Status)
		keys, ok := r.Get("keys")
		require.True(t, ok)
		assert.NotEmpty(t, keys)
	})
}

// TestOpenAPIHook checks that the contract hook catches each kind of
// disagreement, on crafted answers to requests aimed at a made-up
// instance.
func TestOpenAPIHook(t *testing.T) {
	t.Parallel()
	const (
		base  = "http://rxgate.test/external"
		admin = "http://rxgate-admin.test"
		org   = "3f2b8c1e-7a4d-4e9b-9c2a-1d5e6f7a8b90"
		user  = "8c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f"
		pat   = "5e6f7a8b-9c0d-4e1f-a2b3-c4d5e6f7a8b9"
		ts    = `"timestamp":"2026-11-22T06:47:44.123Z","requestId":"rid-1"`
	)
	env := &testsuite.Env{BaseURL: base, PartnerURL: "http://rxgate.test", AdminURL: admin, ErrorsBase: "https://errors.rxgate.dev"}
	validate := base + "/v1/organizations/" + org + "/validate"
	patient := base + "/v1/organizations/" + org + "/users/" + user + "/patients/" + pat
	okValidate := `{"success":true,"statusCode":200,"message":"Organization validated","code":"SUCCESS",` +
		`"data":{"organization_id":"` + org + `","validated":true,"validated_at":"2026-11-22T06:47:44.123Z"},` + ts + `}`
	errorBody := func(status int, code, slug string) string {
		return fmt.Sprintf(`{"success":false,"statusCode":%d,"code":%q,"error":{"type":"https://errors.rxgate.dev/%s","title":"T","detail":"D"},`+
			ts+`,"meta":{"apiVersion":"1.0"}}`, status, code, slug)
	}
	patientBody := `{"success":true,"statusCode":200,"message":"Patient updated successfully","code":"SUCCESS","data":{"patient_id":"` + pat +
		`","family_name":"Wilson","given_name":"Charlotte","date_of_birth":"1984-07-19","sex":"F","phone":"0412345678","email":null,` +
		`"medicare_card_number":null,"medicare_irn":null,"medicare_valid_to":null},` + ts + `}`

	tests := []struct {
		name         string
		method, url  string
		body         string
		status       int
		answer       string
		cache        string // the answer's Cache-Control; "" sends no-store, "-" none
		wantFailures bool
	}{
		{name: "documented answer", url: validate, status: 200, answer: okValidate},
		{name: "undocumented member", url: validate, status: 200, answer: strings.Replace(okValidate, `"validated":true`, `"validated":true,"secret":"x"`, 1), wantFailures: true},
		{name: "undocumented envelope member", url: validate, status: 200, answer: strings.Replace(okValidate, `"code":"SUCCESS"`, `"code":"SUCCESS","extra":1`, 1), wantFailures: true},
		{name: "missing required member", url: validate, status: 200, answer: strings.Replace(okValidate, `,"requestId":"rid-1"`, ``, 1), wantFailures: true},
		{name: "wrong type", url: validate, status: 200, answer: strings.Replace(okValidate, `"statusCode":200`, `"statusCode":"200"`, 1), wantFailures: true},
		{name: "undocumented status", url: validate, status: http.StatusTeapot, answer: errorBody(418, "BAD_REQUEST", "teapot"), wantFailures: true},
		{name: "documented error", url: validate, status: 401, answer: errorBody(401, "UNAUTHORIZED", "authentication-required")},
		{name: "answer without Cache-Control", url: validate, status: 200, answer: okValidate, cache: "-", wantFailures: true},
		{name: "cacheable authenticated answer", url: validate, status: 200, answer: okValidate, cache: "public, max-age=300", wantFailures: true},
		{name: "error without Cache-Control", url: validate, status: 401, answer: errorBody(401, "UNAUTHORIZED", "authentication-required"), cache: "-", wantFailures: true},
		{name: "error envelope without meta", url: validate, status: 401,
			answer: strings.Replace(errorBody(401, "UNAUTHORIZED", "authentication-required"), `,"meta":{"apiVersion":"1.0"}`, ``, 1), wantFailures: true},
		{name: "unknown path answered 404", url: base + "/v1/nothing", status: 404, answer: errorBody(404, "RESOURCE_NOT_FOUND", "not-found")},
		{name: "unknown path answered 200", url: base + "/v1/nothing", status: 200, answer: okValidate, wantFailures: true},
		{name: "unknown path with a malformed 404", url: base + "/v1/nothing", status: 404, answer: `{"message":"not found"}`, wantFailures: true},
		{name: "other method answered 405", method: http.MethodPost, url: validate, status: 405, answer: errorBody(405, "METHOD_NOT_ALLOWED", "method-not-allowed")},
		{name: "other method answered 200", method: http.MethodDelete, url: validate, status: 200, answer: okValidate, wantFailures: true},
		{name: "invalid request refused", method: http.MethodPut, url: patient, body: `{"phone":"12-34"}`, status: 422,
			answer: errorBody(422, "VALIDATION_ERROR", "validation-error")},
		{name: "invalid request accepted", method: http.MethodPut, url: patient, body: `{"phone":"12-34"}`, status: 200, answer: patientBody, wantFailures: true},
		{name: "valid request accepted", method: http.MethodPut, url: patient, body: `{"phone":"0412345678"}`, status: 200, answer: patientBody},
		{name: "operator answer checked against the operator document", url: admin + "/admin/v1/partners", status: 200, answer: okValidate, wantFailures: true},
		{name: "another server is not checked", url: "http://idp.test/jwks", status: 200, answer: `nonsense`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			method := tt.method
			if method == "" {
				method = http.MethodGet
			}
			req, err := http.NewRequest(method, tt.url, strings.NewReader(tt.body))
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer token")
			req.Header.Set(testsuite.HeaderOrganizationSecret, "secret")
			if tt.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			res := &testsuite.Response{Status: tt.status, Body: []byte(tt.answer), Header: http.Header{
				"Content-Type": {"application/json"}, "X-Request-Id": {"rid-1"},
			}}
			switch tt.cache {
			case "":
				res.Header.Set("Cache-Control", "no-store")
			case "-":
			default:
				res.Header.Set("Cache-Control", tt.cache)
			}
			rec := &recorder{}
			env.CheckContract(rec, req, res)
			assert.Equal(t, tt.wantFailures, len(rec.failures) > 0, "failures: %v", rec.failures)
		})
	}
}

// TestOpenAPIWebhookDelivery checks CheckWebhookDelivery on deliveries
// built as the queue builds them, and on broken ones.
func TestOpenAPIWebhookDelivery(t *testing.T) {
	t.Parallel()
	const id = "2c3d4e5f-6a7b-4c8d-9e0f-1a2b3c4d5e6f"
	body := `{"event_type":"prescription.created","event_id":"` + id + `","timestamp":"2026-11-22T06:47:44.123Z",` +
		`"partner_id":"1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d","organization_id":"3f2b8c1e-7a4d-4e9b-9c2a-1d5e6f7a8b90",` +
		`"data":{"patient_id":"5e6f7a8b-9c0d-4e1f-a2b3-c4d5e6f7a8b9","partner_patient_id":"","user_id":"8c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f","scid":"2XKQ7M4P9R1T6V3W8Y"}}`
	now := time.Now()
	tests := []struct {
		name    string
		sig, id string
		body    string
		wantOK  bool
	}{
		{name: "one secret", sig: signature.Header(now, []byte(body), "s1"), id: id, body: body, wantOK: true},
		{name: "rotation grace", sig: signature.Header(now, []byte(body), "new", "old"), id: id, body: body, wantOK: true},
		{name: "no signature", id: id, body: body},
		{name: "upper-case hex", sig: strings.ToUpper(signature.Header(now, []byte(body), "s1")), id: id, body: body},
		{name: "X-Webhook-Id differs", sig: signature.Header(now, []byte(body), "s1"), id: "other", body: body},
		{name: "undocumented member", sig: signature.Header(now, []byte(body), "s1"), id: id, body: strings.Replace(body, `"data"`, `"extra":1,"data"`, 1)},
		{name: "missing member", sig: signature.Header(now, []byte(body), "s1"), id: id, body: strings.Replace(body, `"partner_patient_id":"",`, ``, 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := http.Header{}
			if tt.sig != "" {
				h.Set(signature.HeaderName, tt.sig)
			}
			h.Set("X-Webhook-Id", tt.id)
			rec := &recorder{}
			assert.Equal(t, tt.wantOK, testsuite.CheckWebhookDelivery(rec, h, []byte(tt.body)), "failures: %v", rec.failures)
			assert.Equal(t, tt.wantOK, len(rec.failures) == 0, "failures: %v", rec.failures)
		})
	}
}

// TestOpenAPIWebhookPayload has the server deliver a real prescription.created
// and checks the delivery against the partner document's x-webhooks.
func TestOpenAPIWebhookPayload(t *testing.T) {
	t.Parallel()
	type delivery struct {
		header http.Header
		body   []byte
	}
	got := make(chan delivery, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- delivery{r.Header.Clone(), body}
	}))
	t.Cleanup(srv.Close)
	env := testsuite.Start(t, testsuite.WithConfig(func(c *config.Config) { c.Webhooks.AllowInsecureLoopback = true }))
	tn := env.NewTenant(t)
	r := env.Do(t, testsuite.Request{URL: tn.ValidatePath(), Token: tn.Token(t, testsuite.RolePrescriber), Headers: tn.Headers()})
	require.Equal(t, http.StatusOK, r.Status, "validate: %s", r.Body)
	env.MustAdmin(t, http.MethodPost, "/admin/v1/webhook-endpoints", map[string]any{"partner_id": tn.PartnerID, "url": srv.URL + "/hooks"}, http.StatusCreated)
	env.MustAdmin(t, http.MethodPost, tn.PatientPath()+"/prescriptions", map[string]any{"item_name": "Amoxicillin 500 mg capsule", "quantity": "20"}, http.StatusCreated)
	select {
	case d := <-got:
		testsuite.CheckWebhookDelivery(t, d.header, d.body)
	case <-time.After(20 * time.Second):
		t.Fatal("no delivery within 20s")
	}
}
