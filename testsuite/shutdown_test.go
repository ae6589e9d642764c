package testsuite_test

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSigtermFinishesInFlightDelivery sends SIGTERM to the real binary
// while a delivery is in flight: the attempt finishes, the process exits 0,
// and after a restart on the same data the event is delivered, its
// attempt recorded once and never sent again.
func TestSigtermFinishesInFlightDelivery(t *testing.T) {
	badgerPassOnly(t)
	bin := rxgateBinary(t)
	cfgPath, key := serveConfig(t, "")

	var mu sync.Mutex
	requests := 0
	arrived, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		requests++
		mu.Unlock()
		once.Do(func() { close(arrived) })
		<-release
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })

	proc := startBinary(t, bin, cfgPath)
	env := proc.env(t, key)
	tn := env.NewTenant(t)
	validate(t, env, tn)
	registerEndpoint(t, env, tn.PartnerID, srv.URL+"/")
	scid := prescribe(t, env, tn)
	eventID := eventOf(t, env, tn, scid)["event_id"].(string)

	<-arrived // the delivery is in flight
	require.NoError(t, proc.cmd.Process.Signal(syscall.SIGTERM))
	releaseOnce.Do(func() { close(release) }) // the receiver answers during the shutdown
	require.NoError(t, proc.cmd.Wait(), "SIGTERM drains and exits 0")

	proc = startBinary(t, bin, cfgPath)
	env = proc.env(t, key)
	r := waitFor(t, env, eventID, hasStatus("delivered"))
	attempts, ok := r.Get("data.attempts")
	require.True(t, ok)
	assert.Len(t, attempts, 1, "the finished attempt is recorded once: %s", r.Body)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, 1, requests, "the delivered event is not sent again after the restart")
}
