//go:build failover && linux

package testsuite_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage"
	"github.com/rxgate/rxgate/testsuite"
)

// The failover test: `make test-failover` (issue 29). A monitor and two
// PostgreSQL nodes of pg_auto_failover with synchronous replication run on
// loopback ports under a temporary directory, as the postgres user; two
// rxgate replicas (the real binary) share the database through the
// multi-host connection string, under the soak's load (soak_test.go) and
// with webhooks to one receiver. FAILOVERS rounds (default 20) switch the
// primary, alternating:
//   - kill: the primary node dies: SIGKILL to its pg_autoctl (so that it
//     cannot restart PostgreSQL in place) and to its postmaster; the
//     monitor promotes the standby; the dead node is started again and
//     rejoins as the standby, so the next round fails over the other way;
//   - switchover: pg_autoctl perform switchover, a planned switch.
//
// Each round reports the time from the kill (or the switchover's start) to
// the first create acknowledged of those sent after it. At the end every
// acknowledged create and update must read back, every event must have
// been delivered with a valid signature, no delivery may have been in
// flight twice at once, the per-endpoint limit must have held, and the
// load must have seen nothing but 200, 201 and 503 envelopes (no hang, no
// 500). It needs Linux, root, the postgres user and pg_autoctl
// (apt-get install postgresql-15-auto-failover pg-auto-failover-cli);
// without them it skips with one line. Every process it starts is
// stopped by its id and its directory removed, also on SIGINT or SIGTERM.

const (
	failoverPGBin       = "/usr/lib/postgresql/15/bin"
	failoverWorkers     = 4 // webhooks.workers: at most 2 in flight to one endpoint
	failoverPerEP       = 2
	failoverHookTimeout = 2 * time.Second  // webhooks.timeout
	failoverRoundLoad   = 3 * time.Second  // load between a healthy cluster and the next switch
	failoverRecovery    = 2 * time.Minute  // a round whose service is not back by then fails
	failoverHealthy     = 3 * time.Minute  // for the old primary to rejoin as the standby
	failoverDrainStall  = 3 * time.Minute  // at the end, the acknowledged events still undelivered fail the test when none has arrived for this long
	failoverDrainMax    = time.Hour        // or when they have not all arrived by then
	failoverDrainLog    = 30 * time.Second // how often the drain says how far it is
	failoverStop        = 20 * time.Second // for a pg_autoctl to stop on SIGTERM
)

