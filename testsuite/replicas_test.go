package testsuite_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
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
	cfgs           []string // each replica's configuration file, with its replica id
	bins           []string // each replica's binary
	key            string
	partner, admin *httptest.Server
	// BaseURL and AdminURL address the proxies.
	BaseURL, AdminURL string

	bin, cfgPath     string
	partners, admins atomic.Pointer[[]*url.URL] // the live replicas' listeners
	// dbURL is the schema's connection URL (its search_path set).
	dbURL string
}

// startReplicas starts n replicas sharing a fresh schema, configured with
// the extra webhooks settings (YAML lines under webhooks:). Their
// http.public_url is the balancer's, as it would be in production.
func startReplicas(t testing.TB, n int, webhooks string) *replicaSet {
	t.Helper()
	dbURL := testsuite.PostgresSchema(t)
	bin := rxgateBinary(t)
	rs := &replicaSet{key: "test-key-" + storage.NewSecret(), bin: bin, dbURL: dbURL}
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

// add starts one more replica and puts it behind the balancer. Each has
// a replica id of its own (storage.postgres.replica_id): they run on one
// host, whose name is the id's default, and a second live process under
// an id is refused.
func (rs *replicaSet) add(t testing.TB) *binaryProcess {
	t.Helper()
	return rs.addBinary(t, rs.bin)
}

// addBinary is add with another build of rxgate, bin.
func (rs *replicaSet) addBinary(t testing.TB, bin string) *binaryProcess {
	t.Helper()
	base, err := os.ReadFile(rs.cfgPath)
	require.NoError(t, err)
	cfgPath := filepath.Join(t.TempDir(), "rxgate.yaml")
	id := fmt.Sprintf("replica-%d", len(rs.procs)+1)
	require.NoError(t, os.WriteFile(cfgPath, []byte(strings.Replace(string(base),
		"\n  postgres:\n", "\n  postgres:\n    replica_id: "+id+"\n", 1)), 0o600))
	p := startBinary(t, bin, cfgPath)
	rs.procs, rs.cfgs, rs.bins = append(rs.procs, p), append(rs.cfgs, cfgPath), append(rs.bins, bin)
	rs.balance(p)
	return p
}

// balance puts replica p behind the balancer.
func (rs *replicaSet) balance(p *binaryProcess) {
	// The listeners' own addresses: the URLs a replica states are the
	// balancer's.
	pu := &url.URL{Scheme: "http", Host: p.partnerAddr}
	au := &url.URL{Scheme: "http", Host: p.adminAddr}
	rs.partners.Store(ptrTo(append(slices.Clone(*rs.partners.Load()), pu)))
	rs.admins.Store(ptrTo(append(slices.Clone(*rs.admins.Load()), au)))
}

// restart starts replica i again, killed before, under its replica id
// and with its binary, and puts it back behind the balancer.
func (rs *replicaSet) restart(t testing.TB, i int) *binaryProcess {
	t.Helper()
	p := startBinary(t, rs.bins[i], rs.cfgs[i])
	rs.procs[i] = p
	rs.balance(p)
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
//
// It keeps as many idle connections to each target as a benchmark has
// requests in flight, as a balancer in front of replicas does: with
// http.DefaultTransport's two per host, most of make bench-backends'
// pages opened a connection to a replica and closed it (TIME_WAIT by the
// thousand), CPU of the proxy's and the replicas' on every page
// (BenchmarkPageCost).
func roundRobin(t testing.TB, targets *atomic.Pointer[[]*url.URL]) *httptest.Server {
	var next atomic.Uint64
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = 64
	t.Cleanup(transport.CloseIdleConnections)
	proxy := &httputil.ReverseProxy{Transport: transport, Rewrite: func(r *httputil.ProxyRequest) {
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

// TestWebhooksAcrossReplicas: three replicas deliver one queue together;
// then the receiver holds two deliveries, the replica that made one of
// them is killed (-9) in the middle of it, and the others take its leases
// over when they expire. Every event is delivered at least once with a
// signature that verifies, no event is in flight twice at once, and the
// endpoint never has more attempts in flight than the per-endpoint limit,
// across the replicas.
func TestWebhooksAcrossReplicas(t *testing.T) {
	testsuite.PostgresURL(t)
	if os.Getenv(testsuite.EnvBaseURL) != "" || testsuite.OnPostgres() {
		t.Skip("runs once, in the badger pass, on replicas of its own")
	}
	// 4 workers: at most 2 attempts in flight to one endpoint, counted
	// over every replica's leases.
	const perEndpoint, events, holds = 2, 30, 2
	type held struct {
		replica int
		err     error
	}
	rs := startReplicas(t, 3, "\n  workers: 4\n  timeout: 2s\n  lease: 3s\n  backoff_base: 10ms\n  backoff_max: 50ms")
	env := rs.env(t)
	tn := env.NewTenant(t)
	validate(t, env, tn)

	var (
		mu                sync.Mutex
		inflight, maxSeen int
		perEvent          = map[string]int{} // in flight now, by X-Webhook-Id
		deliveries        = map[string]int{} // verified deliveries
		overlaps          []string
		holdMore          atomic.Int32 // how many more deliveries to hold
		holding           = make(chan held, holds)
		release           = make(chan struct{})
	)
	rcv := &receiver.Receiver{OnDelivery: func(d receiver.Delivery) {
		mu.Lock()
		deliveries[d.EventID]++
		mu.Unlock()
	}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Webhook-Id")
		mu.Lock()
		inflight++
		maxSeen = max(maxSeen, inflight)
		if perEvent[id]++; perEvent[id] > 1 {
			overlaps = append(overlaps, id)
		}
		mu.Unlock()
		defer func() { mu.Lock(); inflight--; perEvent[id]--; mu.Unlock() }()
		if holdMore.Add(-1) >= 0 {
			// Held until the test has killed a replica that made one. The
			// sender is found now, while its connection is surely open: a
			// loaded machine may let webhooks.timeout pass before the test
			// looks, and the sender then closes it.
			i, err := senderOf(rs, r.RemoteAddr, r.Host)
			holding <- held{i, err}
			<-release
		}
		rcv.ServeHTTP(w, r)
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

	var ids []string
	create := func(n int) {
		for range n {
			ids = append(ids, eventOf(t, env, tn, prescribe(t, env, tn))["event_id"].(string))
		}
	}
	// Three replicas together.
	create(events)
	for _, id := range ids {
		waitFor(t, env, id, hasStatus("delivered"))
	}

	// One of them dies with a delivery in flight: the kill comes as soon
	// as the deliveries are held, well within webhooks.timeout (a delivery
	// its sender gave up on is no longer in flight for it).
	holdMore.Store(holds)
	ids2 := make(chan []string, 1)
	go func() {
		var more []string
		for range events {
			scid, err := prescribeQuietly(env, tn)
			if err != nil {
				continue // sent to the replica as it died: not acknowledged
			}
			more = append(more, scid)
		}
		ids2 <- more
	}()
	var froms []held
	for range holds {
		select {
		case from := <-holding:
			froms = append(froms, from)
		case <-time.After(20 * time.Second):
			t.Fatal("no delivery to hold")
		}
	}
	require.NoError(t, froms[0].err, "the held delivery's sender")
	victim := froms[0].replica
	rs.kill(t, victim)
	close(release)
	for _, scid := range <-ids2 {
		ids = append(ids, eventOf(t, env, tn, scid)["event_id"].(string))
	}

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
	assert.Positive(t, redelivered, "the dead replica's delivery was made again by another")
	t.Logf("%d events, replica %d killed mid-delivery, %d deliveries made again, at most %d in flight", len(ids), victim, redelivered, maxSeen)
}

// senderOf returns the index of the replica that holds the TCP connection
// from remote (as the receiver saw it) to the receiver at local, by the
// socket's inode in /proc (Linux).
func senderOf(rs *replicaSet, remote, local string) (int, error) {
	_, rport, err := net.SplitHostPort(remote)
	if err != nil {
		return -1, err
	}
	_, lport, err := net.SplitHostPort(local)
	if err != nil {
		return -1, err
	}
	hexPort := func(p string) string {
		n, _ := strconv.Atoi(p)
		return fmt.Sprintf("%04X", n)
	}
	inode := ""
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(table)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) > 9 && strings.HasSuffix(f[1], ":"+hexPort(rport)) && strings.HasSuffix(f[2], ":"+hexPort(lport)) {
				inode = f[9]
			}
		}
	}
	if inode == "" {
		return -1, fmt.Errorf("the delivery's connection %s is not in /proc/net/tcp", remote)
	}
	for i, p := range rs.procs {
		fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p.cmd.Process.Pid))
		if err != nil {
			return -1, err
		}
		for _, fd := range fds {
			if target, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", p.cmd.Process.Pid, fd.Name())); target == "socket:["+inode+"]" {
				return i, nil
			}
		}
	}
	return -1, fmt.Errorf("no replica holds the connection %s", remote)
}

