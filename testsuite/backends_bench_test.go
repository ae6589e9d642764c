package testsuite_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rxgate/rxgate/testsuite"
)

// BenchmarkBackends measures the product on both backends side by side in
// one run (`make bench-backends`): the real binary on Badger, on
// PostgreSQL with one replica, and on PostgreSQL with three, each behind
// the same round-robin proxy (one target for one process), each with the default configuration but for loopback
// listeners and a loopback webhook receiver this benchmark runs. For each:
//
//   - the authenticated prescription page (50 items) read at concurrency
//     16, pages/s;
//   - durable creates/s at concurrency 16 (a prescription, its event and
//     its job, committed before the answer), with deliveries running
//     beside them as they do in production;
//   - deliveries/s for that burst: from the first create to the last
//     receipt.
//
// On PostgreSQL it runs VACUUM ANALYZE on the schema's tables after
// seeding and then every RXGATE_BENCH_VACUUM_EVERY (default 30s) while
// the phases run, as autovacuum would on a server that has it on (it is
// off on the machines these figures come from, and without statistics
// the planner guesses at every table's size).
//
// It needs RXGATE_TEST_POSTGRES_URL. Every request goes to loopback and
// every phase is bounded; nothing asserts a speed.
func BenchmarkBackends(b *testing.B) {
	testsuite.PostgresURL(b)
	bin := rxgateBinary(b)
	type result struct {
		name                      string
		pages, creates, delivered float64
	}
	var results []result
	for _, setup := range []struct {
		name     string
		replicas int // 0: badger
	}{{"badger, 1 process", 0}, {"postgres, 1 replica", 1}, {"postgres, 3 replicas", 3}} {
		var env *testsuite.Env
		var key, dbURL string
		if setup.replicas == 0 {
			cfgPath, k := serveConfig(b, "")
			proc := startBinary(b, bin, cfgPath)
			b.Cleanup(func() { _ = proc.cmd.Process.Signal(syscall.SIGTERM); _ = proc.cmd.Wait() })
			// Behind the same balancer as the replicas, with one target:
			// every setup is measured on the same path, and the proxy's
			// CPU (on the same two cores) is in every figure alike.
			partner, admin := oneTarget(b, "http://"+proc.partnerAddr), oneTarget(b, "http://"+proc.adminAddr)
			b.Setenv(testsuite.EnvBaseURL, partner.URL+strings.TrimPrefix(proc.baseURL, "http://"+proc.partnerAddr))
			b.Setenv(testsuite.EnvAdminURL, admin.URL+strings.TrimPrefix(proc.admURL, "http://"+proc.adminAddr))
			b.Setenv(testsuite.EnvAdminKey, k)
			env, key = testsuite.Start(b), k
		} else {
			rs := startReplicas(b, setup.replicas, "")
			env, key, dbURL = rs.env(b), rs.key, rs.dbURL
		}
		r := result{name: setup.name}
		r.pages, r.creates, r.delivered = measureBackend(b, env, key, dbURL)
		results = append(results, r)
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "setup\tprescription pages/s\tdurable creates/s (c16)\tdeliveries/s\t")
	for _, r := range results {
		fmt.Fprintf(w, "%s\t%.0f\t%.0f\t%.0f\t\n", r.name, r.pages, r.creates, r.delivered)
	}
	_ = w.Flush()
}

// oneTarget is roundRobin with target alone.
func oneTarget(b *testing.B, target string) *httptest.Server {
	u, err := url.Parse(target)
	if err != nil {
		b.Fatal(err)
	}
	var targets atomic.Pointer[[]*url.URL]
	targets.Store(&[]*url.URL{u})
	return roundRobin(b, &targets)
}

const (
	backendPages   = 4_000
	backendCreates = 3_000
	backendConc    = 16
)

