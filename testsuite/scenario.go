package testsuite

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Scenario is one declarative API check: a request, and what the answer must
// be.
type Scenario struct {
	// Name names the subtest; empty means "METHOD Path".
	Name string
	// Method defaults to GET.
	Method string
	// Path is relative to Env.BaseURL, or an absolute URL (for the operator
	// API, Env.AdminPath).
	Path string
	// Token is sent as a bearer token when set.
	Token string
	// Headers are added to the request.
	Headers map[string]string
	// Body is as in Request.Body; it is sent as application/json unless
	// Headers set a Content-Type.
	Body any
	// Status is the HTTP status the answer must have.
	Status int
	// Slug, when set, is the slug error.type must end in (checked on error
	// answers; a success where an error was expected fails on Status).
	Slug string
	// Contains and NotContains are substrings the raw body must and must
	// not hold.
	Contains, NotContains []string
	// Check, when set, inspects the answer further.
	Check func(t testing.TB, r *Response)
}

// RunScenarios runs each scenario as a subtest of t, in order, against env.
// Besides what a scenario asks, every answer's envelope is checked with
// Env.CheckEnvelope. Scenarios run one after another, so they may depend on
// state earlier ones created.
func RunScenarios(t *testing.T, env *Env, scenarios []Scenario) {
	t.Helper()
	for _, sc := range scenarios {
		name := sc.Name
		if name == "" {
			method := sc.Method
			if method == "" {
				method = http.MethodGet
			}
			name = method + " " + sc.Path
		}
		t.Run(name, func(t *testing.T) {
			RunScenario(t, env, sc)
		})
	}
}

// RunScenario runs one scenario in t (see RunScenarios).
func RunScenario(t testing.TB, env *Env, sc Scenario) *Response {
	t.Helper()
	if sc.Status == 0 {
		t.Fatalf("testsuite: scenario %q has no Status", sc.Name)
	}
	r := env.Do(t, Request{Method: sc.Method, URL: sc.Path, Token: sc.Token, Headers: sc.Headers, Body: sc.Body})
	assert.Equal(t, sc.Status, r.Status, "status; body: %s", r.Body)
	env.CheckEnvelope(t, r)
	if sc.Slug != "" && r.Status >= 400 {
		assert.Equal(t, sc.Slug, r.Slug(), "error.type slug; body: %s", r.Body)
	}
	body := string(r.Body)
	for _, s := range sc.Contains {
		assert.Contains(t, body, s, "the body must contain %q", s)
	}
	for _, s := range sc.NotContains {
		assert.NotContains(t, body, s, "the body must not contain %q", s)
	}
	if sc.Check != nil && r.Status == sc.Status {
		sc.Check(t, r)
	}
	return r
}
