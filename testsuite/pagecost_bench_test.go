package testsuite_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rxgate/rxgate/testsuite"
)

// BenchmarkPageCost is the prescription page of make bench-backends on
// PostgreSQL, alone, with the CPU each page costs where it is spent: the
// replicas, the PostgreSQL backends serving them and the load generator
// (this process, the round-robin proxy included). PAGECOST_REPLICAS (1),
// PAGECOST_SECONDS (10), PAGECOST_DIRECT=1 sends the requests to the
// replicas in turn without the proxy. The backends are found by the
// application_name of RXGATE_TEST_POSTGRES_URL, which the run sets to one
// of its own.
func BenchmarkPageCost(b *testing.B) {
	base := testsuite.PostgresURL(b)
	app := fmt.Sprintf("pagecost%d", os.Getpid())
	u, err := url.Parse(base)
	if err != nil {
		b.Fatal(err)
	}
	q := u.Query()
	q.Set("application_name", app)
	u.RawQuery = q.Encode()
	b.Setenv(testsuite.EnvPostgresURL, u.String())
	replicas := envInt(b, "PAGECOST_REPLICAS", 1)
	seconds := envInt(b, "PAGECOST_SECONDS", 10)
	direct := os.Getenv("PAGECOST_DIRECT") == "1"

	var rs *replicaSet
	var env *testsuite.Env
	var key string
	if os.Getenv("PAGECOST_BADGER") == "1" {
		cfgPath, k := serveConfig(b, "")
		proc := startBinary(b, rxgateBinary(b), cfgPath)
		b.Cleanup(func() { _ = proc.cmd.Process.Signal(syscall.SIGTERM); _ = proc.cmd.Wait() })
		b.Setenv(testsuite.EnvBaseURL, proc.baseURL)
		b.Setenv(testsuite.EnvAdminURL, proc.admURL)
		b.Setenv(testsuite.EnvAdminKey, k)
		env, key = testsuite.Start(b), k
		rs = &replicaSet{procs: []*binaryProcess{proc}}
		replicas = 0
	} else {
		rs = startReplicas(b, replicas, "")
		env, key = rs.env(b), rs.key
	}
	tn := env.NewTenant(b)
	validate(b, env, tn)
	transport := &http.Transport{MaxIdleConnsPerHost: 128, DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport, Timeout: 30 * time.Second}
	c := &creator{client: client, url: env.AdminPath(tn.PatientPath() + "/prescriptions"), key: key, prefix: "PC"}
	c.burst(b, 50, 8)
	if rs.dbURL != "" {
		vacuumAnalyze(b, rs.dbURL)
	}

	token := tn.Token(b, testsuite.RolePrescriber)
	path := tn.PatientPath()[len("/admin"):] + "/prescriptions?limit=50"
	urls := []string{env.BaseURL + path}
	if direct {
		urls = nil
		for _, p := range rs.procs {
			urls = append(urls, "http://"+p.partnerAddr+"/external"+path)
		}
	}
	run := func(d time.Duration) int64 {
		var n atomic.Int64
		var failed atomic.Value
		start := time.Now()
		var wg sync.WaitGroup
		for i := range backendConc {
			wg.Go(func() {
				for j := i; time.Since(start) < d; j++ {
					if err := getPage(client, urls[j%len(urls)], token, tn.OrgSecret); err != nil {
						failed.Store(err)
						return
					}
					n.Add(1)
				}
			})
		}
		wg.Wait()
		if err, _ := failed.Load().(error); err != nil {
			b.Fatal(err)
		}
		return n.Load()
	}
	run(time.Second) // warm: connections, caches, plans

	backends := func() []int {
		conn, err := pgx.Connect(context.Background(), base)
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close(context.Background())
		rows, _ := conn.Query(context.Background(), `SELECT pid FROM pg_stat_activity WHERE application_name = $1`, app)
		pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
		if err != nil {
			b.Fatal(err)
		}
		out := make([]int, len(pids))
		for i, p := range pids {
			out[i] = int(p)
		}
		return out
	}
	var bins []int
	for _, p := range rs.procs {
		bins = append(bins, p.cmd.Process.Pid)
	}
	pg := backends()
	self := []int{os.Getpid()}
	// Idle: what the processes spend without a request, per second.
	i0 := [2]float64{cpuSeconds(bins), cpuSeconds(pg)}
	time.Sleep(3 * time.Second)
	i1 := [2]float64{cpuSeconds(bins), cpuSeconds(pg)}
	t0 := [3]float64{cpuSeconds(bins), cpuSeconds(pg), cpuSeconds(self)}
	var perf []*exec.Cmd
	if dir := os.Getenv("PAGECOST_PERF"); dir != "" {
		for name, pids := range map[string][]int{"replicas": bins, "postgres": pg} {
			var s []string
			for _, p := range pids {
				s = append(s, strconv.Itoa(p))
			}
			cmd := exec.Command("perf", "record", "-g", "-o", filepath.Join(dir, name+".data"), "-p", strings.Join(s, ","))
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			perf = append(perf, cmd)
		}
	}
	start := time.Now()
	n := run(time.Duration(seconds) * time.Second)
	took := time.Since(start)
	for _, cmd := range perf {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	}
	t1 := [3]float64{cpuSeconds(bins), cpuSeconds(pg), cpuSeconds(self)}
	load, _ := os.ReadFile("/proc/loadavg")
	us := func(i int) float64 { return (t1[i] - t0[i]) * 1e6 / float64(n) }
	fmt.Printf("pagecost replicas=%d direct=%v: %.0f pages/s; CPU µs/page: replicas %.0f, postgres %.0f (%d backends), load generator %.0f; idle CPU ms/s: replicas %.0f, postgres %.0f; load %s",
		replicas, direct, float64(n)/took.Seconds(), us(0), us(1), len(pg), us(2), (i1[0]-i0[0])*1000/3, (i1[1]-i0[1])*1000/3, load)
}

// cpuSeconds is the user and system CPU time of the processes so far.
func cpuSeconds(pids []int) float64 {
	var ticks float64
	for _, pid := range pids {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			continue
		}
		// The fields after the command name, which is in parentheses.
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
		ut, _ := strconv.ParseFloat(f[11], 64)
		st, _ := strconv.ParseFloat(f[12], 64)
		ticks += ut + st
	}
	return ticks / 100 // USER_HZ
}
