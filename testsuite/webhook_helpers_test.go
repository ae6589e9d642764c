package testsuite_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/config"
	"github.com/rxgate/rxgate/queue/receiver"
	"github.com/rxgate/rxgate/testsuite"
)

// startWebhooks starts an in-process server whose webhooks may go to
// plain-http loopback receivers and retry after milliseconds.
func startWebhooks(t testing.TB, opts ...func(*config.Config)) *testsuite.Env {
	t.Helper()
	return testsuite.Start(t, testsuite.WithConfig(func(c *config.Config) {
		c.Webhooks.AllowInsecureLoopback = true
		c.Webhooks.BackoffBase = time.Millisecond
		c.Webhooks.BackoffMax = 5 * time.Millisecond
		for _, o := range opts {
			o(c)
		}
	}))
}

// hookReceiver is a test endpoint: a receiver.Receiver (spec 6.4 alone)
// behind an httptest server, armed with the secrets once they are known.
type hookReceiver struct {
	URL        string
	server     *httptest.Server
	rcv        atomic.Pointer[receiver.Receiver]
	deliveries chan receiver.Delivery
	// respond, when set before arming, chooses the status of verified
	// deliveries.
	respond func(*receiver.Delivery) int
}

func newHookReceiver(t testing.TB) *hookReceiver {
	t.Helper()
	h := &hookReceiver{deliveries: make(chan receiver.Delivery, 1000)}
	h.server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rcv := h.rcv.Load()
		if rcv == nil {
			http.Error(w, "not armed", http.StatusServiceUnavailable)
			return
		}
		rcv.ServeHTTP(w, r)
	}))
	t.Cleanup(h.server.Close)
	h.URL = h.server.URL + "/hooks"
	return h
}

// arm makes the receiver verify with secrets.
func (h *hookReceiver) arm(secrets ...string) {
	h.rcv.Store(&receiver.Receiver{
		Secrets: secrets, Respond: h.respond,
		OnDelivery: func(d receiver.Delivery) { h.deliveries <- d },
	})
}

// next waits for the next delivery; the wait only guards against a hung
// test.
func (h *hookReceiver) next(t testing.TB) receiver.Delivery {
	t.Helper()
	select {
	case d := <-h.deliveries:
		return d
	case <-time.After(20 * time.Second):
		t.Fatal("no delivery within 20s")
	}
	return receiver.Delivery{}
}

// none asserts that nothing was delivered so far.
func (h *hookReceiver) none(t testing.TB) {
	t.Helper()
	select {
	case d := <-h.deliveries:
		t.Fatalf("unexpected delivery of %s: %s", d.EventID, d.Body)
	default:
	}
}

// waitFor polls the operator API until cond holds for the event, and
// returns the last answer. Delivery is recorded just after the receiver
// answers, so a test that saw a delivery waits here for the record.
func waitFor(t testing.TB, env *testsuite.Env, eventID string, cond func(*testsuite.Response) bool) *testsuite.Response {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		r := env.MustAdmin(t, http.MethodGet, "/admin/v1/events/"+eventID, nil, http.StatusOK)
		if cond(r) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("event %s never reached the expected state: %s", eventID, r.Body)
		}
		<-tick.C
	}
}

// hasStatus is a waitFor condition.
func hasStatus(status string) func(*testsuite.Response) bool {
	return func(r *testsuite.Response) bool {
		v, _ := r.Get("data.status")
		return v == status
	}
}

// rxgateBinary returns the real binary, built once per test process
// into a directory TestMain removes: every test that runs it runs the
// same build (a build after the first was still a whole link each time).
func rxgateBinary(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary; skipped with -short")
	}
	bin, err := builtBinary()
	require.NoError(t, err, "go build")
	return bin
}

// binDir holds the binary rxgateBinary built; TestMain removes it.
var binDir string

var builtBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "rxgate-testsuite-bin-")
	if err != nil {
		return "", err
	}
	binDir = dir
	bin := filepath.Join(dir, "rxgate")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/rxgate/rxgate")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%w\n%s", err, out)
	}
	return bin, nil
})

// prescriptionsAt reads one page of the tenant's patient's prescriptions
// with token (listPrescriptions) and returns its scids and the next page's
// lastKey ("" on the last page).
func prescriptionsAt(t testing.TB, env *testsuite.Env, tn *testsuite.Tenant, token string, limit int, lastKey string) (scids []string, next string) {
	t.Helper()
	path := strings.TrimPrefix(tn.PatientPath(), "/admin") + "/prescriptions?limit=" + strconv.Itoa(limit)
	if lastKey != "" {
		path += "&lastKey=" + lastKey
	}
	page, _ := listPrescriptions(t, env, tn, token, path)
	if page.Page.LastKey != nil {
		next = *page.Page.LastKey
	}
	return page.scids(), next
}
