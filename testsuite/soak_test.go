//go:build soak || powercut || failover

package testsuite_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
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

	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/queue/signature"
	"github.com/rxgate/rxgate/storage"
	"github.com/rxgate/rxgate/testsuite"
)

// The crash soak: `make soak`. It runs the real binary on a disk store
// under mixed load, kills it with SIGKILL at random moments (also while
// it starts), restarts it on the same directory each time, and then checks
// through the APIs alone that nothing acknowledged was lost. It is not
// part of `make test` (the soak build tag keeps it out): it takes minutes.
//
// SOAK_KILLS (default 500) and SOAK_SECONDS (default 600) bound it; it
// stops at whichever comes first.

const (
	soakCreators = 4 // goroutines creating prescriptions through the operator API
	soakPatients = 4 // patients, each updated by its own goroutine through the partner API
	// soakStartupKills is the share of restarts killed again a random
	// moment after exec, usually before the process serves.
	soakStartupKills = 0.15
	soakMaxCursors   = 40
	soakDrainLimit   = 5 * time.Minute // after the last start, for every acknowledged event to arrive
	soakOpenLimit    = 2 * time.Minute // a start that takes longer counts as a store that did not open
)

func TestSoak(t *testing.T) {
	kills := soakEnv(t, "SOAK_KILLS", 500)
	deadline := time.Now().Add(time.Duration(soakEnv(t, "SOAK_SECONDS", 600)) * time.Second)
	bin := rxgateBinary(t)

	rcv := newSoakReceiver()
	srv := httptest.NewServer(rcv)
	t.Cleanup(srv.Close)
	t.Cleanup(rcv.releaseAll) // before srv.Close: hung requests end first

	sk := &soaker{t: t, bin: bin}
	sk.cfgPath, sk.key = soakConfig(t)
	p := sk.spawn()
	require.True(t, sk.waitReady(p), "the first start")
	env, ld := newSoakLoad(t, p.baseURL, p.adminURL, sk.key, rcv, srv.URL+"/")

	// Load runs from here to the last start, across every kill.
	stopLoad := ld.start()
	t.Cleanup(stopLoad)

	var restarts []time.Duration
	var cursors []soakCursor
	killed, startupKills := 0, 0
	for killed < kills && time.Now().Before(deadline) {
		// p serves: let it run under load, then kill it.
		if len(cursors) < soakMaxCursors && rand.IntN(4) == 0 {
			if c, ok := ld.cursor(); ok {
				cursors = append(cursors, c)
			}
		}
		time.Sleep(100*time.Millisecond + time.Duration(rand.Int64N(int64(2400*time.Millisecond))))
		sk.kill(p)
		killed++
		p = sk.spawn()
		start := time.Now()
		if killed < kills && rand.Float64() < soakStartupKills {
			// Kill it again while it starts (a start takes about 100 ms
			// here): whatever it was doing, the next start must open the
			// store.
			time.Sleep(time.Duration(rand.Int64N(int64(150 * time.Millisecond))))
			if !p.ready.Load() {
				startupKills++
			}
			sk.kill(p)
			killed++
			p = sk.spawn()
			start = time.Now()
		}
		if !sk.waitReady(p) {
			t.FailNow()
		}
		restarts = append(restarts, time.Since(start))
	}

	// The last start: load stops, every acknowledged event must arrive.
	stopLoad()
	ld.mu.Lock()
	acked := ld.acked
	ld.mu.Unlock()
	undelivered := rcv.waitDelivered(acked, soakDrainLimit)

	// Everything below reads through the APIs only.
	lost := ld.listedAll(t, env, acked)
	lostUpdates := ld.checkUpdates(t, env)
	brokenCursors := ld.checkCursors(t, cursors)
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	<-p.exited
	require.NoError(t, p.waitErr, "SIGTERM after the soak exits 0")

	rcv.mu.Lock()
	dups, badSigs, requests, hung, failed := 0, rcv.badSignatures, rcv.requests, rcv.hung, rcv.failed
	for _, n := range rcv.okByEvent {
		if n > 1 {
			dups++
		}
	}
	events := len(rcv.okByEvent)
	rcv.mu.Unlock()
	slices.Sort(restarts)
	pct := func(q float64) time.Duration {
		if len(restarts) == 0 {
			return 0
		}
		return restarts[min(len(restarts)-1, int(q*float64(len(restarts))))].Round(time.Millisecond)
	}
	t.Logf(`soak report
  kills                 %d (%d before the process served)
  starts                %d, every one not killed first served (%d)
  restart to serving    p50 %s, p90 %s, p99 %s, max %s
  acknowledged creates  %d (%d attempts, %d answered with an error or not at all)
  acknowledged updates  %d
  lost creates          %d
  lost updates          %d
  undelivered events    %d
  webhook requests      %d (%d answered 503, %d hung past the timeout)
  events delivered      %d, %d more than once (%.2f%%)
  bad signatures        %d
  cursors checked       %d, %d broken`,
		killed, startupKills, killed+1, len(restarts)+1,
		pct(0.5), pct(0.9), pct(0.99), pct(1),
		len(acked), ld.createAttempts.Load(), ld.createFailed.Load(),
		ld.updatesAcked(),
		lost, lostUpdates, undelivered,
		requests, failed, hung,
		events, dups, 100*float64(dups)/float64(max(events, 1)),
		badSigs, len(cursors), brokenCursors)
	if lost+lostUpdates+undelivered+badSigs+brokenCursors > 0 {
		t.Errorf("the soak lost writes or deliveries: see the report")
	}
	require.NotZero(t, len(acked), "the load acknowledged nothing")
}

