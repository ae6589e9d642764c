package testsuite_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/app"
	"github.com/rxgate/rxgate/queue/signature"
	"github.com/rxgate/rxgate/testsuite"
)

// TestWebhookTestSend: POST .../test sends a signed webhook.test event to
// that endpoint alone, through the real delivery path, and answers with
// its attempt; the roles matrix holds (a viewer may not, a partner key
// only on its own endpoints); the console's button does the same.
func TestWebhookTestSend(t *testing.T) {
	t.Parallel()
	env := startWebhooks(t)
	mine, theirs := env.NewTenant(t), env.NewTenant(t)
	hook := newHookReceiver(t)
	endpointID, secret := registerEndpoint(t, env, mine.PartnerID, hook.URL)
	hook.arm(secret)
	other := newHookReceiver(t)
	_, otherSecret := registerEndpoint(t, env, mine.PartnerID, other.URL) // the partner's other endpoint
	other.arm(otherSecret)
	theirID, _ := registerEndpoint(t, env, theirs.PartnerID, "https://hooks.example.test/"+testsuite.Unique("h"))

	r := env.MustAdmin(t, http.MethodPost, endpointsPath+"/"+endpointID+"/test", nil, http.StatusOK)
	var ev app.EventView
	r.DecodeData(t, &ev)
	assert.Equal(t, "webhook.test", ev.EventType)
	assert.Empty(t, ev.OrganizationID)
	require.Len(t, ev.Attempts, 1, "the attempt comes with the answer")
	require.NotNil(t, ev.Attempts[0].StatusCode)
	assert.Equal(t, http.StatusOK, *ev.Attempts[0].StatusCode)
	d := hook.next(t)
	require.NoError(t, d.Err, "signed with the endpoint's secret")
	assert.Equal(t, ev.EventID, d.EventID)
	assert.Contains(t, string(d.Body), `"event_type":"webhook.test"`)
	assert.NoError(t, signature.Verify([]string{secret}, d.Signature, d.Body, time.Now()))
	assert.Equal(t, d.Signature, ev.Attempts[0].Signature)
	other.none(t)
	replay := env.Admin(t, http.MethodPost, "/admin/v1/events/"+ev.EventID+"/replay", nil)
	assert.NotEqual(t, http.StatusOK, replay.Status, "a test send is not replayed: %s", replay.Body)
	assert.Less(t, replay.Status, 500, replay.Body)

	env.MustAdmin(t, http.MethodPost, endpointsPath+"/"+testsuite.Unique("x")+"/test", nil, http.StatusNotFound)
	env.MustAdmin(t, http.MethodPost, endpointsPath+"/0b1c2d3e-4f5a-4b6c-9d7e-8f9a0b1c2d3e/test", nil, http.StatusNotFound)

	do := func(key, id string) *testsuite.Response {
		return env.Do(t, testsuite.Request{Method: http.MethodPost, URL: env.AdminPath(endpointsPath + "/" + id + "/test"), Token: key})
	}
	_, viewer := operatorKey(t, env, "viewer")
	assert.Equal(t, http.StatusForbidden, do(viewer, endpointID).Status)
	_, operator := operatorKey(t, env, "operator")
	assert.Equal(t, http.StatusOK, do(operator, endpointID).Status)
	hook.next(t)
	_, partner := operatorKey(t, env, "partner:"+mine.PartnerID)
	assert.Equal(t, http.StatusOK, do(partner, endpointID).Status, "its own endpoint")
	hook.next(t)
	assert.Equal(t, http.StatusNotFound, do(partner, theirID).Status, "another partner's endpoint is as none")

	c := newConsole(t, env)
	csrf := c.signIn()
	pg := c.get("/console/endpoints")
	require.Contains(t, pg.body, `action="/console/endpoints/`+endpointID+`/test"`)
	p := c.post("/console/endpoints/"+endpointID+"/test", url.Values{"csrf": {csrf}})
	require.Equal(t, http.StatusSeeOther, p.status, p.body)
	loc := p.header.Get("Location")
	require.True(t, strings.HasPrefix(loc, "/console/events/"), loc)
	hook.next(t)
	pg = c.get(loc)
	require.Equal(t, http.StatusOK, pg.status)
	assert.Contains(t, pg.body, "webhook.test")
	assert.Contains(t, pg.body, `class="attempt"`, "the attempt shows at once")
	vc := newConsole(t, env)
	vc.signInWith(viewer)
	assert.NotContains(t, vc.get("/console/endpoints").body, "Send test event", "a viewer gets no button")
}
