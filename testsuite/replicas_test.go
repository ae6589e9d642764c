package testsuite_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/queue/receiver"
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

	bin, cfgPath     string
	partners, admins atomic.Pointer[[]*url.URL] // the live replicas' listeners
}

// startReplicas starts n replicas sharing a fresh schema, configured with
// the extra webhooks settings (YAML lines under webhooks:). Their
// http.public_url is the balancer's, as it would be in production.
func startReplicas(t testing.TB, n int, webhooks string) *replicaSet {
	t.Helper()
	dbURL := testsuite.PostgresSchema(t)
	bin := rxgateBinary(t)
	rs := &replicaSet{key: "test-key-" + storage.NewSecret(), bin: bin}
	rs.partners.Store(&[]*url.URL{})
	rs.admins.Store(&[]*url.URL{})
	rs.partner, rs.admin = roundRobin(t, &rs.partners), roundRobin(t, &rs.admins)
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
	rs.cfgPath = cfgPath
	for range n {
		rs.add(t)
	}
	return rs
}

// add starts one more replica and puts it behind the balancer.
func (rs *replicaSet) add(t testing.TB) *binaryProcess {
	t.Helper()
	p := startBinary(t, rs.bin, rs.cfgPath)
	rs.procs = append(rs.procs, p)
	// The listeners' own addresses: the URLs a replica states are the
	// balancer's.
	pu := &url.URL{Scheme: "http", Host: p.partnerAddr}
	au := &url.URL{Scheme: "http", Host: p.adminAddr}
	rs.partners.Store(ptrTo(append(slices.Clone(*rs.partners.Load()), pu)))
	rs.admins.Store(ptrTo(append(slices.Clone(*rs.admins.Load()), au)))
	return p
}

// kill kill -9s replica i and takes it out of the balancer, as a health
// check would.
func (rs *replicaSet) kill(t *testing.T, i int) {
	t.Helper()
	p := rs.procs[i]
	drop := func(list *atomic.Pointer[[]*url.URL], addr string) {
		list.Store(ptrTo(slices.DeleteFunc(slices.Clone(*list.Load()), func(u *url.URL) bool { return u.Host == addr })))
	}
	drop(&rs.partners, p.partnerAddr)
	drop(&rs.admins, p.adminAddr)
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	_ = p.cmd.Wait()
}

func ptrTo[T any](v T) *T { return &v }

