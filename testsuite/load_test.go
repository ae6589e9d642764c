package testsuite_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	badgerdb "github.com/dgraph-io/badger/v4"

	"github.com/rxgate/rxgate/queue/signature"
	"github.com/rxgate/rxgate/testsuite"
)

// BenchmarkLoad is the write path under load against the real binary
// (`make bench-load`): rxgate serve built from this tree, a data directory
// on disk, the default configuration but for loopback listeners and
// webhooks allowed to a loopback receiver, which this benchmark runs: it
// verifies every signature, notes when each event arrived and counts
// duplicates. Every request goes to loopback; every phase is bounded in
// count and time. It runs loadRounds rounds (RXGATE_TEST_LOAD_ROUNDS, default
// 3) and prints each round's figures and their medians. The server runs
// with the durability RXGATE_TEST_DURABILITY names (journal, the
// default, or syncwrites: storage.badger.durability):
//
//   - a burst of 5,000 prescriptions created at concurrency 8 through the
//     operator API, one endpoint: deliveries/s from the first create to the
//     last receipt, and the drain after the last commit;
//   - right after it, 500 creates/s paced for 10 s: commit-to-receipt
//     p50/p90/p99/max (commit: the create's answer arrived);
//   - a burst of 200, then 300 creates/s for 10 s: the same latencies;
//   - durable creates/s at concurrency 8 and 64 (each a prescription, its
//     event and its job, synced before the answer);
//   - raw synced Badger writes/s (one small key per transaction) at the
//     same concurrencies on the same disk, the ceiling, with the ratios.
//
// Nothing here asserts a speed: it is a measurement, not a test.
func BenchmarkLoad(b *testing.B) {
	rounds := 3
	if v, err := strconv.Atoi(os.Getenv("RXGATE_TEST_LOAD_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	bin := rxgateBinary(b)
	_, mode := durabilityYAML(b, envDurability)
	fmt.Printf("storage.badger.durability: %s\n", mode)
	var all []loadResult
	for round := 1; round <= rounds; round++ {
		r := runLoadRound(b, bin)
		all = append(all, r)
		printLoad(os.Stdout, fmt.Sprintf("round %d of %d", round, rounds), []loadResult{r})
	}
	med := medianLoad(all)
	printLoad(os.Stdout, fmt.Sprintf("median of %d rounds", rounds), []loadResult{med})
	b.ReportMetric(med.burstRate, "deliveries/s")
	b.ReportMetric(med.paced500.p99, "p99-ms@500/s")
	b.ReportMetric(med.paced300.p99, "p99-ms@300/s")
	b.ReportMetric(med.creates8, "creates/s@8")
	b.ReportMetric(med.creates64, "creates/s@64")
}

// latencies are commit-to-receipt figures in milliseconds.
type latencies struct{ p50, p90, p99, max float64 }

type loadResult struct {
	burstRate            float64 // deliveries/s over the 5,000 burst
	burstDrain           float64 // seconds from the last commit to the last receipt
	paced500, paced300   latencies
	creates8, creates64  float64
	cpu8, cpu64          float64 // cores the server used meanwhile
	own8, own64          float64 // cores this process (clients and receiver) used
	raw8, raw64          float64
	duplicates, rejected int64
}

const (
	loadBurst      = 5_000
	loadPaceFor    = 10 * time.Second
	loadCreates8   = 3_000
	loadCreates64  = 6_000
	loadRawWrites  = 4_000
	loadPhaseLimit = 3 * time.Minute // a phase that takes longer fails the benchmark
)

// loadReceiver verifies and times every delivery.
type loadReceiver struct {
	secret    atomic.Value // string
	mu        sync.Mutex
	arrived   map[string]time.Time // scid -> first receipt
	waiting   map[string]chan struct{}
	seen      map[string]int // event id -> deliveries
	dups      atomic.Int64
	rejected  atomic.Int64
	delivered atomic.Int64
}

func newLoadReceiver() *loadReceiver {
	return &loadReceiver{arrived: map[string]time.Time{}, waiting: map[string]chan struct{}{}, seen: map[string]int{}}
}

func (l *loadReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	secret, _ := l.secret.Load().(string)
	if err != nil || signature.Verify([]string{secret}, r.Header.Get(signature.HeaderName), body, at) != nil {
		l.rejected.Add(1)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	var p struct {
		EventID string `json:"event_id"`
		Data    struct {
			SCID string `json:"scid"`
		} `json:"data"`
	}
	_ = json.Unmarshal(body, &p)
	l.mu.Lock()
	if l.seen[p.EventID]++; l.seen[p.EventID] > 1 {
		l.dups.Add(1)
	}
	if _, ok := l.arrived[p.Data.SCID]; !ok {
		l.arrived[p.Data.SCID] = at
		if ch, ok := l.waiting[p.Data.SCID]; ok {
			close(ch)
			delete(l.waiting, p.Data.SCID)
		}
		l.delivered.Add(1)
	}
	l.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// receipt returns when scid's event first arrived.
func (l *loadReceiver) receipt(scid string) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	at, ok := l.arrived[scid]
	return at, ok
}

// waitAll waits until every scid has arrived, up to loadPhaseLimit.
func (l *loadReceiver) waitAll(b *testing.B, scids []string) {
	b.Helper()
	deadline := time.After(loadPhaseLimit)
	for _, s := range scids {
		l.mu.Lock()
		if _, ok := l.arrived[s]; ok {
			l.mu.Unlock()
			continue
		}
		ch, ok := l.waiting[s]
		if !ok {
			ch = make(chan struct{})
			l.waiting[s] = ch
		}
		l.mu.Unlock()
		select {
		case <-ch:
		case <-deadline:
			b.Fatalf("events still missing after %s (%d delivered)", loadPhaseLimit, l.delivered.Load())
		}
	}
}

// creator creates prescriptions through the operator API.
type creator struct {
	client *http.Client
	url    string // the patient's prescriptions
	key    string
	seq    atomic.Int64
	prefix string
}

// create makes one prescription and returns its scid and when its answer
// arrived (the commit).
func (c *creator) create() (string, time.Time, error) {
	scid := fmt.Sprintf("%s%016d", c.prefix, c.seq.Add(1))
	req, err := http.NewRequest(http.MethodPost, c.url, strings.NewReader(`{"item_name":"Amoxicillin 500 mg capsule","quantity":"20","scid":"`+scid+`"}`))
	if err != nil {
		return "", time.Time{}, err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.client.Do(req)
	if err != nil {
		return "", time.Time{}, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	at := time.Now()
	if resp.StatusCode != http.StatusCreated {
		return "", at, fmt.Errorf("create: HTTP %d", resp.StatusCode)
	}
	return scid, at, nil
}

// burst creates n prescriptions at concurrency c and returns their scids
// and commit times, and how long it took.
func (c *creator) burst(b *testing.B, n, conc int) ([]string, []time.Time, time.Duration) {
	b.Helper()
	scids, commits := make([]string, n), make([]time.Time, n)
	var next atomic.Int64
	var failed atomic.Value
	start := time.Now()
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || time.Since(start) > loadPhaseLimit {
					return
				}
				scid, at, err := c.create()
				if err != nil {
					failed.Store(err)
					return
				}
				scids[i], commits[i] = scid, at
			}
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	return scids, commits, time.Since(start)
}

// paced creates rate prescriptions per second for d and returns their
// scids and commit times.
func (c *creator) paced(b *testing.B, rate int, d time.Duration) ([]string, []time.Time) {
	b.Helper()
	n := int(float64(rate) * d.Seconds())
	scids, commits := make([]string, n), make([]time.Time, n)
	var failed atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		if wait := time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(rate))); wait > 0 {
			time.Sleep(wait)
		}
		wg.Go(func() {
			scid, at, err := c.create()
			if err != nil {
				failed.Store(err)
				return
			}
			scids[i], commits[i] = scid, at
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	return scids, commits
}

// latenciesOf waits for every event and returns commit-to-receipt figures.
func latenciesOf(b *testing.B, rcv *loadReceiver, scids []string, commits []time.Time) latencies {
	b.Helper()
	rcv.waitAll(b, scids)
	ms := make([]float64, len(scids))
	for i, s := range scids {
		at, _ := rcv.receipt(s)
		ms[i] = max(float64(at.Sub(commits[i]).Microseconds())/1000, 0)
	}
	sort.Float64s(ms)
	q := func(p float64) float64 { return ms[min(len(ms)-1, int(p*float64(len(ms))))] }
	return latencies{p50: q(0.50), p90: q(0.90), p99: q(0.99), max: ms[len(ms)-1]}
}

func runLoadRound(b *testing.B, bin string) loadResult {
	b.Helper()
	var res loadResult
	cfgPath, key := serveConfig(b, "")
	proc := startBinary(b, bin, cfgPath)
	defer func() {
		_ = proc.cmd.Process.Signal(syscall.SIGTERM)
		_ = proc.cmd.Wait()
	}()
	b.Setenv(testsuite.EnvBaseURL, proc.baseURL)
	b.Setenv(testsuite.EnvAdminURL, proc.admURL)
	b.Setenv(testsuite.EnvAdminKey, key)
	env := testsuite.Start(b)
	tn := env.NewTenant(b)
	validate(b, env, tn)
	rcv := newLoadReceiver()
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	_, secret := registerEndpoint(b, env, tn.PartnerID, srv.URL+"/")
	rcv.secret.Store(secret)

	transport := &http.Transport{MaxIdleConnsPerHost: 128, DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext}
	defer transport.CloseIdleConnections()
	c := &creator{client: &http.Client{Transport: transport, Timeout: 30 * time.Second},
		url: env.AdminPath(tn.PatientPath() + "/prescriptions"), key: key, prefix: "LD"}

	// The 5,000 burst, then 500/s right after it.
	scids, commits, _ := c.burst(b, loadBurst, 8)
	lastCommit := slices.MaxFunc(commits, time.Time.Compare)
	pacedScids, pacedCommits := c.paced(b, 500, loadPaceFor)
	rcv.waitAll(b, scids)
	var lastReceipt time.Time
	for _, s := range scids {
		if at, _ := rcv.receipt(s); at.After(lastReceipt) {
			lastReceipt = at
		}
	}
	first := slices.MinFunc(commits, time.Time.Compare)
	res.burstRate = float64(loadBurst) / lastReceipt.Sub(first).Seconds()
	// A receipt may come before its create's answer is read: 0, not less.
	res.burstDrain = max(0, lastReceipt.Sub(lastCommit).Seconds())
	res.paced500 = latenciesOf(b, rcv, pacedScids, pacedCommits)

	// A burst of 200, then 300/s.
	scids, _, _ = c.burst(b, 200, 8)
	pacedScids, pacedCommits = c.paced(b, 300, loadPaceFor)
	rcv.waitAll(b, scids)
	res.paced300 = latenciesOf(b, rcv, pacedScids, pacedCommits)

	// Durable creates at concurrency 8 and 64.
	cpu, own := processCPU(proc.cmd.Process.Pid), processCPU(os.Getpid())
	_, _, took := c.burst(b, loadCreates8, 8)
	res.creates8 = float64(loadCreates8) / took.Seconds()
	res.cpu8 = (processCPU(proc.cmd.Process.Pid) - cpu).Seconds() / took.Seconds()
	res.own8 = (processCPU(os.Getpid()) - own).Seconds() / took.Seconds()
	cpu, own = processCPU(proc.cmd.Process.Pid), processCPU(os.Getpid())
	scids, _, took = c.burst(b, loadCreates64, 64)
	res.creates64 = float64(loadCreates64) / took.Seconds()
	res.cpu64 = (processCPU(proc.cmd.Process.Pid) - cpu).Seconds() / took.Seconds()
	res.own64 = (processCPU(os.Getpid()) - own).Seconds() / took.Seconds()
	rcv.waitAll(b, scids)
	res.duplicates, res.rejected = rcv.dups.Load(), rcv.rejected.Load()

	// Stop the server, then the ceiling on the same disk.
	_ = proc.cmd.Process.Signal(syscall.SIGTERM)
	_ = proc.cmd.Wait()
	res.raw8 = rawSyncedWrites(b, 8)
	res.raw64 = rawSyncedWrites(b, 64)
	return res
}

// rawSyncedWrites is the write rate of conc goroutines each committing one
// small key per synced Badger transaction: the ceiling a durable create
// shares the disk with.
func rawSyncedWrites(b *testing.B, conc int) float64 {
	b.Helper()
	db, err := badgerdb.Open(badgerdb.DefaultOptions(b.TempDir()).WithSyncWrites(true).WithLogger(nil))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	value := bytes.Repeat([]byte("x"), 200)
	var next atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), loadPhaseLimit)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := next.Add(1)
				if i > loadRawWrites {
					return
				}
				key := binary.BigEndian.AppendUint64([]byte("raw/"), uint64(i))
				if err := db.Update(func(txn *badgerdb.Txn) error { return txn.Set(key, value) }); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return float64(loadRawWrites) / time.Since(start).Seconds()
}

func medianLoad(rs []loadResult) loadResult {
	med := func(f func(loadResult) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		sort.Float64s(v)
		return v[len(v)/2]
	}
	lat := func(f func(loadResult) latencies) latencies {
		return latencies{
			p50: med(func(r loadResult) float64 { return f(r).p50 }),
			p90: med(func(r loadResult) float64 { return f(r).p90 }),
			p99: med(func(r loadResult) float64 { return f(r).p99 }),
			max: med(func(r loadResult) float64 { return f(r).max }),
		}
	}
	out := loadResult{
		burstRate:  med(func(r loadResult) float64 { return r.burstRate }),
		burstDrain: med(func(r loadResult) float64 { return r.burstDrain }),
		paced500:   lat(func(r loadResult) latencies { return r.paced500 }),
		paced300:   lat(func(r loadResult) latencies { return r.paced300 }),
		creates8:   med(func(r loadResult) float64 { return r.creates8 }),
		creates64:  med(func(r loadResult) float64 { return r.creates64 }),
		cpu8:       med(func(r loadResult) float64 { return r.cpu8 }),
		cpu64:      med(func(r loadResult) float64 { return r.cpu64 }),
		own8:       med(func(r loadResult) float64 { return r.own8 }),
		own64:      med(func(r loadResult) float64 { return r.own64 }),
		raw8:       med(func(r loadResult) float64 { return r.raw8 }),
		raw64:      med(func(r loadResult) float64 { return r.raw64 }),
	}
	for _, r := range rs {
		out.duplicates += r.duplicates
		out.rejected += r.rejected
	}
	return out
}

func printLoad(w io.Writer, title string, rs []loadResult) {
	r := rs[0]
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "\n== %s ==\n", title)
	fmt.Fprintf(tw, "deliveries/s, burst of %d at concurrency 8\t%.0f\t(drain %.1f s after the last commit)\n", loadBurst, r.burstRate, r.burstDrain)
	pr := func(name string, l latencies) {
		fmt.Fprintf(tw, "%s, commit to receipt\tp50 %.1f ms\tp90 %.1f ms\tp99 %.1f ms\tmax %.1f ms\n", name, l.p50, l.p90, l.p99, l.max)
	}
	pr("500/s for 10 s after the burst", r.paced500)
	pr("300/s for 10 s after a burst of 200", r.paced300)
	fmt.Fprintf(tw, "durable creates/s, concurrency 8\t%.0f\traw synced Badger writes/s %.0f\tratio %.2f\tserver CPU %.2f cores, load generator %.2f\n", r.creates8, r.raw8, r.creates8/r.raw8, r.cpu8, r.own8)
	fmt.Fprintf(tw, "durable creates/s, concurrency 64\t%.0f\traw synced Badger writes/s %.0f\tratio %.2f\tserver CPU %.2f cores, load generator %.2f\n", r.creates64, r.raw64, r.creates64/r.raw64, r.cpu64, r.own64)
	fmt.Fprintf(tw, "duplicate deliveries\t%d\trejected signatures\t%d\n", r.duplicates, r.rejected)
	_ = tw.Flush()
}

// processCPU is the CPU time the process with pid has used, from
// /proc/{pid}/stat (user and system ticks); zero where there is no /proc.
func processCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command's closing parenthesis; utime and stime
	// are the 12th and 13th of them.
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(fields) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	const ticks = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / ticks
}
