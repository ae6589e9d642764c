package testsuite_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/queue"
	"github.com/rxgate/rxgate/testsuite"
)

// TestConsoleStandardSchemeAndClock registers an endpoint on the Standard
// Webhooks scheme from the console (its secret page shows whsec_, the
// list names the scheme) and moves the sandbox clock from the events page;
// a server that is not a sandbox shows no clock and refuses the form.
func TestConsoleStandardSchemeAndClock(t *testing.T) {
	t.Parallel()
	clock := queue.NewOffsetClock()
	env := testsuite.Start(t, testsuite.WithSandboxClock(clock))
	env.RequireInProcess(t)
	tn := env.NewTenant(t)
	c := newConsole(t, env)
	csrf := c.signIn()

	p := c.post("/console/endpoints", url.Values{"csrf": {csrf}, "partner_id": {tn.PartnerID}, "url": {"https://hooks.example/std"}, "signature_scheme": {"standard"}})
	require.Equal(t, http.StatusSeeOther, p.status, p.body)
	p = c.get(p.header.Get("Location"))
	require.Equal(t, http.StatusOK, p.status)
	assert.Contains(t, p.body, "whsec_", "the secret in the standard form")
	p = c.get("/console/endpoints")
	assert.Contains(t, p.body, "Standard Webhooks")
	p = c.post("/console/endpoints", url.Values{"csrf": {csrf}, "partner_id": {tn.PartnerID}, "url": {"https://hooks.example/x"}, "signature_scheme": {"svix"}})
	assert.Equal(t, http.StatusUnprocessableEntity, p.status)
	assert.Contains(t, p.body, `must be &#34;rxgate&#34; or &#34;standard&#34;`)

	p = c.get("/console/events")
	require.Equal(t, http.StatusOK, p.status)
	assert.Contains(t, p.body, `id="sandbox-clock"`)
	p = c.post("/console/sandbox/clock", url.Values{"csrf": {csrf}, "advance": {"7d"}})
	require.Equal(t, http.StatusSeeOther, p.status, p.body)
	assert.Equal(t, 7*24*3600, int(clock.Offset().Seconds()))
	p = c.get("/console/events")
	assert.Contains(t, p.body, `id="sandbox-offset">604800 s<`)
	p = c.post("/console/sandbox/clock", url.Values{"csrf": {csrf}, "advance": {"-1h"}})
	assert.Equal(t, http.StatusUnprocessableEntity, p.status)

	serve := testsuite.Start(t)
	serve.RequireInProcess(t)
	sc := newConsole(t, serve)
	scsrf := sc.signIn()
	p = sc.get("/console/events")
	assert.False(t, strings.Contains(p.body, `id="sandbox-clock"`), "no clock control outside the sandbox")
	p = sc.post("/console/sandbox/clock", url.Values{"csrf": {scsrf}, "advance": {"1h"}})
	assert.Equal(t, http.StatusConflict, p.status)
	assert.Contains(t, p.body, "only in rxgate sandbox")
}
