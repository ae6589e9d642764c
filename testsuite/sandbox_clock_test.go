package testsuite_test

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/config"
	"github.com/rxgate/rxgate/queue"
	"github.com/rxgate/rxgate/queue/receiver"
	"github.com/rxgate/rxgate/testsuite"
)

const sandboxClockPath = "/admin/v1/sandbox/clock"

// TestSandboxClockRefusedByServe: a server that is not a sandbox answers
// 409 in the error envelope, saying the clock moves in the sandbox only.
func TestSandboxClockRefusedByServe(t *testing.T) {
	t.Parallel()
	env := testsuite.Start(t)
	r := env.Admin(t, http.MethodPost, sandboxClockPath, map[string]any{"advance": "1h"})
	require.Equal(t, http.StatusConflict, r.Status, "%s", r.Body)
	assert.Contains(t, string(r.Body), "only in rxgate sandbox")
	assert.Equal(t, false, mustGet(t, r, "success"))
}

// TestSandboxClock: advancing by the backoff makes a failed delivery
// retry at once; advancing past a token's lifetime makes it expire; the
// input is bounded.
func TestSandboxClock(t *testing.T) {
	t.Parallel()
	clock := queue.NewOffsetClock()
	env := testsuite.Start(t, testsuite.WithSandboxClock(clock), testsuite.WithConfig(func(c *config.Config) {
		c.Webhooks.AllowInsecureLoopback = true
		c.Webhooks.BackoffBase = time.Hour
		c.Webhooks.BackoffMax = time.Hour
	}))
	tn := env.NewTenant(t)

	for _, bad := range []any{"0s", "-1h", "31d", "721h", "soon", "", 3600, nil} {
		r := env.Admin(t, http.MethodPost, sandboxClockPath, map[string]any{"advance": bad})
		assert.Contains(t, []int{http.StatusBadRequest, http.StatusUnprocessableEntity}, r.Status, "%v: %s", bad, r.Body)
	}
	assert.Zero(t, clock.Offset(), "nothing moved on bad input")

	// A delivery that fails once waits an hour for its retry.
	hook := newHookReceiver(t)
	var calls atomic.Int32
	hook.respond = func(*receiver.Delivery) int {
		if calls.Add(1) == 1 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	}
	_, secret := registerEndpoint(t, env, tn.PartnerID, hook.URL)
	hook.arm(secret)
	validate(t, env, tn)
	prescribe(t, env, tn)
	first := hook.next(t)
	require.NoError(t, first.Err)
	require.Equal(t, http.StatusServiceUnavailable, first.Status)
	waitFor(t, env, first.EventID, func(r *testsuite.Response) bool {
		a, _ := r.Get("data.attempts")
		return len(a.([]any)) == 1
	})
	hook.none(t)

	token := tn.Token(t, testsuite.RolePrescriber)
	ok := env.Do(t, testsuite.Request{URL: tn.ValidatePath(), Token: token, Headers: tn.Headers()})
	require.Equal(t, http.StatusOK, ok.Status, "%s", ok.Body)

	r := env.MustAdmin(t, http.MethodPost, sandboxClockPath, map[string]any{"advance": "2d"}, http.StatusOK)
	assert.Equal(t, float64(48*3600), mustGet(t, r, "data.advanced_seconds"))
	assert.Equal(t, float64(48*3600), mustGet(t, r, "data.offset_seconds"))
	now, err := time.Parse(time.RFC3339Nano, r.String(t, "data.now"))
	require.NoError(t, err)
	assert.WithinDuration(t, time.Now().Add(48*time.Hour), now, time.Minute)

	second := hook.next(t)
	require.NoError(t, second.Err, "the retry is signed with the moved clock and the receiver's tolerance is its own")
	assert.Equal(t, first.EventID, second.EventID)
	waitFor(t, env, first.EventID, hasStatus("delivered"))

	expired := env.Do(t, testsuite.Request{URL: tn.ValidatePath(), Token: token, Headers: tn.Headers()})
	assert.Equal(t, http.StatusUnauthorized, expired.Status, "the token expired on the moved clock: %s", expired.Body)
}

func mustGet(t testing.TB, r *testsuite.Response, path string) any {
	t.Helper()
	v, ok := r.Get(path)
	require.True(t, ok, "%s in %s", path, r.Body)
	return v
}