// TestReplicasRefuseAtOnce: a user disabled, or an organization secret
// rotated, through one replica is refused at once by every other replica,
// also with a token each of them has already verified and cached; so is
// an operator key revoked through one.
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

	// An operator key revoked through replica 0 (issue 27).
	keyID, key := operatorKey(t, env, "viewer")
	overview := func(i int) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, "http://"+rs.procs[i].adminAddr+"/admin/v1/overview", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+key)
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		return res.StatusCode
	}
	for i := range rs.procs {
		require.Equal(t, http.StatusOK, overview(i), "replica %d takes the key", i)
	}
	req, err = http.NewRequest(http.MethodPost, "http://"+rs.procs[0].adminAddr+operatorKeysPath+"/"+keyID+"/revoke", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+rs.key)
	res, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	for i := range rs.procs {
		assert.Equal(t, http.StatusUnauthorized, overview(i), "replica %d refuses the revoked key at once", i)
	}
}

// prescribeQuietly creates a prescription for the tenant's patient through
// the operator API from any goroutine, and returns its scid.
func prescribeQuietly(env *testsuite.Env, tn *testsuite.Tenant) (string, error) {
	x, err := adminPost(env, tn.PatientPath()+"/prescriptions", `{"item_name": "Amoxicillin 500 mg capsule", "quantity": "20"}`, http.StatusCreated)
	if err != nil {
		return "", err
	}
	var body struct {
		Data struct {
			SCID string `json:"scid"`
		} `json:"data"`
	}
	if err := json.Unmarshal(x.res.Body, &body); err != nil {
		return "", err
	}
	return body.Data.SCID, nil
}