func TestFailover(t *testing.T) {
	rounds := soakEnv(t, "FAILOVERS", 20)
	if why := failoverCannot(); why != "" {
		t.Skip("failover: " + why)
	}
	bin := rxgateBinary(t)
	c := newFailoverCluster(t)

	// The receiver: the soak's, behind a check that no delivery is in
	// flight twice at once and that the endpoint's limit holds.
	rcv := newSoakReceiver()
	var (
		mu                sync.Mutex
		inflight, maxSeen int
		perDelivery       = map[string]int{}
		arrived           = map[*http.Request]time.Time{}
		overlaps          []string
		beyond            []string // what was in flight when more than the limit was
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Webhook-Id")
		mu.Lock()
		inflight++
		maxSeen = max(maxSeen, inflight)
		if perDelivery[id]++; perDelivery[id] > 1 {
			overlaps = append(overlaps, id)
		}
		arrived[r] = time.Now()
		if inflight > failoverPerEP && len(beyond) < 5 {
			var ages []string
			for _, at := range arrived {
				ages = append(ages, time.Since(at).Round(time.Millisecond).String())
			}
			beyond = append(beyond, fmt.Sprintf("%s: %d in flight, arrived %s ago", time.Now().Format("15:04:05.000"), inflight, strings.Join(ages, ", ")))
		}
		mu.Unlock()
		// In flight for its sender until it answers or gives up: the
		// earliest of the answer, the server seeing the connection closed
		// (the request's context), and webhooks.timeout after the arrival
		// (the sender's timeout started before it). Each alone lags the
		// sender on a busy machine, and a lag shows as one delivery too
		// many in flight; a delivery the sender still waits for has seen
		// none of them.
		var once sync.Once
		done := func() {
			once.Do(func() { mu.Lock(); inflight--; perDelivery[id]--; delete(arrived, r); mu.Unlock() })
		}
		timer := time.AfterFunc(failoverHookTimeout, done)
		closed := context.AfterFunc(r.Context(), done)
		defer func() { timer.Stop(); closed(); done() }()
		rcv.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(rcv.releaseAll)

	// Two replicas on the multi-host URL.
	key := "failover-key-" + storage.NewSecret()
	dbURL := fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/rxgate?target_session_attrs=read-write&sslmode=disable&connect_timeout=2",
		c.nodes[0].port, c.nodes[1].port)
	var procs []*binaryProcess
	for i := range 2 {
		cfg := filepath.Join(t.TempDir(), "rxgate.yaml")
		require.NoError(t, os.WriteFile(cfg, []byte(`
http:
  listen: 127.0.0.1:0
admin:
  listen: 127.0.0.1:0
  api_key: `+key+`
storage:
  driver: postgres
  postgres:
    url: "`+dbURL+`"
    replica_id: failover-`+strconv.Itoa(i+1)+`
    max_conns: 8
    statement_timeout: 5s
    lock_timeout: 3s
    idle_in_transaction_timeout: 3s
    network_timeout: 10s
auth:
  builtin_issuer: true
webhooks:
  allow_insecure_loopback: true
  workers: `+strconv.Itoa(failoverWorkers)+`
  timeout: `+failoverHookTimeout.String()+`
  backoff_base: 100ms
  backoff_max: 1s
`), 0o600))
		p := startBinary(t, bin, cfg)
		procs = append(procs, p)
		c.mu.Lock()
		c.others = append(c.others, p.cmd.Process.Pid)
		c.mu.Unlock()
	}

	// The load: the soak's, one on each replica, on patients of their own.
	env, ld1 := newSoakLoad(t, procs[0].baseURL, procs[0].admURL, key, rcv, srv.URL+"/")
	ld2 := &soakLoad{client: soakClient(), adminURL: procs[1].admURL, baseURL: procs[1].baseURL, key: key,
		tn: ld1.tn, token: ld1.token, acked: map[string]string{}, updates: make([]soakUpdates, soakPatients)}
	ld2.seq.Store(1 << 40) // scids apart from ld1's
	for range soakPatients {
		ld2.patients = append(ld2.patients, newPatient(t, env, ld1.tn, testsuite.RolePrescriber, nil))
	}
	obs := &failoverAnswers{}
	ld1.observe, ld2.observe = obs.observe, obs.observe
	stop1, stop2 := ld1.start(), ld2.start()
	t.Cleanup(stop1)
	t.Cleanup(stop2)

	// Each replica's /readyz, asked through the whole run.
	var probes []*readyzProbe
	for _, p := range procs {
		pr := startReadyz("http://" + p.partnerAddr + "/readyz")
		t.Cleanup(pr.stop)
		probes = append(probes, pr)
	}

	// Per kill: the time from the kill to the first create acknowledged
	// of those sent after it. Per switchover: how long pg_autoctl perform
	// switchover took, and the longest time without an acknowledged create
	// from its start until a create sent after it ended was acknowledged.
	var killRecoveries, switchTimes, switchGaps []time.Duration
	resets := make([]float64, len(procs)) // summed over the kill rounds
	var bug774 []int                      // switchover rounds where pg_auto_failover lost writes itself
	for round := 1; round <= rounds; round++ {
		time.Sleep(failoverRoundLoad)
		primary := c.primary(t)
		mode := "kill"
		if round%2 == 0 {
			mode = "switchover"
		}
		resetsBefore := failoverPoolResets(t, procs, key)
		at := time.Now()
		done := at
		switch mode {
		case "kill":
			c.kill(t, primary)
			// A create sent before the kill returned may still commit
			// on the node (its backends outlive the postmaster a moment,
			// and their commits reach the standby): it says nothing of
			// the service after the kill.
			done = time.Now()
		case "switchover":
			c.switchover(t)
			done = time.Now()
		}
		since, ok := obs.recovered(done, failoverRecovery)
		back := done.Add(since)
		took := back.Sub(at)
		if !ok {
			obs.mu.Lock()
			t.Logf("answers so far: %s; other answers %d: %v", maps2str(obs.byStatus), obs.bad, obs.samples)
			obs.mu.Unlock()
			t.Fatalf("round %d (%s of node %d): no create acknowledged within %s", round, mode, primary+1, failoverRecovery)
		}
		gap := obs.longestGap(at, back)
		if mode == "kill" {
			// Started again before the monitor promoted the standby, the
			// node would carry on as the primary.
			c.waitPromoted(t, 1-primary, failoverHealthy)
			c.start(t, primary) // it rejoins as the standby
		}
		c.waitHealthy(t, failoverHealthy)
		newPrimary := c.primary(t)
		require.NotEqual(t, primary, newPrimary, "round %d (%s): the primary switched", round, mode)

		// /readyz: 200 again on every replica; after a kill, 503 first
		// (no primary answers for the monitor's detection at least).
		var ready []string
		for i, pr := range probes {
			back, n503, ok := pr.readyAgain(at, failoverRecovery)
			require.True(t, ok, "round %d (%s): replica %d's /readyz answers 200 again", round, mode, i+1)
			if mode == "kill" {
				require.NotZero(t, n503, "round %d (kill): replica %d's /readyz answered 503 while no primary answered", round, i+1)
			}
			ready = append(ready, fmt.Sprintf("replica %d: %d× 503, 200 again %s after", i+1, n503, back.Round(time.Millisecond)))
		}
		// rxgate_postgres_pool_resets_total rises on each replica
		// after a kill.
		resetsAfter := failoverPoolResets(t, procs, key)
		var rose []string
		for i := range procs {
			d := resetsAfter[i] - resetsBefore[i]
			if mode == "kill" {
				require.Positive(t, d, "round %d (kill): replica %d's rxgate_postgres_pool_resets_total rose", round, i+1)
				resets[i] += d
			}
			rose = append(rose, fmt.Sprintf("+%g", d))
		}

		// pg_auto_failover's own loss of writes, told apart.
		async, err := c.asyncPrimaryEvents(at)
		require.NoError(t, err, "the monitor's events")
		if mode == "switchover" && len(async) > 0 {
			bug774 = append(bug774, round)
			t.Logf("round %d: pg_auto_failover assigned the primary it was switching over wait_primary (hapostgres/pg_auto_failover#774): "+
				"it took writes without a synchronous standby while the standby was promoted; pg_rewind discards them when it rejoins: %s",
				round, strings.Join(async, "; "))
		}

		switch mode {
		case "kill":
			killRecoveries = append(killRecoveries, took)
			t.Logf("round %d: kill of node %d; node %d is the primary; first create acknowledged %s after the kill; pool resets %s; /readyz %s",
				round, primary+1, newPrimary+1, took.Round(time.Millisecond), strings.Join(rose, " "), strings.Join(ready, "; "))
		case "switchover":
			switchTimes, switchGaps = append(switchTimes, done.Sub(at)), append(switchGaps, gap)
			t.Logf("round %d: switchover from node %d; node %d is the primary; the switchover took %s, creates unacknowledged for at most %s; pool resets %s; /readyz %s",
				round, primary+1, newPrimary+1, done.Sub(at).Round(time.Millisecond), gap.Round(time.Millisecond), strings.Join(rose, " "), strings.Join(ready, "; "))
		}
	}

	stop1()
	stop2()
	acked := map[string]string{}
	for _, ld := range []*soakLoad{ld1, ld2} {
		ld.mu.Lock()
		for k, v := range ld.acked {
			acked[k] = v
		}
		ld.mu.Unlock()
	}
	// The backlog drains for as long as it goes down: the load outpaces
	// two deliveries in flight, so its size grows with FAILOVERS. A
	// delivery that never comes shows as no progress.
	drainFrom := time.Now()
	undelivered, progressed := len(acked), drainFrom
	for {
		was := undelivered
		undelivered = rcv.waitDelivered(acked, failoverDrainLog)
		if undelivered < was {
			progressed = time.Now()
		}
		t.Logf("drain: %d acknowledged events undelivered %s after the load stopped; %s",
			undelivered, time.Since(drainFrom).Round(time.Second), failoverQueueState(t, procs, key))
		if undelivered == 0 || time.Since(progressed) >= failoverDrainStall || time.Since(drainFrom) >= failoverDrainMax {
			break
		}
	}
	drained := time.Since(drainFrom)
	lost := ld1.listedAll(t, env, ld1.acked) + ld2.listedAll(t, env, ld2.acked)
	lostUpdates := ld1.checkUpdates(t, env) + ld2.checkUpdates(t, env)

	rcv.mu.Lock()
	badSigs, events, requests := rcv.badSignatures, len(rcv.okByEvent), rcv.requests
	rcv.mu.Unlock()
	mu.Lock()
	overlapped, most, beyondSeen := len(overlaps), maxSeen, slices.Clone(beyond)
	mu.Unlock()
	obs.mu.Lock()
	bad, samples, byStatus := obs.bad, obs.samples, maps2str(obs.byStatus)
	obs.mu.Unlock()
	var readyzBad int
	var readyzSamples []string
	for _, pr := range probes {
		pr.stop()
		readyzBad += pr.bad
		readyzSamples = append(readyzSamples, pr.samples...)
	}
	t.Logf(`failover report
  switches              %d (%d kills of the primary, %d planned switchovers)
  kill to service       %s (the first create acknowledged of those sent after the kill)
  switchover took       %s (pg_autoctl perform switchover)
  switchover gap        %s (the longest time without an acknowledged create)
  pool resets           %v on each replica over the kills (rxgate_postgres_pool_resets_total)
  pg_auto_failover#774  in the switchovers of rounds %v (the drained primary went on alone: its writes are lost)
  /readyz               answers other than 200 and a 503 envelope: %d
  acknowledged creates  %d (%d attempts)
  acknowledged updates  %d
  lost creates          %d
  lost updates          %d
  undelivered events    %d (%s after the load stopped)
  webhook requests      %d for %d events, bad signatures %d
  deliveries in flight  at most %d to the endpoint (limit %d), %d in flight twice at once
  answers               %s
  other answers         %d`,
		len(killRecoveries)+len(switchTimes), len(killRecoveries), len(switchTimes),
		percentiles(killRecoveries), percentiles(switchTimes), percentiles(switchGaps),
		resets, bug774, readyzBad,
		len(acked), ld1.createAttempts.Load()+ld2.createAttempts.Load(),
		ld1.updatesAcked()+ld2.updatesAcked(),
		lost, lostUpdates, undelivered, drained.Round(time.Second),
		requests, events, badSigs,
		most, failoverPerEP, overlapped,
		byStatus, bad)
	for _, s := range samples {
		t.Logf("  other answer: %s", s)
	}
	for _, s := range beyondSeen {
		t.Logf("  beyond the endpoint's limit: %s", s)
	}
	for _, s := range readyzSamples {
		t.Logf("  other /readyz answer: %s", s)
	}
	if lost+lostUpdates+undelivered+badSigs+overlapped+bad+readyzBad > 0 || most > failoverPerEP {
		t.Errorf("the failover lost writes or deliveries, or answered other than 200, 201 and 503: see the report")
		if len(bug774) > 0 {
			t.Errorf("pg_auto_failover itself lost the writes its drained primary took in rounds %v (hapostgres/pg_auto_failover#774)", bug774)
		}
	}
	require.NotZero(t, len(acked), "the load acknowledged nothing")
}

