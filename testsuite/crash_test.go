package testsuite_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/queue/signature"
	"github.com/rxgate/rxgate/storage"
	"github.com/rxgate/rxgate/testsuite"
)

// crashPrescriptions is how many prescriptions the crash test creates.
const crashPrescriptions = 500

// crashStallAt is the receiver request after which every request hangs
// until the server has been killed: the kill then always lands with
// deliveries in flight.
const crashStallAt = 150

// crashHeldAtKill is how many deliveries are held in flight when the server
// is killed: the most one endpoint may have in flight with the default four
// workers, so that several attempts, and jobs claimed behind them, are cut.
const crashHeldAtKill = 2

// crashReceiver fails the first attempt of every third event, verifies
// every signature, records every request, and from the crashStallAt-th
// request on holds requests until released.
type crashReceiver struct {
	mu       sync.Mutex
	secret   string
	requests []crashRequest
	seen     map[string]int  // event id -> requests so far
	ok       map[string]bool // events answered 2xx (by a request not held)
	stalled  chan struct{}   // closed when crashHeldAtKill requests are held
	nHeld    int
	release  chan struct{} // closed after the kill
	done     chan struct{} // closed when every event was answered 2xx
	killed   bool
	stallOne sync.Once
	doneOne  sync.Once
}

type crashRequest struct {
	eventID  string
	scid     string
	index    int
	status   int
	held     bool // held across the kill: the server never saw the answer
	verified error
}

func newCrashReceiver() *crashReceiver {
	return &crashReceiver{
		seen: map[string]int{}, ok: map[string]bool{},
		stalled: make(chan struct{}), release: make(chan struct{}), done: make(chan struct{}),
	}
}

func (c *crashReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	var p struct {
		EventID string `json:"event_id"`
		Data    struct {
			SCID string `json:"scid"`
		} `json:"data"`
	}
	_ = json.Unmarshal(body, &p)
	index, _ := strconv.Atoi(strings.TrimPrefix(p.Data.SCID, "CR"))
	c.mu.Lock()
	req := crashRequest{eventID: r.Header.Get("X-Webhook-Id"), scid: p.Data.SCID, index: index,
		verified: signature.Verify([]string{c.secret}, r.Header.Get(signature.HeaderName), body, time.Now())}
	c.seen[req.eventID]++
	req.status = http.StatusOK
	if index%3 == 0 && c.seen[req.eventID] == 1 {
		req.status = http.StatusInternalServerError
	}
	req.held = !c.killed && len(c.requests)+1 >= crashStallAt
	if !req.held && req.status == http.StatusOK {
		c.ok[req.eventID] = true
		if len(c.ok) == crashPrescriptions {
			c.doneOne.Do(func() { close(c.done) })
		}
	}
	c.requests = append(c.requests, req)
	c.mu.Unlock()
	if req.held {
		c.mu.Lock()
		c.nHeld++
		if c.nHeld >= crashHeldAtKill {
			c.stallOne.Do(func() { close(c.stalled) })
		}
		c.mu.Unlock()
		<-c.release
	}
	w.WriteHeader(req.status)
}