// roundRobin is a reverse proxy that sends each request to the next of
// the targets in turn.
func roundRobin(t testing.TB, targets *atomic.Pointer[[]*url.URL]) *httptest.Server {
	var next atomic.Uint64
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		live := *targets.Load()
		u := live[next.Add(1)%uint64(len(live))]
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
func (rs *replicaSet) env(t testing.TB) *testsuite.Env {
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

// TestWebhooksAcrossReplicas: three replicas deliver one queue together.
// One replica claims the first deliveries alone and is killed (-9) in the
// middle of them; the others take its leases over when they expire. Every
// event is delivered at least once with a signature that verifies, no
// event is in flight twice at once, and the endpoint never has more
// attempts in flight than the per-endpoint limit, across the replicas.
func TestWebhooksAcrossReplicas(t *testing.T) {
	testsuite.PostgresURL(t)
	if os.Getenv(testsuite.EnvBaseURL) != "" || testsuite.OnPostgres() {
		t.Skip("runs once, in the badger pass, on replicas of its own")
	}
	// 4 workers: at most 2 attempts in flight to one endpoint, counted
	// over every replica's leases.
	const perEndpoint, events, held = 2, 40, 2
	rs := startReplicas(t, 1, "\n  workers: 4\n  timeout: 2s\n  lease: 3s\n  backoff_base: 10ms\n  backoff_max: 50ms")
	env := rs.env(t)
	tn := env.NewTenant(t)
	validate(t, env, tn)

	var (
		mu                sync.Mutex
		inflight, maxSeen int
		perEvent          = map[string]int{} // in flight now
		deliveries        = map[string]int{} // verified deliveries
		overlaps          []string
		holding           = make(chan struct{}, events)
		release           = make(chan struct{})
		heldSoFar         atomic.Int32
	)
	rcv := &receiver.Receiver{Respond: func(d *receiver.Delivery) int {
		mu.Lock()
		perEvent[d.EventID]++
		if perEvent[d.EventID] > 1 {
			overlaps = append(overlaps, d.EventID)
		}
		mu.Unlock()
		if heldSoFar.Add(1) <= held {
			// The first deliveries wait until the replica that made them
			// is dead: their outcome is never recorded.
			holding <- struct{}{}
			<-release
		}
		mu.Lock()
		perEvent[d.EventID]--
		deliveries[d.EventID]++
		mu.Unlock()
		return http.StatusOK
	}}
	var armed atomic.Pointer[receiver.Receiver]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		inflight++
		maxSeen = max(maxSeen, inflight)
		mu.Unlock()
		defer func() { mu.Lock(); inflight--; mu.Unlock() }()
		if a := armed.Load(); a != nil {
			a.ServeHTTP(w, r)
			return
		}
		http.Error(w, "not armed", http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	_, secret := registerEndpoint(t, env, tn.PartnerID, srv.URL+"/hooks")
	rcv.Secrets = []string{secret}
	armed.Store(rcv)

	var ids []string
	for range events {
		ids = append(ids, eventOf(t, env, tn, prescribe(t, env, tn))["event_id"].(string))
	}
	// The one replica holds the first deliveries; two more start, and it
	// dies with them in flight.
	for range held {
		select {
		case <-holding:
		case <-time.After(20 * time.Second):
			t.Fatal("the first replica made no delivery")
		}
	}
	rs.add(t)
	rs.add(t)
	rs.kill(t, 0)
	close(release)

	for _, id := range ids {
		waitFor(t, env, id, hasStatus("delivered"))
	}
	mu.Lock()
	defer mu.Unlock()
	for _, id := range ids {
		assert.Positive(t, deliveries[id], "event %s delivered", id)
	}
	assert.Empty(t, overlaps, "no event is in flight twice at once")
	assert.LessOrEqual(t, maxSeen, perEndpoint, "attempts in flight to the endpoint, over every replica")
	redelivered := 0
	for _, n := range deliveries {
		redelivered += n - 1
	}
	assert.GreaterOrEqual(t, redelivered, held, "the dead replica's deliveries were made again by the others")
	t.Logf("%d events, %d deliveries made again after the kill, at most %d in flight", len(ids), redelivered, maxSeen)
}

// TestReplicasRefuseAtOnce: a user disabled, or an organization secret
// rotated, through one replica is refused at once by every other replica,
// also with a token each of them has already verified and cached.
func TestReplicasRefuseAtOnce(t *testing.T) {
	testsuite.PostgresURL(t)
	if os.Getenv(testsuite.EnvBaseURL) != "" || testsuite.OnPostgres() {
		t.Skip("runs once, in the badger pass, on replicas of its own")
	}
	rs := startReplicas(t, 3, "")
	env := rs.env(t)
	tn := env.NewTenant(t)
	prescriber := tn.Token(t, testsuite.RolePrescriber)
	owner := tn.Token(t, testsuite.RoleOwner)
	// get asks replica i directly for the prescriber's own user.
	get := func(i int, token, secret string) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet,
			"http://"+rs.procs[i].partnerAddr+"/external/v1/organizations/"+tn.OrgID+"/users/"+tn.Users[testsuite.RolePrescriber], nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("x-organization-secret", secret)
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		return res.StatusCode
	}
	for i := range rs.procs {
		require.Equal(t, http.StatusOK, get(i, prescriber, tn.OrgSecret), "replica %d verifies and caches the token", i)
	}

	// The organization secret rotated through replica 0.
	req, err := http.NewRequest(http.MethodPost, "http://"+rs.procs[0].adminAddr+tn.OrgPath()+"/rotate-secret", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+rs.key)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	var rotated struct {
		Data struct {
			Secret string `json:"organization_secret"`
		} `json:"data"`
	}
	require.NoError(t, json.NewDecoder(res.Body).Decode(&rotated))
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	for i := range rs.procs {
		assert.Equal(t, http.StatusUnauthorized, get(i, prescriber, tn.OrgSecret), "replica %d refuses the old secret at once", i)
		assert.Equal(t, http.StatusOK, get(i, prescriber, rotated.Data.Secret), "replica %d takes the new one", i)
	}
	tn.OrgSecret = rotated.Data.Secret

	// The prescriber disabled through replica 0, by the owner.
	req, err = http.NewRequest(http.MethodPut,
		"http://"+rs.procs[0].partnerAddr+"/external/v1/organizations/"+tn.OrgID+"/users/"+tn.Users[testsuite.RolePrescriber]+"/disable", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+owner)
	req.Header.Set("x-organization-secret", tn.OrgSecret)
	res, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	for i := range rs.procs {
		assert.Equal(t, http.StatusUnauthorized, get(i, prescriber, tn.OrgSecret), "replica %d refuses the disabled user's cached token at once", i)
	}
}