// percentiles prints the p50, p99 and max of ds (the nearest rank).
func percentiles(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	sorted := slices.Clone(ds)
	slices.Sort(sorted)
	at := func(q float64) time.Duration {
		rank := int(math.Ceil(q*float64(len(sorted)))) - 1
		return sorted[max(0, min(len(sorted)-1, rank))].Round(time.Millisecond)
	}
	return fmt.Sprintf("p50 %s, p99 %s, max %s (n=%d)", at(0.5), at(0.99), sorted[len(sorted)-1].Round(time.Millisecond), len(sorted))
}

// failoverMetrics reads each replica's /metrics.
func failoverMetrics(t *testing.T, procs []*binaryProcess, key string) []map[string]*dto.MetricFamily {
	t.Helper()
	var out []map[string]*dto.MetricFamily
	for i, p := range procs {
		req, err := http.NewRequest(http.MethodGet, p.admURL+"/metrics", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := soakClient().Do(req)
		require.NoError(t, err, "replica %d's /metrics", i+1)
		parser := expfmt.NewTextParser(model.UTF8Validation)
		families, err := parser.TextToMetricFamilies(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, "replica %d's /metrics", i+1)
		require.NoError(t, err, "replica %d's /metrics parses", i+1)
		out = append(out, families)
	}
	return out
}

// failoverPoolResets reads rxgate_postgres_pool_resets_total from each
// replica's /metrics.
func failoverPoolResets(t *testing.T, procs []*binaryProcess, key string) []float64 {
	t.Helper()
	var out []float64
	for i, families := range failoverMetrics(t, procs, key) {
		v, ok := sample(families, "rxgate_postgres_pool_resets_total", nil)
		require.True(t, ok, "replica %d exposes rxgate_postgres_pool_resets_total", i+1)
		out = append(out, v)
	}
	return out
}

// failoverQueueState prints the webhook queue as the replicas' metrics
// show it: the jobs in the store, and the attempts by outcome.
func failoverQueueState(t *testing.T, procs []*binaryProcess, key string) string {
	t.Helper()
	all := failoverMetrics(t, procs, key)
	pending, _ := sample(all[0], "rxgate_webhook_jobs", map[string]string{"state": "pending"})
	leased, _ := sample(all[0], "rxgate_webhook_jobs", map[string]string{"state": "leased"})
	oldest, _ := sample(all[0], "rxgate_webhook_oldest_pending_seconds", nil)
	disabled, _ := sample(all[0], "rxgate_webhook_endpoints_disabled", nil)
	outcomes := map[string]float64{}
	for _, families := range all {
		for _, o := range []string{"delivered", "retry", "failed"} {
			v, _ := sample(families, "rxgate_webhook_deliveries_total", map[string]string{"outcome": o})
			outcomes[o] += v
		}
	}
	return fmt.Sprintf("jobs pending %g (the oldest due %.0fs ago), leased %g; endpoints disabled %g; attempts delivered %g, retry %g, failed %g",
		pending, oldest, leased, disabled, outcomes["delivered"], outcomes["retry"], outcomes["failed"])
}

// readyzProbe asks one replica's /readyz every readyzEvery and keeps the
// answers; anything but 200 and a 503 envelope (a transport error, a
// timeout, another status) is counted and sampled.
type readyzProbe struct {
	stop func()

	mu      sync.Mutex
	answers []readyzAnswer
	bad     int
	samples []string
}

type readyzAnswer struct {
	sent   time.Time
	status int
}

const readyzEvery = 100 * time.Millisecond

func startReadyz(u string) *readyzProbe {
	p := &readyzProbe{}
	ctx, cancel := context.WithCancel(context.Background())
	client := &http.Client{Timeout: 15 * time.Second}
	var wg sync.WaitGroup
	wg.Go(func() {
		for pause(ctx, readyzEvery) {
			sent := time.Now()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
			if err != nil {
				panic(err)
			}
			status, body := 0, []byte(nil)
			resp, err := client.Do(req)
			if err == nil {
				body, err = io.ReadAll(resp.Body)
				resp.Body.Close()
				status = resp.StatusCode
			}
			if ctx.Err() != nil {
				return
			}
			ok := err == nil && (status == http.StatusOK ||
				status == http.StatusServiceUnavailable && strings.Contains(string(body), "SERVICE_UNAVAILABLE"))
			p.mu.Lock()
			p.answers = append(p.answers, readyzAnswer{sent: sent, status: status})
			if !ok {
				p.bad++
				if len(p.samples) < 10 {
					p.samples = append(p.samples, fmt.Sprintf("%s HTTP %d after %s: %v %.200s", u, status, time.Since(sent).Round(time.Millisecond), err, body))
				}
			}
			p.mu.Unlock()
		}
	})
	p.stop = sync.OnceFunc(func() { cancel(); wg.Wait() })
	return p
}

// readyAgain waits (up to limit) until the probe's last answer is a 200
// asked after at, and returns how long after at the first 200 after the
// last 503 since at was asked, and how many 503s it saw since at.
func (p *readyzProbe) readyAgain(at time.Time, limit time.Duration) (back time.Duration, n503 int, ok bool) {
	deadline := time.Now().Add(limit)
	for {
		p.mu.Lock()
		n := len(p.answers)
		last := readyzAnswer{}
		if n > 0 {
			last = p.answers[n-1]
		}
		if last.status == http.StatusOK && last.sent.After(at) {
			var since []readyzAnswer
			for i := n - 1; i >= 0 && p.answers[i].sent.After(at); i-- {
				since = append(since, p.answers[i]) // newest first
			}
			p.mu.Unlock()
			firstOK := since[0]
			for _, a := range since {
				if a.status == http.StatusServiceUnavailable {
					n503++
				}
			}
			for _, a := range since {
				if a.status != http.StatusOK {
					break
				}
				firstOK = a
			}
			if n503 == 0 {
				return 0, 0, true
			}
			return firstOK.sent.Sub(at), n503, true
		}
		p.mu.Unlock()
		if time.Now().After(deadline) {
			return 0, 0, false
		}
		time.Sleep(readyzEvery)
	}
}

// maps2str prints counts by status in order.
func maps2str(m map[int]int) string {
	var keys []int
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d: %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// failoverAnswers sees every answer of the load: 200, 201 and 503 in the
// envelope are expected; anything else, and no answer at all, is counted
// and sampled. It also keeps the creates acknowledged, by the time their
// request was sent.
type failoverAnswers struct {
	mu       sync.Mutex
	byStatus map[int]int
	bad      int
	samples  []string
	acks     []time.Time // sent times of acknowledged creates, by arrival
	ackTimes []time.Time // their arrival
}

func (a *failoverAnswers) observe(method string, sent time.Time, status int, body []byte, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.byStatus == nil {
		a.byStatus = map[int]int{}
	}
	a.byStatus[status]++
	ok := err == nil && (status == http.StatusOK || status == http.StatusCreated)
	if err == nil && status == http.StatusServiceUnavailable {
		var env map[string]any
		ok = json.Unmarshal(body, &env) == nil && strings.Contains(string(body), "SERVICE_UNAVAILABLE")
	}
	if !ok {
		a.bad++
		if len(a.samples) < 10 {
			a.samples = append(a.samples, fmt.Sprintf("%s HTTP %d after %s: %v %.200s", method, status, time.Since(sent).Round(time.Millisecond), err, body))
		}
	}
	if method == http.MethodPost && status == http.StatusCreated {
		a.acks = append(a.acks, sent)
		a.ackTimes = append(a.ackTimes, time.Now())
	}
}

// longestGap is the longest time between from, the arrivals of the
// creates acknowledged between from and to, and to.
func (a *failoverAnswers) longestGap(from, to time.Time) time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	prev, gap := from, time.Duration(0)
	for _, at := range a.ackTimes {
		if at.After(from) && !at.After(to) {
			gap = max(gap, at.Sub(prev))
			prev = at
		}
	}
	return max(gap, to.Sub(prev))
}

// recovered waits for a create sent after at to be acknowledged and
// returns how long after at it was.
func (a *failoverAnswers) recovered(at time.Time, limit time.Duration) (time.Duration, bool) {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		a.mu.Lock()
		for i := len(a.acks) - 1; i >= 0 && a.ackTimes[i].After(at); i-- {
			if a.acks[i].After(at) {
				// The earliest such arrival: walk on back.
				first := a.ackTimes[i]
				for j := i - 1; j >= 0 && a.ackTimes[j].After(at); j-- {
					if a.acks[j].After(at) {
						first = a.ackTimes[j]
					}
				}
				a.mu.Unlock()
				return first.Sub(at), true
			}
		}
		a.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
	}
	return 0, false
}