// TestCrashRestartDeliversEveryEvent is the at-least-once check on the real
// binary: 500 prescriptions for a validated organization, a receiver that
// fails the first attempt of every third event, kill -9 while deliveries
// are in flight, a restart on the same data directory; then every event
// reached the receiver, every signature verified, and the event log agrees
// with what the receiver saw.
func TestCrashRestartDeliversEveryEvent(t *testing.T) {
	badgerPassOnly(t)
	bin := rxgateBinary(t)
	cfgPath, key := serveConfig(t, `
  workers: 4
  timeout: 10s
  max_attempts: 3
  backoff_base: 20ms
  backoff_max: 200ms`)

	rcv := newCrashReceiver()
	srv := httptest.NewServer(rcv)
	t.Cleanup(srv.Close)
	// Cleanups run last first: held requests end before the server closes.
	t.Cleanup(func() {
		rcv.mu.Lock()
		defer rcv.mu.Unlock()
		if !rcv.killed {
			rcv.killed = true
			close(rcv.release)
		}
	})

	proc := startBinary(t, bin, cfgPath)
	env := proc.env(t, key)
	tn := env.NewTenant(t)
	validate(t, env, tn)
	_, secret := registerEndpoint(t, env, tn.PartnerID, srv.URL+"/")
	rcv.mu.Lock()
	rcv.secret = secret
	rcv.mu.Unlock()

	// Create the prescriptions, several at a time: every commit is synced
	// to disk.
	start := time.Now()
	scids := make([]string, crashPrescriptions)
	errs := make(chan error, crashPrescriptions)
	sent := make(chan exchange, crashPrescriptions)
	var wg sync.WaitGroup
	next := make(chan int)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				scids[i] = fmt.Sprintf("CR%016d", i)
				x, err := adminPost(env, tn.PatientPath()+"/prescriptions",
					`{"item_name":"Amoxicillin","quantity":"20","scid":"`+scids[i]+`"}`, http.StatusCreated)
				errs <- err
				if x.req != nil {
					sent <- x
				}
			}
		}()
	}
	for i := range crashPrescriptions {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	close(sent)
	for err := range errs {
		require.NoError(t, err)
	}
	for x := range sent { // checked here, on the test's goroutine
		env.CheckContract(t, x.req, x.res)
	}
	t.Logf("created %d prescriptions in %s", crashPrescriptions, time.Since(start))

	// Kill -9 while deliveries are held in flight.
	select {
	case <-rcv.stalled:
	case <-time.After(30 * time.Second):
		t.Fatal("deliveries never reached the stall point")
	}
	require.NoError(t, proc.cmd.Process.Signal(syscall.SIGKILL))
	_ = proc.cmd.Wait()
	rcv.mu.Lock()
	rcv.killed = true
	held := 0
	for _, r := range rcv.requests {
		if r.held {
			held++
		}
	}
	received := len(rcv.requests)
	close(rcv.release)
	rcv.mu.Unlock()
	require.GreaterOrEqual(t, held, crashHeldAtKill, "deliveries were in flight at the kill")
	t.Logf("killed with %d deliveries held in flight, %d requests received", held, received)

	// Restart on the same data directory: every event is delivered.
	proc = startBinary(t, bin, cfgPath)
	select {
	case <-rcv.done:
	case <-time.After(45 * time.Second):
		rcv.mu.Lock()
		n := len(rcv.ok)
		rcv.mu.Unlock()
		t.Fatalf("only %d of %d events reached the receiver after the restart", n, crashPrescriptions)
	}
	// A clean stop records the last outcomes; the next start only reads.
	require.NoError(t, proc.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, proc.cmd.Wait(), "SIGTERM drains and exits 0")
	proc = startBinary(t, bin, cfgPath)
	env = proc.env(t, key)
	events := listEvents(t, env, "organization_id="+tn.OrgID)
	require.NoError(t, proc.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, proc.cmd.Wait())

	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	// Every signature verified.
	for _, r := range rcv.requests {
		require.NoError(t, r.verified, "request for %s", r.eventID)
	}
	// Every event reached the receiver at least once, answered 2xx.
	byEvent := map[string][]crashRequest{}
	for _, r := range rcv.requests {
		byEvent[r.eventID] = append(byEvent[r.eventID], r)
	}
	require.Len(t, rcv.ok, crashPrescriptions)

	// The event log agrees with what the receiver saw.
	require.Len(t, events, crashPrescriptions, "one event per prescription")
	unrecorded := 0
	seenSCID := map[string]bool{}
	for _, e := range events {
		id := e["event_id"].(string)
		scid := e["payload"].(map[string]any)["data"].(map[string]any)["scid"].(string)
		seenSCID[scid] = true
		got := byEvent[id]
		require.NotEmpty(t, got, "event %s (%s) never reached the receiver", id, scid)
		assert.Equal(t, scid, got[0].scid, "the receiver saw event %s with the log's body", id)
		assert.Equal(t, "delivered", e["status"], "event %s", id)
		// Each recorded attempt is a request the receiver answered with
		// that status; a request the log lacks was in flight at the kill.
		answered := map[int]int{}
		for _, r := range got {
			answered[r.status]++
		}
		attempts := e["attempts"].([]any)
		for _, a := range attempts {
			code := 0 // null: no answer
			if c, ok := a.(map[string]any)["status_code"].(float64); ok {
				code = int(c)
			}
			answered[code]--
			assert.GreaterOrEqual(t, answered[code], 0, "event %s: the log records a %d the receiver did not send", id, code)
		}
		last := attempts[len(attempts)-1].(map[string]any)
		assert.Equal(t, float64(200), last["status_code"], "event %s ends with its 2xx", id)
		if idx := got[0].index; idx%3 == 0 {
			assert.Equal(t, http.StatusInternalServerError, got[0].status, "the first attempt of every third event failed")
			assert.GreaterOrEqual(t, len(got), 2)
		}
		unrecorded += len(got) - len(attempts)
	}
	for _, scid := range scids {
		assert.True(t, seenSCID[scid], "the log has the event of %s", scid)
	}
	assert.GreaterOrEqual(t, unrecorded, held, "held requests are not in the log")
	assert.LessOrEqual(t, unrecorded, 4, "only attempts in flight at the kill (at most the workers) are missing from the log")
	t.Logf("%d requests for %d events; %d attempts were in flight at the kill and made again", len(rcv.requests), len(byEvent), unrecorded)
}