// soakEnv reads a positive integer from the environment.
func soakEnv(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	require.NoError(t, err, name)
	require.Positive(t, n, name)
	return n
}

// soakConfig writes the soak's config: fixed loopback ports (the load
// follows the server across restarts), a disk store, and a webhook
// timeout of 2 s so that a hanging receiver costs seconds, not tens.
func soakConfig(t *testing.T) (path, key string) {
	dir := t.TempDir()
	path = filepath.Join(dir, "rxgate.yaml")
	key = "soak-key-" + storage.NewSecret()
	require.NoError(t, os.WriteFile(path, []byte(`
http:
  listen: 127.0.0.1:`+strconv.Itoa(freePort(t))+`
admin:
  listen: 127.0.0.1:`+strconv.Itoa(freePort(t))+`
  api_key: `+key+`
storage:
  dir: `+filepath.Join(dir, "data")+`
auth:
  builtin_issuer: true
webhooks:
  allow_insecure_loopback: true
  timeout: 2s
  backoff_base: 100ms
  backoff_max: 1s
`), 0o600))
	return path, key
}

// soaker starts and kills the binary.
type soaker struct {
	t            *testing.T
	bin, cfgPath string
	key          string
}

// soakProc is one run of the binary. Its goroutine reads the log, marks
// it ready at the serving line, and waits for the process.
type soakProc struct {
	cmd               *exec.Cmd
	ready             atomic.Bool
	readyCh, exited   chan struct{}
	baseURL, adminURL string
	waitErr           error
	tail              []string // the last log lines, for a start that failed
}

func (s *soaker) spawn() *soakProc {
	t := s.t
	cmd := serveCommand(s.bin, s.cfgPath)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	p := &soakProc{cmd: cmd, readyCh: make(chan struct{}), exited: make(chan struct{})}
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-p.exited })
	go func() {
		defer close(p.exited)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			if p.ready.Load() {
				continue
			}
			var line struct {
				Msg      string `json:"msg"`
				BaseURL  string `json:"base_url"`
				AdminURL string `json:"admin_url"`
			}
			p.tail = append(p.tail[max(0, len(p.tail)-19):], sc.Text())
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "rxgate serving" {
				p.baseURL, p.adminURL = line.BaseURL, line.AdminURL
				p.ready.Store(true)
				close(p.readyCh)
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		p.waitErr = cmd.Wait()
	}()
	return p
}

// waitReady waits until p serves; a process that exits first, or takes
// longer than soakOpenLimit, is a store that did not open.
func (s *soaker) waitReady(p *soakProc) bool {
	select {
	case <-p.readyCh:
		return true
	case <-p.exited:
		s.t.Errorf("the store did not open: rxgate exited (%v):\n%s", p.waitErr, strings.Join(p.tail, "\n"))
	case <-time.After(soakOpenLimit):
		s.t.Errorf("the store did not open within %s", soakOpenLimit)
	}
	return false
}