// failoverCannot says why this machine cannot run the test, or "".
func failoverCannot() string {
	if _, err := exec.LookPath("pg_autoctl"); err != nil {
		return "pg_autoctl is missing (apt-get install postgresql-15-auto-failover pg-auto-failover-cli)"
	}
	if os.Geteuid() != 0 {
		return "needs root, to run pg_autoctl as the postgres user"
	}
	if _, err := user.Lookup("postgres"); err != nil {
		return "no postgres user"
	}
	if _, err := os.Stat(filepath.Join(failoverPGBin, "pg_ctl")); err != nil {
		return "PostgreSQL 15's binaries are missing (" + failoverPGBin + ")"
	}
	return ""
}

// failoverCluster is the monitor and the two nodes, each a `pg_autoctl
// run` in a process group of its own.
type failoverCluster struct {
	dir      string
	bin      string // pg_autoctl
	uid, gid uint32 // the postgres user's
	monitor  failoverNode
	nodes    [2]failoverNode

	mu     sync.Mutex
	procs  map[*exec.Cmd]chan struct{} // running pg_autoctl processes -> closed when reaped
	others []int                       // the rxgate replicas: killed on a signal, when their cleanups cannot run
	down   bool
}

type failoverNode struct {
	name  string
	port  int
	pgdir string
	cmd   *exec.Cmd
	log   *os.File
}