// serveConfig writes a config for `rxgate serve` on loopback with a data
// directory in t's temporary directory, the built-in issuer, and webhooks
// allowed to loopback plus the webhooks keys given (indented YAML lines);
// it returns the file and the operator key.
//
// The store runs with the durability RXGATE_TEST_DURABILITY names
// (journal, the default, or syncwrites: storage.badger.durability), so
// that the tests and benchmarks that start the binary (make bench-load,
// TestCrashRestartDeliversEveryEvent) run on either.
func serveConfig(t testing.TB, webhooks string) (path, key string) {
	t.Helper()
	storageKeys, _ := durabilityYAML(t, envDurability)
	dir := t.TempDir()
	path = filepath.Join(dir, "rxgate.yaml")
	key = "test-key-" + storage.NewSecret()
	require.NoError(t, os.WriteFile(path, []byte(`
http:
  listen: 127.0.0.1:0
admin:
  listen: 127.0.0.1:0
  api_key: `+key+`
storage:
  dir: `+filepath.Join(dir, "data")+storageKeys+`
auth:
  builtin_issuer: true
webhooks:
  allow_insecure_loopback: true`+webhooks+"\n"), 0o600))
	return path, key
}

// badgerPassOnly skips t in make test's in-process PostgreSQL pass
// (EnvStore=postgres, no instance targeted): t's server is the binary on a
// Badger directory of its own (serveConfig), or t starts none, so that
// pass would run it again unchanged.
func badgerPassOnly(t testing.TB) {
	t.Helper()
	if testsuite.OnPostgres() && os.Getenv(testsuite.EnvBaseURL) == "" {
		t.Skip("its server does not run on the pass's backend; it runs in the badger pass")
	}
}

// envDurability names the durability serveConfig's server runs with.
const envDurability = "RXGATE_TEST_DURABILITY"

// durabilityYAML reads the Badger durability a benchmark or soak runs
// with from the environment variable name (journal or syncwrites; unset
// means the default) and returns it as indented storage keys for a
// config, and its name for a report.
func durabilityYAML(t testing.TB, name string) (yaml, mode string) {
	t.Helper()
	mode = os.Getenv(name)
	if mode == "" {
		return "", "journal (default)"
	}
	require.Contains(t, []string{"journal", "syncwrites"}, mode, name)
	return "\n  badger:\n    durability: " + mode, mode
}

// binaryProcess is a running `rxgate serve`.
type binaryProcess struct {
	cmd             *exec.Cmd
	baseURL, admURL string
	partnerAddr     string // host:port of the partner listener
	adminAddr       string // host:port of the operator listener
}

// startBinary starts `rxgate serve` and reads its URLs from the start-up
// log line.
func startBinary(t testing.TB, bin, cfgPath string) *binaryProcess {
	t.Helper()
	cmd := serveCommand(bin, cfgPath)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sc := bufio.NewScanner(stderr)
	var seen bytes.Buffer
	for sc.Scan() {
		var line struct {
			Msg         string `json:"msg"`
			BaseURL     string `json:"base_url"`
			AdminURL    string `json:"admin_url"`
			PartnerAddr string `json:"partner_addr"`
			AdminAddr   string `json:"admin_addr"`
		}
		seen.Write(sc.Bytes())
		seen.WriteByte('\n')
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "rxgate serving" {
			// RXGATE_TEST_SERVER_LOG names a file the server's log goes to,
			// for a look at what it said.
			out := io.Discard
			if path := os.Getenv("RXGATE_TEST_SERVER_LOG"); path != "" {
				if f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600); err == nil {
					out = f
				}
			}
			go func() { _, _ = io.Copy(out, stderr) }()
			return &binaryProcess{cmd: cmd, baseURL: line.BaseURL, admURL: line.AdminURL, partnerAddr: line.PartnerAddr, adminAddr: line.AdminAddr}
		}
	}
	t.Fatalf("rxgate serve exited before serving: %v\n%s", sc.Err(), seen.String())
	return nil
}

// serveCommand is `rxgate serve --config cfgPath`, in this process's
// environment without the kit's RXGATE_TEST_ variables (they would read
// as unknown config keys).
func serveCommand(bin, cfgPath string) *exec.Cmd {
	cmd := exec.Command(bin, "serve", "--config", cfgPath)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "RXGATE_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	return cmd
}

// env points the test kit at the process.
func (p *binaryProcess) env(t *testing.T, key string) *testsuite.Env {
	t.Helper()
	t.Setenv(testsuite.EnvBaseURL, p.baseURL)
	t.Setenv(testsuite.EnvAdminURL, p.admURL)
	t.Setenv(testsuite.EnvAdminKey, key)
	return testsuite.Start(t)
}

// exchange is a request and its answer, kept for the contract check.
type exchange struct {
	req *http.Request
	res *testsuite.Response
}

// adminPost sends an operator request from any goroutine and reports a
// failure as an error instead of failing the test there; the caller checks
// the returned exchange against the contract on the test's goroutine.
func adminPost(env *testsuite.Env, path, body string, want int) (exchange, error) {
	req, err := http.NewRequest(http.MethodPost, env.AdminPath(path), strings.NewReader(body))
	if err != nil {
		return exchange{}, err
	}
	req.Header.Set("Authorization", "Bearer "+env.AdminKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return exchange{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return exchange{}, err
	}
	x := exchange{req: req, res: &testsuite.Response{Status: resp.StatusCode, Header: resp.Header, Body: b}}
	if resp.StatusCode != want {
		return x, fmt.Errorf("POST %s: %d: %s", path, resp.StatusCode, b)
	}
	return x, nil
}