// TestReplicaIdentity: a second `rxgate serve` under a replica id in use
// is refused with one line while the first lives. Then the only replica
// is killed (-9) in the middle of a delivery whose lease lasts ten
// minutes; restarted under its id, it makes the delivery again at once
// (waitFor's bound is 20 seconds), instead of when the lease expires.
func TestReplicaIdentity(t *testing.T) {
	testsuite.PostgresURL(t)
	if os.Getenv(testsuite.EnvBaseURL) != "" || testsuite.OnPostgres() {
		t.Skip("runs once, in the badger pass, on replicas of its own")
	}
	// The attempt is held until the replica dies, well within its
	// timeout: it is in flight, not given up, when the kill comes.
	rs := startReplicas(t, 1, "\n  timeout: 30s\n  lease: 10m\n  backoff_base: 10ms")

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	second := serveCommand(rs.bin, rs.cfgs[0])
	second.WaitDelay = time.Second
	out, err := exec.CommandContext(ctx, second.Path, second.Args[1:]...).CombinedOutput()
	require.Error(t, err, "a second process under the id is refused:\n%s", out)
	require.NoError(t, ctx.Err(), "refused, not left waiting")
	line := strings.TrimSpace(string(out))
	assert.NotContains(t, line, "\n", "one line")
	assert.Contains(t, line, `"replica-1"`)
	assert.Contains(t, line, "storage.postgres.replica_id")

	env := rs.env(t)
	tn := env.NewTenant(t)
	validate(t, env, tn)
	var attempts atomic.Int32
	held, done := make(chan struct{}), make(chan struct{})
	rcv := &receiver.Receiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if attempts.Add(1) == 1 {
			close(held)
			select { // until the replica dies (or the test ends)
			case <-r.Context().Done():
			case <-done:
			}
			return
		}
		rcv.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(done) })
	_, secret := registerEndpoint(t, env, tn.PartnerID, srv.URL+"/hooks")
	rcv.Secrets = []string{secret}
	id := eventOf(t, env, tn, prescribe(t, env, tn))["event_id"].(string)
	select {
	case <-held:
	case <-time.After(20 * time.Second):
		t.Fatal("no delivery to hold")
	}
	rs.kill(t, 0)
	rs.restart(t, 0)
	waitFor(t, env, id, hasStatus("delivered"))
	assert.EqualValues(t, 2, attempts.Load(), "the interrupted attempt, then one more")
}