// measureBackend runs the three phases against env; dbURL, for
// PostgreSQL, is the schema's, which it vacuums and analyzes.
func measureBackend(b *testing.B, env *testsuite.Env, key, dbURL string) (pages, creates, delivered float64) {
	b.Helper()
	tn := env.NewTenant(b)
	validate(b, env, tn)
	transport := &http.Transport{MaxIdleConnsPerHost: 128, DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport, Timeout: 30 * time.Second}
	c := &creator{client: client, url: env.AdminPath(tn.PatientPath() + "/prescriptions"), key: key, prefix: "BK"}
	c.burst(b, 50, 8) // the page read below: 50 items, before any endpoint
	if dbURL != "" {
		vacuumAnalyze(b, dbURL)
		defer startVacuums(b, dbURL, benchVacuumEvery(b))()
	}

	// The prescription page.
	token := tn.Token(b, testsuite.RolePrescriber)
	pageURL := env.BaseURL + tn.PatientPath()[len("/admin"):] + "/prescriptions?limit=50"
	var next atomic.Int64
	var failed atomic.Value
	start := time.Now()
	var wg sync.WaitGroup
	for range backendConc {
		wg.Go(func() {
			for next.Add(1) <= backendPages && time.Since(start) < loadPhaseLimit {
				if err := getPage(client, pageURL, token, tn.OrgSecret); err != nil {
					failed.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	pages = backendPages / time.Since(start).Seconds()

	// Durable creates with deliveries beside them, and the deliveries.
	rcv := newLoadReceiver()
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	_, secret := registerEndpoint(b, env, tn.PartnerID, srv.URL+"/")
	rcv.secret.Store(secret)
	scids, commits, took := c.burst(b, backendCreates, backendConc)
	creates = backendCreates / took.Seconds()
	rcv.waitAll(b, scids)
	var last time.Time
	for _, s := range scids {
		if at, _ := rcv.receipt(s); at.After(last) {
			last = at
		}
	}
	delivered = backendCreates / last.Sub(slices.MinFunc(commits, time.Time.Compare)).Seconds()
	if n := rcv.rejected.Load(); n > 0 {
		b.Fatalf("%d deliveries failed verification", n)
	}
	return pages, creates, delivered
}

// benchVacuumEvery is RXGATE_BENCH_VACUUM_EVERY, or 30s.
func benchVacuumEvery(b *testing.B) time.Duration {
	b.Helper()
	v := os.Getenv("RXGATE_BENCH_VACUUM_EVERY")
	if v == "" {
		return 30 * time.Second
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		b.Fatalf("RXGATE_BENCH_VACUUM_EVERY: want a positive duration, got %q", v)
	}
	return d
}

// vacuumAnalyze runs VACUUM (ANALYZE) on every table of the schema
// dbURL's search_path names, and no other: other tests share the
// database.
func vacuumAnalyze(tb testing.TB, dbURL string) {
	tb.Helper()
	if err := vacuumSchema(tb.Context(), dbURL); err != nil {
		tb.Fatalf("vacuum analyze: %v", err)
	}
}

func vacuumSchema(ctx context.Context, dbURL string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	var tables []string
	if err := conn.QueryRow(ctx, `SELECT coalesce(array_agg(format('%I.%I', schemaname, tablename) ORDER BY tablename), '{}')
		FROM pg_tables WHERE schemaname = current_schema()`).Scan(&tables); err != nil {
		return err
	}
	if len(tables) == 0 {
		return errors.New("no tables in the schema")
	}
	_, err = conn.Exec(ctx, "VACUUM (ANALYZE) "+strings.Join(tables, ", "))
	return err
}

// startVacuums runs vacuumSchema every interval until the returned stop,
// which waits for one in progress; a failure is logged, not fatal (a
// vacuum cancelled by the phase's end).
func startVacuums(tb testing.TB, dbURL string, every time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if err := vacuumSchema(ctx, dbURL); err != nil && ctx.Err() == nil {
					tb.Logf("periodic vacuum analyze: %v", err)
				}
			}
		}
	}()
	return func() { cancel(); <-done }
}

// TestBenchVacuumAnalyzesTheSchema: the benchmark's vacuum reaches every
// table of its schema and no other schema's.
func TestBenchVacuumAnalyzesTheSchema(t *testing.T) {
	testsuite.PostgresURL(t)
	t.Parallel()
	mine, other := testsuite.PostgresSchema(t), testsuite.PostgresSchema(t)
	for _, u := range []string{mine, other} {
		conn, err := pgx.Connect(t.Context(), u)
		if err != nil {
			t.Fatal(err)
		}
		_, err = conn.Exec(t.Context(), `CREATE TABLE a (id int); CREATE TABLE b (id int); INSERT INTO a SELECT generate_series(1, 100)`)
		conn.Close(context.Background())
		if err != nil {
			t.Fatal(err)
		}
	}
	vacuumAnalyze(t, mine)
	stats := func(u string) (vacuumed, analyzed int) {
		conn, err := pgx.Connect(t.Context(), u)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		if err := conn.QueryRow(t.Context(), `SELECT count(last_vacuum), count(last_analyze) FROM pg_stat_user_tables
			WHERE schemaname = current_schema()`).Scan(&vacuumed, &analyzed); err != nil {
			t.Fatal(err)
		}
		return vacuumed, analyzed
	}
	if v, a := stats(mine); v != 2 || a != 2 {
		t.Fatalf("the schema's tables: %d vacuumed, %d analyzed of 2", v, a)
	}
	if v, a := stats(other); v != 0 || a != 0 {
		t.Fatalf("another schema's tables: %d vacuumed, %d analyzed, want none", v, a)
	}
}

// getPage reads one partner page with token and the organization's
// secret, and says why when the answer is not a 200.
func getPage(client *http.Client, url, token, orgSecret string) error {
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("x-organization-secret", orgSecret)
	res, err := client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, res.Body)
	_ = res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("page: HTTP %d", res.StatusCode)
	}
	return nil
}
