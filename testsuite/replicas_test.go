package testsuite_test

import (
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage"
	"github.com/rxgate/rxgate/testsuite"
)

// replicaSet is several `rxgate serve` processes on one PostgreSQL schema,
// each listener behind a round-robin proxy, as a load balancer would put
// them.
type replicaSet struct {
	procs          []*binaryProcess
	key            string
	partner, admin *httptest.Server
	// BaseURL and AdminURL address the proxies.
	BaseURL, AdminURL string
}

// startReplicas starts n replicas sharing a fresh schema, configured with
// the extra webhooks settings (YAML lines under webhooks:). Their
// http.public_url is the balancer's, as it would be in production.
func startReplicas(t *testing.T, n int, webhooks string) *replicaSet {
	t.Helper()
	dbURL := testsuite.PostgresSchema(t)
	bin := rxgateBinary(t)
	rs := &replicaSet{key: "test-key-" + storage.NewSecret()}
	var partners, admins []*url.URL
	rs.partner, rs.admin = roundRobin(t, &partners), roundRobin(t, &admins)
	rs.BaseURL = rs.partner.URL + "/external"
	rs.AdminURL = rs.admin.URL
	cfgPath := filepath.Join(t.TempDir(), "rxgate.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte(`
http:
  listen: 127.0.0.1:0
  public_url: `+rs.BaseURL+`
admin:
  listen: 127.0.0.1:0
  public_url: `+rs.AdminURL+`
  api_key: `+rs.key+`
storage:
  driver: postgres
  postgres:
    url: "`+dbURL+`"
    max_conns: 8
auth:
  builtin_issuer: true
webhooks:
  allow_insecure_loopback: true`+webhooks+"\n"), 0o600))
	for range n {
		p := startBinary(t, bin, cfgPath)
		rs.procs = append(rs.procs, p)
		// The listeners' own addresses: the URLs a replica states are the
		// balancer's.
		pu := &url.URL{Scheme: "http", Host: p.partnerAddr}
		au := &url.URL{Scheme: "http", Host: p.adminAddr}
		partners, admins = append(partners, pu), append(admins, au)
	}
	return rs
}

// roundRobin is a reverse proxy that sends each request to the next of
// *targets in turn; the targets are set before the first request.
func roundRobin(t *testing.T, targets *[]*url.URL) *httptest.Server {
	var next atomic.Uint64
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		u := (*targets)[next.Add(1)%uint64(len(*targets))]
		r.Out.URL.Scheme, r.Out.URL.Host = u.Scheme, u.Host
		r.Out.Host = r.In.Host // the replicas see the balancer's host, as behind nginx with proxy_set_header Host
		// The query as sent, also a malformed one, as nginx passes it.
		r.Out.URL.RawQuery = r.In.URL.RawQuery
	}}
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	return srv
}

// env points the test kit at the replicas through the proxies.
func (rs *replicaSet) env(t *testing.T) *testsuite.Env {
	t.Helper()
	t.Setenv(testsuite.EnvBaseURL, rs.BaseURL)
	t.Setenv(testsuite.EnvAdminURL, rs.AdminURL)
	t.Setenv(testsuite.EnvAdminKey, rs.key)
	return testsuite.Start(t)
}

// TestTestsuiteOnReplicas runs the black-box testsuite against three
// replicas on one PostgreSQL database, each request going to the next
// replica in turn: a run of `go test` of this package, whose Start then
// targets the proxies (tests that need an in-process server skip there).
func TestTestsuiteOnReplicas(t *testing.T) {
	if os.Getenv(testsuite.EnvBaseURL) != "" {
		t.Skip("the run against the replicas itself")
	}
	if testsuite.OnPostgres() {
		t.Skip("runs in the badger pass only; the replicas are on PostgreSQL either way")
	}
	testsuite.PostgresURL(t)
	rs := startReplicas(t, 3, "")
	cmd := exec.CommandContext(t.Context(), "go", "test", "-v", "-count=1", "-timeout", "5m", ".")
	cmd.Env = append(os.Environ(),
		testsuite.EnvBaseURL+"="+rs.BaseURL, testsuite.EnvAdminURL+"="+rs.AdminURL, testsuite.EnvAdminKey+"="+rs.key,
		testsuite.EnvStore+"=postgres", testsuite.EnvReplicas+"=3")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the testsuite against three replicas:\n%s", out)
	// Count the top-level tests: most run; those that need an in-process
	// server (webhooks, crashes, the browser) skip, and the replica tests
	// of their own cover what they would.
	passed, skipped := 0, 0
	for _, line := range strings.Split(string(out), "\n") {
		switch {
		case strings.HasPrefix(line, "--- PASS: Test"):
			passed++
		case strings.HasPrefix(line, "--- SKIP: Test"):
			skipped++
		}
	}
	t.Logf("the testsuite against three replicas: %d tests passed, %d skipped", passed, skipped)
	require.Greater(t, passed, skipped, "most of the testsuite runs against the replicas")
}
