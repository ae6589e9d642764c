package testsuite_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/config"
	"github.com/rxgate/rxgate/queue"
	"github.com/rxgate/rxgate/queue/receiver"
	"github.com/rxgate/rxgate/queue/signature"
	"github.com/rxgate/rxgate/testsuite"
)

// operatorHook receives the operational events.
type operatorHook struct {
	URL    string
	posts  chan operatorPost
	server *httptest.Server
}

type operatorPost struct {
	header http.Header
	body   []byte
}

func newOperatorHook(t *testing.T) *operatorHook {
	h := &operatorHook{posts: make(chan operatorPost, 16)}
	h.server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		h.posts <- operatorPost{header: r.Header.Clone(), body: body}
	}))
	t.Cleanup(h.server.Close)
	h.URL = h.server.URL + "/ops"
	return h
}

func (h *operatorHook) next(t *testing.T) operatorPost {
	t.Helper()
	select {
	case p := <-h.posts:
		return p
	case <-time.After(20 * time.Second):
		t.Fatal("no operational event within 20s")
	}
	return operatorPost{}
}

// TestEndpointAutoDisableAndRecover: an endpoint whose every attempt fails
// for webhooks.disable_after is disabled (the time moved by the sandbox
// clock); the operator's webhook receives a signed endpoint.disabled, the
// metrics count it, its deliveries are held; enable resumes them, and
// recover replays its failed events with due times spread by
// webhooks.recover_rate.
func TestEndpointAutoDisableAndRecover(t *testing.T) {
	t.Parallel()
	const opSecret = "operator-secret-0123456789abcdef"
	ops := newOperatorHook(t)
	clock := queue.NewOffsetClock()
	env := testsuite.Start(t, testsuite.WithSandboxClock(clock), testsuite.WithConfig(func(c *config.Config) {
		c.Webhooks.AllowInsecureLoopback = true
		c.Webhooks.BackoffBase = time.Hour
		c.Webhooks.BackoffMax = time.Hour
		c.Webhooks.MaxAttempts = 3
		c.Webhooks.DisableAfter = 3 * time.Hour
		c.Webhooks.RecoverRate = 5
		c.Webhooks.OperatorURL = ops.URL
		c.Webhooks.OperatorSecret = opSecret
	}))
	env.RequireInProcess(t)
	tn := env.NewTenant(t)
	hook := newHookReceiver(t)
	var healthy atomic.Bool
	hook.respond = func(*receiver.Delivery) int {
		if healthy.Load() {
			return http.StatusOK
		}
		return http.StatusServiceUnavailable
	}
	id, secret := registerEndpoint(t, env, tn.PartnerID, hook.URL)
	hook.arm(secret)
	validate(t, env, tn)
	since := clock.Now().Add(-time.Minute)
	const events = 3
	var ids []string
	for range events {
		ids = append(ids, eventOf(t, env, tn, prescribe(t, env, tn))["event_id"].(string))
	}
	attempts := func(n int) {
		t.Helper()
		for range events {
			require.Equal(t, http.StatusServiceUnavailable, hook.next(t).Status)
		}
		for _, ev := range ids {
			waitFor(t, env, ev, func(r *testsuite.Response) bool {
				a, _ := r.Get("data.attempts")
				return len(a.([]any)) == n
			})
		}
	}
	endpoint := func() *testsuite.Response {
		return env.MustAdmin(t, http.MethodGet, endpointsPath+"/"+id, nil, http.StatusOK)
	}

	attempts(1)
	r := endpoint()
	assert.Equal(t, false, mustGet(t, r, "data.disabled"))
	assert.NotEmpty(t, r.String(t, "data.failing_since"), "the failing streak began")

	clock.Advance(2 * time.Hour) // past the retry's backoff (1h +-20%)
	attempts(2)
	assert.Equal(t, false, mustGet(t, endpoint(), "data.disabled"), "failing for 2h of 3h")

	clock.Advance(2 * time.Hour)
	attempts(3) // the last attempt: each event fails for good, at 4h of failing
	for _, ev := range ids {
		waitFor(t, env, ev, hasStatus("failed"))
	}
	r = endpoint()
	require.Equal(t, true, mustGet(t, r, "data.disabled"), "every attempt failed for 3h: %s", r.Body)
	assert.NotEmpty(t, r.String(t, "data.disabled_at"))
	assert.NotEmpty(t, r.String(t, "data.disabled_reason"))

	// The operational event, signed with the operator's own secret.
	p := ops.next(t)
	require.NoError(t, signature.Verify([]string{opSecret}, p.header.Get(signature.HeaderName), p.body, time.Now()),
		"the operator's webhook verifies with webhooks.operator_secret")
	testsuite.CheckAdminSchema(t, "OperatorEndpointDisabledEvent", p.body)
	assert.Equal(t, p.header.Get("X-Webhook-Id"), mustJSON(t, p.body)["id"])
	var ev queue.OperatorEvent
	require.NoError(t, json.Unmarshal(p.body, &ev))
	assert.Equal(t, "endpoint.disabled", ev.Type)
	assert.Equal(t, id, ev.Data.EndpointID)
	assert.Equal(t, tn.PartnerID, ev.Data.PartnerID)
	assert.NotContains(t, string(p.body), secret, "no secret in the event")
	assert.NotContains(t, string(p.body), hook.URL, "no URL in the event")

	families := scrape(t, env)
	n, ok := sample(families, "rxgate_webhook_endpoints_disabled_total", nil)
	assert.True(t, ok)
	assert.Equal(t, 1.0, n)
	n, ok = sample(families, "rxgate_webhook_endpoints_disabled", nil)
	assert.True(t, ok)
	assert.Equal(t, 1.0, n)

	// Held: a new event's delivery waits, however much time passes.
	held := eventOf(t, env, tn, prescribe(t, env, tn))["event_id"].(string)
	clock.Advance(2 * time.Hour)
	r = env.MustAdmin(t, http.MethodGet, "/admin/v1/events/"+held, nil, http.StatusOK)
	assert.Equal(t, "pending", r.String(t, "data.status"))
	a, _ := r.Get("data.attempts")
	assert.Empty(t, a, "a disabled endpoint's delivery is held")
	hook.none(t)

	// Recovering a disabled endpoint is refused: enable it first.
	env.MustAdmin(t, http.MethodPost, endpointsPath+"/"+id+"/recover", map[string]any{"since": since.Format(time.RFC3339Nano)}, http.StatusConflict)
	env.MustAdmin(t, http.MethodPost, endpointsPath+"/"+id+"/recover", map[string]any{"since": "yesterday"}, http.StatusUnprocessableEntity)

	// The console shows the badge and the Enable button, which enables.
	c := newConsole(t, env)
	csrf := c.signIn()
	page := c.get("/console/endpoints")
	require.Equal(t, http.StatusOK, page.status)
	assert.Contains(t, page.body, `<span class="badge disabled"`)
	assert.Contains(t, page.body, `action="/console/endpoints/`+id+`/enable"`)
	assert.NotContains(t, page.body, `action="/console/endpoints/`+id+`/recover"`, "recover only once enabled")
	healthy.Store(true)
	page = c.post("/console/endpoints/"+id+"/enable", url.Values{"csrf": {csrf}})
	require.Equal(t, http.StatusSeeOther, page.status, page.body)
	assert.Equal(t, "/console/endpoints?notice=enabled", page.header.Get("Location"))
	r = env.MustAdmin(t, http.MethodPost, endpointsPath+"/"+id+"/enable", nil, http.StatusOK)
	assert.Equal(t, false, mustGet(t, r, "data.disabled"), "enabling an enabled endpoint changes nothing")
	d := hook.next(t)
	assert.Equal(t, held, d.EventID, "enabled: the held delivery resumes")
	waitFor(t, env, held, hasStatus("delivered"))
	_, failing := endpoint().Get("data.failing_since")
	assert.False(t, failing, "a success ends the streak")

	// Recover: the three failed events, due 1/5 s apart.
	r = env.MustAdmin(t, http.MethodPost, endpointsPath+"/"+id+"/recover", map[string]any{"since": since.Format(time.RFC3339Nano)}, http.StatusOK)
	assert.Equal(t, float64(events), mustGet(t, r, "data.replayed"))
	assert.Equal(t, float64(0), mustGet(t, r, "data.skipped"))
	first, err := time.Parse(time.RFC3339Nano, r.String(t, "data.first_due"))
	require.NoError(t, err)
	last, err := time.Parse(time.RFC3339Nano, r.String(t, "data.last_due"))
	require.NoError(t, err)
	assert.Equal(t, time.Duration(events-1)*time.Second/5, last.Sub(first), "due times spread by webhooks.recover_rate")
	got := map[string]bool{}
	for range events {
		got[hook.next(t).EventID] = true
	}
	for _, ev := range ids {
		assert.True(t, got[ev], "event %s replayed", ev)
		waitFor(t, env, ev, hasStatus("delivered"))
	}

	// The console's Recover form: a healthy badge, a bad time refused,
	// nothing failed since now.
	page = c.get("/console/endpoints")
	assert.Contains(t, page.body, `<span class="badge healthy"`)
	assert.Contains(t, page.body, `action="/console/endpoints/`+id+`/recover"`)
	page = c.post("/console/endpoints/"+id+"/recover", url.Values{"csrf": {csrf}, "since": {"last week"}})
	assert.Equal(t, http.StatusUnprocessableEntity, page.status)
	page = c.post("/console/endpoints/"+id+"/recover", url.Values{"csrf": {csrf}, "since": {clock.Now().Format(time.RFC3339)}})
	require.Equal(t, http.StatusSeeOther, page.status, page.body)
	assert.Equal(t, "/console/endpoints?notice=recovered", page.header.Get("Location"))
	hook.none(t)
}

func mustJSON(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	return m
}