func newFailoverCluster(t *testing.T) *failoverCluster {
	dir, err := os.MkdirTemp("", "rxgate-failover-")
	require.NoError(t, err)
	c := &failoverCluster{dir: dir, procs: map[*exec.Cmd]chan struct{}{}}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	stop := make(chan struct{})
	go func() {
		select {
		case s := <-sig:
			// A timeout signals the whole group: go test is gone too, and
			// a write to its pipe would kill this process (SIGPIPE) before
			// it cleans up.
			signal.Ignore(syscall.SIGPIPE)
			fmt.Fprintf(os.Stderr, "failover: %v: stopping the replicas and the cluster and removing %s\n", s, dir)
			// The replicas' own cleanups do not run after os.Exit; they
			// are still running (and unreaped) here.
			c.mu.Lock()
			for _, pid := range c.others {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			c.mu.Unlock()
			c.teardown()
			os.Exit(1)
		case <-stop:
		}
	}()
	t.Cleanup(func() {
		signal.Stop(sig)
		close(stop)
		if t.Failed() {
			c.logTails(t)
		}
		c.teardown()
	})
	u, err := user.Lookup("postgres")
	require.NoError(t, err)
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	c.uid, c.gid = uint32(uid), uint32(gid)
	c.bin, err = exec.LookPath("pg_autoctl")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o700))
	require.NoError(t, os.Chown(dir, uid, gid))
	for _, sub := range []string{"config", "data", "run"} {
		require.NoError(t, os.Mkdir(filepath.Join(dir, sub), 0o700))
		require.NoError(t, os.Chown(filepath.Join(dir, sub), uid, gid))
	}

	c.monitor = failoverNode{name: "monitor", port: freePort(t), pgdir: filepath.Join(dir, "monitor")}
	c.startCmd(t, &c.monitor, "create", "monitor", "--pgdata", c.monitor.pgdir, "--pgport", strconv.Itoa(c.monitor.port),
		"--hostname", "127.0.0.1", "--auth", "trust", "--no-ssl", "--run")
	c.waitSQL(t, c.monitor.port, "pg_auto_failover", time.Minute)
	// Failures noticed in seconds, not the defaults' tens of seconds.
	// A health check that times out too soon on a busy machine marks
	// the standby unhealthy too, and no failover happens then.
	c.monitorSQL(t, `ALTER SYSTEM SET pgautofailover.health_check_period = 2000`,
		`ALTER SYSTEM SET pgautofailover.health_check_timeout = 3000`,
		`ALTER SYSTEM SET pgautofailover.health_check_max_retries = 2`,
		`ALTER SYSTEM SET pgautofailover.health_check_retry_delay = 1000`,
		`ALTER SYSTEM SET pgautofailover.node_considered_unhealthy_timeout = 5000`,
		// A new primary takes writes once the old one is known to have
		// stopped, or after this: it must exceed the nodes'
		// network_partition_timeout (below), after which a primary cut
		// off from the monitor and its standby demotes itself.
		`ALTER SYSTEM SET pgautofailover.primary_demote_timeout = 10000`,
		`SELECT pg_reload_conf()`)
	monitorURL := fmt.Sprintf("postgres://autoctl_node@127.0.0.1:%d/pg_auto_failover?sslmode=disable", c.monitor.port)
	for i := range c.nodes {
		n := &c.nodes[i]
		*n = failoverNode{name: fmt.Sprintf("node%d", i+1), port: freePort(t), pgdir: filepath.Join(dir, fmt.Sprintf("node%d", i+1))}
		c.startCmd(t, n, "create", "postgres", "--pgdata", n.pgdir, "--pgport", strconv.Itoa(n.port), "--hostname", "127.0.0.1",
			"--name", n.name, "--dbname", "rxgate", "--monitor", monitorURL, "--auth", "trust", "--no-ssl", "--run")
		if i == 0 {
			c.waitSQL(t, n.port, "rxgate", 2*time.Minute)
		}
	}
	c.waitHealthy(t, 3*time.Minute)
	for i := range c.nodes {
		n := &c.nodes[i]
		out, err := c.autoctl("config", "set", "--pgdata", n.pgdir, "timeout.network_partition_timeout", "5").CombinedOutput()
		require.NoError(t, err, "pg_autoctl config set: %s", out)
		require.NoError(t, syscall.Kill(n.cmd.Process.Pid, syscall.SIGHUP), "pg_autoctl reloads its configuration")
	}
	return c
}

