package testsuite_test

import (
	"html"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/app"
	"github.com/rxgate/rxgate/queue/signature"
)

// TestWebhookAttemptDetail: every attempt keeps what debugging needs (the
// answer's headers and the start of its body, the error class, the
// signature header sent and which of the endpoint's secrets signed it, by
// id), in the operator API and on the console's event page.
func TestWebhookAttemptDetail(t *testing.T) {
	t.Parallel()
	env := startWebhooks(t)
	tn := env.NewTenant(t)
	var calls atomic.Int32
	var sent atomic.Value
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sent.Store(r.Header.Get(signature.HeaderName))
		w.Header().Set("X-Receiver", "express")
		if calls.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":"<signature verification failed>"}` + strings.Repeat(".", 5000)))
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(hook.Close)
	endpointID, secret := registerEndpoint(t, env, tn.PartnerID, hook.URL+"/hooks")
	ep := env.MustAdmin(t, http.MethodGet, endpointsPath+"/"+endpointID, nil, http.StatusOK)
	secretID := ep.String(t, "data.secret_id")
	require.Regexp(t, `^whk_[0-9a-f]{12}$`, secretID)
	require.NotContains(t, ep.Body, secret, "an id, never the secret")
	validate(t, env, tn)
	scid := prescribe(t, env, tn)
	id := eventOf(t, env, tn, scid)["event_id"].(string)
	r := waitFor(t, env, id, hasStatus("delivered"))
	require.NotContains(t, r.Body, secret)
	var ev app.EventView
	r.DecodeData(t, &ev)
	require.Len(t, ev.Attempts, 2)

	failed := ev.Attempts[0]
	require.NotNil(t, failed.ErrorClass)
	assert.Equal(t, "http_status", *failed.ErrorClass)
	assert.Equal(t, []string{secretID}, failed.SecretIDs)
	p, err := signature.Parse(failed.Signature)
	require.NoError(t, err, "the header as sent: %q", failed.Signature)
	assert.Len(t, p.Signatures, 1)
	require.NotNil(t, failed.Response)
	require.NotNil(t, failed.Response.Body)
	assert.True(t, strings.HasPrefix(*failed.Response.Body, `{"error":"<signature verification failed>"}`))
	assert.Len(t, *failed.Response.Body, 4096, "the first 4 KiB")
	assert.True(t, failed.Response.BodyTruncated)
	assert.Contains(t, failed.Response.Headers, [2]string{"X-Receiver", "express"})

	ok := ev.Attempts[1]
	assert.Nil(t, ok.ErrorClass, "delivered cleanly")
	assert.Equal(t, sent.Load(), ok.Signature, "the header the receiver got")
	require.NotNil(t, ok.Response)
	assert.Nil(t, ok.Response.Body, "no body")

	// After a rotation the attempts name both secrets, old first.
	rot := env.MustAdmin(t, http.MethodPost, endpointsPath+"/"+endpointID+"/rotate-secret", nil, http.StatusOK)
	newID, prevID := rot.String(t, "data.secret_id"), rot.String(t, "data.previous_secret_id")
	require.Equal(t, secretID, prevID, "a secret keeps its id across the rotation")
	require.NotEqual(t, secretID, newID)
	scid2 := prescribe(t, env, tn)
	id2 := eventOf(t, env, tn, scid2)["event_id"].(string)
	r = waitFor(t, env, id2, hasStatus("delivered"))
	var ev2 app.EventView
	r.DecodeData(t, &ev2)
	require.Len(t, ev2.Attempts, 1)
	assert.Equal(t, []string{prevID, newID}, ev2.Attempts[0].SecretIDs)

	c := newConsole(t, env)
	c.signIn()
	pg := c.get("/console/events/" + id)
	require.Equal(t, http.StatusOK, pg.status)
	body := html.UnescapeString(pg.body)
	for _, want := range []string{`class="error-class">http_status`, secretID, failed.Signature, `{"error":"<signature verification failed>"}`, "X-Receiver: express", "(first 4 KiB)"} {
		assert.Contains(t, body, want)
	}
}
