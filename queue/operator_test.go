package queue_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/queue"
	"github.com/rxgate/rxgate/queue/signature"
)

// TestEndpointDisabledEvent: the attempt that makes an endpoint's failing
// streak reach DisableAfter reports it (Result.Disabled), and the
// operator's URL receives a signed endpoint.disabled, retried after a
// failed post.
func TestEndpointDisabledEvent(t *testing.T) {
	t.Parallel()
	const secret = "operator-secret"
	ops := newRecorder(t, func(n int, _ *http.Request) int {
		if n == 1 {
			return http.StatusInternalServerError
		}
		return http.StatusNoContent
	})
	failing := newRecorder(t, func(int, *http.Request) int { return http.StatusServiceUnavailable })
	h := newHarness(t, withOptions(func(o *queue.Options) {
		o.DisableAfter = time.Nanosecond
		o.OperatorURL, o.OperatorSecret = ops.server.URL, secret
	}))
	ep := h.endpoint(failing.server.URL)
	h.prescribe()
	first := h.next()
	assert.Nil(t, first.Disabled, "one failure is no streak yet")
	second := h.next()
	require.NotNil(t, second.Disabled, "the second failure is past DisableAfter")
	assert.Equal(t, ep.ID, second.Disabled.ID)

	deadline := time.Now().Add(20 * time.Second) // guards a hung test only
	for len(ops.got()) < 2 {
		require.True(t, time.Now().Before(deadline), "the operator's webhook was not posted again")
		time.Sleep(10 * time.Millisecond)
	}
	got := ops.got()
	assert.Equal(t, got[0].body, got[1].body, "the retry posts the same event")
	p := got[1]
	require.NoError(t, signature.Verify([]string{secret}, p.header.Get(signature.HeaderName), p.body, time.Now()))
	var ev queue.OperatorEvent
	require.NoError(t, json.Unmarshal(p.body, &ev))
	assert.Equal(t, queue.EventEndpointDisabled, ev.Type)
	assert.Equal(t, ep.ID, ev.Data.EndpointID)
	assert.Equal(t, ep.PartnerID, ev.Data.PartnerID)
	assert.NotContains(t, string(p.body), ep.Secret)
	assert.NotContains(t, string(p.body), ep.URL)
	require.NoError(t, h.q.Stop(contextWithTimeout(t, 10*time.Second)))
}