// kill sends SIGKILL and waits for the process to be gone.
func (s *soaker) kill(p *soakProc) {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// soakReceiver verifies every delivery's signature and answers the first
// request for an event with a 503 for about 8% of events and hangs past
// the timeout for about 2%; every later request gets a 200, so that every
// event is delivered within its attempts.
type soakReceiver struct {
	secret        atomic.Value // string
	mu            sync.Mutex
	seen          map[string]bool // event id -> a request arrived
	okByEvent     map[string]int  // event id -> requests answered 200
	okSCID        map[string]bool // scid -> answered 200 with a valid signature
	requests      int
	failed, hung  int
	badSignatures int
	release       chan struct{}
	released      bool
}

func newSoakReceiver() *soakReceiver {
	return &soakReceiver{seen: map[string]bool{}, okByEvent: map[string]int{}, okSCID: map[string]bool{}, release: make(chan struct{})}
}

func (r *soakReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	at := time.Now()
	body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	secret, _ := r.secret.Load().(string)
	var p struct {
		EventID string `json:"event_id"`
		Data    struct {
			SCID string `json:"scid"`
		} `json:"data"`
	}
	if err == nil {
		err = json.Unmarshal(body, &p)
	}
	r.mu.Lock()
	r.requests++
	if err != nil || signature.Verify([]string{secret}, req.Header.Get(signature.HeaderName), body, at) != nil {
		r.badSignatures++
		r.mu.Unlock()
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	first := !r.seen[p.EventID]
	r.seen[p.EventID] = true
	h := fnv.New32a()
	_, _ = h.Write([]byte(p.EventID))
	switch n := h.Sum32() % 100; {
	case first && n < 8:
		r.failed++
		r.mu.Unlock()
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	case first && n < 10:
		r.hung++
		r.mu.Unlock()
		// Past the server's 2 s timeout: it gives up and retries later.
		select {
		case <-req.Context().Done():
		case <-r.release:
		case <-time.After(10 * time.Second):
		}
		return
	}
	r.okByEvent[p.EventID]++
	r.okSCID[p.Data.SCID] = true
	r.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// releaseAll ends every hanging request.
func (r *soakReceiver) releaseAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.released {
		r.released = true
		close(r.release)
	}
}

// waitDelivered waits until every acknowledged create's event has been
// answered 200, up to limit, and returns how many have not.
func (r *soakReceiver) waitDelivered(acked map[string]string, limit time.Duration) int {
	deadline := time.Now().Add(limit)
	for {
		r.mu.Lock()
		missing := 0
		for scid := range acked {
			if !r.okSCID[scid] {
				missing++
			}
		}
		r.mu.Unlock()
		if missing == 0 || time.Now().After(deadline) {
			return missing
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// soakLoad is the mixed load and what it had acknowledged.
type soakLoad struct {
	client            *http.Client
	adminURL, baseURL string
	key, token        string
	tn                *testsuite.Tenant
	patients          []string
	// createPatients, when set, are the patients creates go to instead
	// of patients (the power-cut test gives each cycle its own, so that
	// checking a cycle lists only its prescriptions). Set only while no
	// load runs.
	createPatients []string

	// observe, when set, sees every answer (or its absence: err) with
	// the time its request was sent. Set only while no load runs.
	observe func(method string, sent time.Time, status int, body []byte, err error)

	seq            atomic.Int64
	createAttempts atomic.Int64
	createFailed   atomic.Int64

	mu      sync.Mutex
	acked   map[string]string // scid -> patient, answered 201
	updates []soakUpdates     // by patient
}

// newSoakLoad points the testsuite at the server at baseURL and adminURL,
// makes a validated tenant with soakPatients patients whose partner's
// endpoint is the receiver rcv at rcvURL, and returns the testsuite and the
// load that drives the server (the soak and the power-cut test share it).
func newSoakLoad(t *testing.T, baseURL, adminURL, key string, rcv *soakReceiver, rcvURL string) (*testsuite.Env, *soakLoad) {
	t.Helper()
	t.Setenv(testsuite.EnvBaseURL, baseURL)
	t.Setenv(testsuite.EnvAdminURL, adminURL)
	t.Setenv(testsuite.EnvAdminKey, key)
	env := testsuite.Start(t)
	tn := env.NewTenant(t)
	validate(t, env, tn)
	_, secret := registerEndpoint(t, env, tn.PartnerID, rcvURL)
	rcv.secret.Store(secret)
	patients := []string{tn.PatientID}
	for len(patients) < soakPatients {
		patients = append(patients, newPatient(t, env, tn, testsuite.RolePrescriber, nil))
	}
	return env, &soakLoad{
		client:   soakClient(),
		adminURL: adminURL, baseURL: baseURL, key: key,
		tn: tn, token: tn.Token(t, testsuite.RolePrescriber), patients: patients,
		acked:   map[string]string{},
		updates: make([]soakUpdates, len(patients)),
	}
}

// soakClient is the load's HTTP client.
func soakClient() *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
}

// start starts the load: soakCreators goroutines creating, one updating
// each patient. stop ends it and waits for it; calling it again does
// nothing.
func (l *soakLoad) start() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range soakCreators {
		wg.Go(func() { l.create(ctx, i) })
	}
	for i := range l.patients {
		wg.Go(func() { l.update(ctx, i) })
	}
	return sync.OnceFunc(func() { cancel(); wg.Wait() })
}

// soakUpdates is one patient's update sequence: every update sets
// given_name to Soak<n>, n counting up; sent is the last n sent, acked the
// last n answered 200.
type soakUpdates struct{ sent, acked, count int }

// do sends a request and returns its status and body; an error means no
// answer arrived (the server was down or died during the request).
func (l *soakLoad) do(ctx context.Context, method, u, body string, header map[string]string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	sent := time.Now()
	resp, err := l.client.Do(req)
	if err != nil {
		if l.observe != nil && ctx.Err() == nil {
			l.observe(method, sent, 0, nil, err)
		}
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if l.observe != nil && ctx.Err() == nil {
		l.observe(method, sent, resp.StatusCode, b, err)
	}
	return resp.StatusCode, b, err
}

// pause waits d or until ctx ends; it reports whether to go on.
func pause(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// create makes prescriptions through the operator API until ctx ends,
// spreading them over the patients.
func (l *soakLoad) create(ctx context.Context, worker int) {
	auth := map[string]string{"Authorization": "Bearer " + l.key}
	for n := worker; ; n++ {
		patients := l.patients
		if l.createPatients != nil {
			patients = l.createPatients
		}
		patient := patients[n%len(patients)]
		scid := fmt.Sprintf("SK%016d", l.seq.Add(1))
		u := l.adminURL + "/admin/v1/organizations/" + l.tn.OrgID + "/users/" + l.tn.Users[testsuite.RolePrescriber] + "/patients/" + patient + "/prescriptions"
		l.createAttempts.Add(1)
		status, _, err := l.do(ctx, http.MethodPost, u, `{"item_name":"Amoxicillin 500 mg capsule","quantity":"20","scid":"`+scid+`"}`, auth)
		if ctx.Err() != nil {
			return
		}
		if err == nil && status == http.StatusCreated {
			l.mu.Lock()
			l.acked[scid] = patient
			l.mu.Unlock()
		} else {
			l.createFailed.Add(1)
		}
		wait := time.Duration(rand.Int64N(int64(15 * time.Millisecond)))
		if err != nil {
			wait = 20 * time.Millisecond // the server is down: try again soon
		}
		if !pause(ctx, wait) {
			return
		}
	}
}

// update changes patient i's given name through the partner API until ctx
// ends, one update at a time.
func (l *soakLoad) update(ctx context.Context, i int) {
	header := map[string]string{"Authorization": "Bearer " + l.token, testsuite.HeaderOrganizationSecret: l.tn.OrgSecret}
	u := l.baseURL + "/v1/organizations/" + l.tn.OrgID + "/users/" + l.tn.Users[testsuite.RolePrescriber] + "/patients/" + l.patients[i]
	l.mu.Lock()
	first := l.updates[i].sent + 1 // the sequence goes on across starts
	l.mu.Unlock()
	for n := first; ; n++ {
		l.mu.Lock()
		l.updates[i].sent = n
		l.mu.Unlock()
		status, _, err := l.do(ctx, http.MethodPut, u, fmt.Sprintf(`{"given_name":"Soak%d"}`, n), header)
		if ctx.Err() != nil {
			return
		}
		if err == nil && status == http.StatusOK {
			l.mu.Lock()
			l.updates[i].acked = n
			l.updates[i].count++
			l.mu.Unlock()
		}
		wait := time.Duration(rand.Int64N(int64(20 * time.Millisecond)))
		if err != nil {
			wait = 20 * time.Millisecond
		}
		if !pause(ctx, wait) {
			return
		}
	}
}

func (l *soakLoad) updatesAcked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, u := range l.updates {
		n += u.count
	}
	return n
}

// prescriptionsURL is the partner list of patient's prescriptions.
func (l *soakLoad) prescriptionsURL(patient, cursor string, limit int) string {
	q := url.Values{"limit": {strconv.Itoa(limit)}}
	if cursor != "" {
		q.Set("lastKey", cursor)
	}
	return l.baseURL + "/v1/organizations/" + l.tn.OrgID + "/users/" + l.tn.Users[testsuite.RolePrescriber] + "/patients/" + patient + "/prescriptions?" + q.Encode()
}

// page reads one page of the partner list: its scids and next cursor.
func (l *soakLoad) page(patient, cursor string, limit int) (scids []string, next string, status int, err error) {
	header := map[string]string{"Authorization": "Bearer " + l.token, testsuite.HeaderOrganizationSecret: l.tn.OrgSecret}
	status, body, err := l.do(context.Background(), http.MethodGet, l.prescriptionsURL(patient, cursor, limit), "", header)
	if err != nil || status != http.StatusOK {
		return nil, "", status, err
	}
	var ans struct {
		Data struct {
			Prescriptions []struct {
				SCID string `json:"scid"`
			} `json:"prescriptions"`
		} `json:"data"`
		Pagination struct {
			LastKey *string `json:"lastKey"`
		} `json:"pagination"`
	}
	if err := json.Unmarshal(body, &ans); err != nil {
		return nil, "", status, err
	}
	for _, d := range ans.Data.Prescriptions {
		scids = append(scids, d.SCID)
	}
	if ans.Pagination.LastKey != nil {
		next = *ans.Pagination.LastKey
	}
	return scids, next, status, nil
}

// soakCursor is a cursor issued during the soak and the page it led to.
type soakCursor struct {
	patient, cursor string
	scids           []string
}

// cursor takes the cursor after a random patient's first page, and the
// page after it, while the server runs; false when the server died
// meanwhile or the patient has one page.
func (l *soakLoad) cursor() (soakCursor, bool) {
	patient := l.patients[rand.IntN(len(l.patients))]
	_, next, _, err := l.page(patient, "", 10)
	if err != nil || next == "" {
		return soakCursor{}, false
	}
	scids, _, _, err := l.page(patient, next, 10)
	if err != nil || len(scids) == 0 {
		return soakCursor{}, false
	}
	return soakCursor{patient: patient, cursor: next, scids: scids}, true
}

// checkCursors reads from every cursor issued before a kill: it must still
// be accepted, and the page it led to must still follow it. A create in
// flight when the cursor was issued may since have committed into that
// page, so the page's scids are looked for within five pages.
func (l *soakLoad) checkCursors(t *testing.T, cursors []soakCursor) (broken int) {
	for _, c := range cursors {
		found := map[string]bool{}
		cursor := c.cursor
		for range 5 {
			scids, next, status, err := l.page(c.patient, cursor, 10)
			if err != nil || status != http.StatusOK {
				t.Logf("a cursor issued before a kill: HTTP %d, %v", status, err)
				break
			}
			for _, s := range scids {
				found[s] = true
			}
			if next == "" {
				break
			}
			cursor = next
		}
		for _, s := range c.scids {
			if !found[s] {
				broken++
				t.Logf("a cursor issued before a kill no longer leads to %s", s)
				break
			}
		}
	}
	return broken
}

// listedAll walks every patient's prescriptions and returns how many
// acknowledged creates are missing.
func (l *soakLoad) listedAll(t *testing.T, env *testsuite.Env, acked map[string]string) int {
	listed := l.listed(t, l.patients)
	lost := 0
	for scid := range acked {
		if !listed[scid] {
			lost++
			if lost <= 10 {
				t.Logf("acknowledged create %s is not listed", scid)
			}
		}
	}
	return lost
}

// listed walks the prescriptions of patients and returns their scids.
func (l *soakLoad) listed(t *testing.T, patients []string) map[string]bool {
	listed := map[string]bool{}
	for _, patient := range patients {
		cursor := ""
		for {
			scids, next, status, err := l.page(patient, cursor, 50)
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, status)
			for _, s := range scids {
				listed[s] = true
			}
			if next == "" {
				break
			}
			cursor = next
		}
	}
	return listed
}

// checkUpdates reads every patient back through the operator API: its
// given name must be the last acknowledged update's or a later one that
// was sent (an update in flight at a kill may have committed).
func (l *soakLoad) checkUpdates(t *testing.T, env *testsuite.Env) (lost int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, patient := range l.patients {
		got := storedPatient(t, env, l.tn, testsuite.RolePrescriber, patient)["given_name"]
		name, _ := got.(string)
		n, err := strconv.Atoi(strings.TrimPrefix(name, "Soak"))
		if l.updates[i].acked == 0 && errors.Is(err, strconv.ErrSyntax) {
			continue // never updated
		}
		if err != nil || n < l.updates[i].acked || n > l.updates[i].sent {
			lost++
			t.Logf("patient %d reads given_name %q; acknowledged up to Soak%d, sent up to Soak%d", i, name, l.updates[i].acked, l.updates[i].sent)
		}
	}
	return lost
}