// autoctl is a pg_autoctl command as the postgres user, with its
// configuration and state under the cluster's directory.
func (c *failoverCluster) autoctl(args ...string) *exec.Cmd {
	cmd := exec.Command(c.bin, args...)
	cmd.Env = []string{
		"PATH=" + failoverPGBin + ":/usr/bin:/bin", "HOME=" + c.dir,
		"XDG_CONFIG_HOME=" + filepath.Join(c.dir, "config"), "XDG_DATA_HOME=" + filepath.Join(c.dir, "data"),
		"XDG_RUNTIME_DIR=" + filepath.Join(c.dir, "run"), "LANG=C.UTF-8",
	}
	cmd.Dir = c.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: &syscall.Credential{Uid: c.uid, Gid: c.gid}}
	return cmd
}

// startCmd starts `pg_autoctl args` for n, logging to a file, and keeps
// it for teardown.
func (c *failoverCluster) startCmd(t *testing.T, n *failoverNode, args ...string) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	require.False(t, c.down)
	log, err := os.OpenFile(filepath.Join(c.dir, n.name+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	require.NoError(t, err)
	cmd := c.autoctl(args...)
	cmd.Stdout, cmd.Stderr = log, log
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	c.procs[cmd] = done
	go func() { _ = cmd.Wait(); log.Close(); close(done) }()
	n.cmd, n.log = cmd, log
}

// start runs node i again after a kill: it rejoins as the standby.
func (c *failoverCluster) start(t *testing.T, i int) {
	c.startCmd(t, &c.nodes[i], "run", "--pgdata", c.nodes[i].pgdir)
}

// kill ends node i as a dead host would: SIGKILL to its pg_autoctl's
// process group and to its postmaster, which are gone when it returns.
func (c *failoverCluster) kill(t *testing.T, i int) {
	t.Helper()
	n := &c.nodes[i]
	postmaster := postmasterPID(n.pgdir)
	require.NotZero(t, postmaster, "node %d's postmaster.pid", i+1)
	_ = syscall.Kill(postmaster, syscall.SIGKILL)
	c.mu.Lock()
	done := c.procs[n.cmd]
	c.mu.Unlock()
	_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
	<-done
	c.mu.Lock()
	delete(c.procs, n.cmd)
	c.mu.Unlock()
	for syscall.Kill(postmaster, 0) == nil {
		time.Sleep(10 * time.Millisecond)
	}
}

// switchover runs a planned switch and waits for it.
func (c *failoverCluster) switchover(t *testing.T) {
	t.Helper()
	out, err := c.autoctl("perform", "switchover", "--pgdata", c.monitor.pgdir, "--wait", "120").CombinedOutput()
	require.NoError(t, err, "pg_autoctl perform switchover: %s", out)
}

// postmasterPID reads the first line of pgdir's postmaster.pid; 0 when
// there is none.
func postmasterPID(pgdir string) int {
	b, err := os.ReadFile(filepath.Join(pgdir, "postmaster.pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	return pid
}

// teardown stops every pg_autoctl it started, by its process group (with
// its PostgreSQL), SIGTERM first, and removes the directory.
func (c *failoverCluster) teardown() {
	c.mu.Lock()
	if c.down {
		c.mu.Unlock()
		return
	}
	c.down = true
	procs := c.procs
	c.mu.Unlock()
	for cmd := range procs {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	}
	deadline := time.After(failoverStop)
	for cmd, done := range procs {
		select {
		case <-done:
		case <-deadline:
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}
	// A postmaster left behind (it runs in its pg_autoctl's group, but a
	// stop cut short may leave it): by the pid its data directory names.
	for _, n := range append([]failoverNode{c.monitor}, c.nodes[:]...) {
		if pid := postmasterPID(n.pgdir); pid > 0 && syscall.Kill(pid, 0) == nil {
			if cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && strings.Contains(string(cmdline), n.pgdir) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	// A process that was still writing there may have raced the first
	// removal.
	for range 20 {
		if os.RemoveAll(c.dir) == nil {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// waitSQL waits until db on port answers.
func (c *failoverCluster) waitSQL(t *testing.T, port int, db string, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", port, db))
		if err == nil {
			conn.Close(ctx)
			cancel()
			return
		}
		cancel()
		require.True(t, time.Now().Before(deadline), "%s on port %d did not answer within %s: %v", db, port, limit, err)
		time.Sleep(500 * time.Millisecond)
	}
}

// monitorSQL runs statements on the monitor.
func (c *failoverCluster) monitorSQL(t *testing.T, stmts ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/pg_auto_failover?sslmode=disable", c.monitor.port))
	require.NoError(t, err)
	defer conn.Close(ctx)
	for _, s := range stmts {
		_, err := conn.Exec(ctx, s)
		require.NoError(t, err, s)
	}
}

// asyncPrimaryEvents returns the monitor's events since at that assigned
// a primary wait_primary, asynchronous replication, because its standby
// was not a healthy secondary: during a switchover, pg_auto_failover's
// bug hapostgres/pg_auto_failover#774 (in 2.0, Debian 12's): the primary
// being drained keeps taking writes, alone, while the standby is
// promoted, and pg_rewind discards them when it rejoins.
func (c *failoverCluster) asyncPrimaryEvents(at time.Time) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := c.monitorConn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT to_char(eventtime, 'HH24:MI:SS.MS') || ' ' || description FROM pgautofailover.event
		WHERE eventtime >= $1 AND description LIKE '%to wait_primary because none of the standby nodes%' ORDER BY eventid`, at)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// monitorConn connects to the monitor's pg_auto_failover database.
func (c *failoverCluster) monitorConn(ctx context.Context) (*pgx.Conn, error) {
	return pgx.Connect(ctx, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/pg_auto_failover?sslmode=disable", c.monitor.port))
}

// states reads the nodes' reported and assigned states from the monitor.
func (c *failoverCluster) states() (map[string][2]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := c.monitorConn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT nodename, reportedstate::text, goalstate::text FROM pgautofailover.node`)
	if err != nil {
		return nil, err
	}
	out := map[string][2]string{}
	for rows.Next() {
		var name, reported, goal string
		if err := rows.Scan(&name, &reported, &goal); err != nil {
			return nil, err
		}
		out[name] = [2]string{reported, goal}
	}
	return out, rows.Err()
}

// waitPromoted waits until node i reports that it takes writes
// (wait_primary or primary).
func (c *failoverCluster) waitPromoted(t *testing.T, i int, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	var last map[string][2]string
	var err error
	for time.Now().Before(deadline) {
		last, err = c.states()
		if st := last[c.nodes[i].name][0]; err == nil && (st == "wait_primary" || st == "primary") {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("node %d was not promoted within %s: %v %v", i+1, limit, last, err)
}

// waitHealthy waits until one node is the primary and the other its
// secondary, settled.
func (c *failoverCluster) waitHealthy(t *testing.T, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	var last map[string][2]string
	var err error
	for n := 0; time.Now().Before(deadline); n++ {
		if n%10 == 0 {
			// A standby's base backup waits for the primary's next
			// checkpoint, spread over minutes unless one is asked for.
			c.checkpoint()
		}
		last, err = c.states()
		if err == nil && len(last) == 2 {
			roles := map[string]int{}
			for _, s := range last {
				if s[0] == s[1] {
					roles[s[0]]++
				}
			}
			if roles["primary"] == 1 && roles["secondary"] == 1 {
				return
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("the cluster did not settle on a primary and a secondary within %s: %v %v", limit, last, err)
}

// logTails logs the end of every pg_autoctl log, for a failed run.
func (c *failoverCluster) logTails(t *testing.T) {
	for _, name := range []string{"monitor", "node1", "node2"} {
		b, _ := os.ReadFile(filepath.Join(c.dir, name+".log"))
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		t.Logf("the end of %s's pg_autoctl log:\n%s", name, strings.Join(lines[max(0, len(lines)-40):], "\n"))
	}
}

// checkpoint asks every node that accepts writes for a checkpoint.
func (c *failoverCluster) checkpoint() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, n := range c.nodes {
		conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/rxgate?sslmode=disable&target_session_attrs=read-write", n.port))
		if err != nil {
			continue
		}
		_, _ = conn.Exec(ctx, "CHECKPOINT")
		conn.Close(ctx)
	}
}

// primary is the index of the node that is the primary now.
func (c *failoverCluster) primary(t *testing.T) int {
	t.Helper()
	s, err := c.states()
	require.NoError(t, err)
	for i, n := range c.nodes {
		if s[n.name][0] == "primary" {
			return i
		}
	}
	t.Fatalf("no primary: %v", s)
	return -1
}
