package testsuite_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/rxgate/rxgate/testsuite"
)

// BenchmarkBackends measures the product on both backends side by side in
// one run (`make bench-backends`): the real binary on Badger, on
// PostgreSQL with one replica, and on PostgreSQL with three behind a
// round-robin proxy, each with the default configuration but for loopback
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
		var key string
		if setup.replicas == 0 {
			cfgPath, k := serveConfig(b, "")
			proc := startBinary(b, bin, cfgPath)
			b.Cleanup(func() { _ = proc.cmd.Process.Signal(syscall.SIGTERM); _ = proc.cmd.Wait() })
			b.Setenv(testsuite.EnvBaseURL, proc.baseURL)
			b.Setenv(testsuite.EnvAdminURL, proc.admURL)
			b.Setenv(testsuite.EnvAdminKey, k)
			env, key = testsuite.Start(b), k
		} else {
			rs := startReplicas(b, setup.replicas, "")
			env, key = rs.env(b), rs.key
		}
		r := result{name: setup.name}
		r.pages, r.creates, r.delivered = measureBackend(b, env, key)
		results = append(results, r)
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "setup\tprescription pages/s\tdurable creates/s (c16)\tdeliveries/s\t")
	for _, r := range results {
		fmt.Fprintf(w, "%s\t%.0f\t%.0f\t%.0f\t\n", r.name, r.pages, r.creates, r.delivered)
	}
	_ = w.Flush()
}

const (
	backendPages   = 4_000
	backendCreates = 3_000
	backendConc    = 16
)

// measureBackend runs the three phases against env.
func measureBackend(b *testing.B, env *testsuite.Env, key string) (pages, creates, delivered float64) {
	b.Helper()
	tn := env.NewTenant(b)
	validate(b, env, tn)
	transport := &http.Transport{MaxIdleConnsPerHost: 128, DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport, Timeout: 30 * time.Second}
	c := &creator{client: client, url: env.AdminPath(tn.PatientPath() + "/prescriptions"), key: key, prefix: "BK"}
	c.burst(b, 50, 8) // the page read below: 50 items, before any endpoint

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
				req, _ := http.NewRequest(http.MethodGet, pageURL, nil)
				req.Header.Set("Authorization", "Bearer "+token)
				req.Header.Set("x-organization-secret", tn.OrgSecret)
				res, err := client.Do(req)
				if err != nil {
					failed.Store(err)
					return
				}
				_, _ = io.Copy(io.Discard, res.Body)
				_ = res.Body.Close()
				if res.StatusCode != http.StatusOK {
					failed.Store(fmt.Errorf("page: HTTP %d", res.StatusCode))
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
