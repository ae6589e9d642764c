package postgres_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage"
	"github.com/rxgate/rxgate/storage/postgres"
	"github.com/rxgate/rxgate/testsuite"
	"github.com/rxgate/rxgate/testsuite/storagetest"
)

// BenchmarkCreatePrescription creates prescriptions (each with its event
// and one job) at concurrency 16 on one store and reports, beside the
// time, the CPU each create cost this process and the store's PostgreSQL
// backends (read from /proc, so on a server on this machine only): on a
// machine shared with other work the CPU per create moves far less than
// the rate does.
func BenchmarkCreatePrescription(b *testing.B) {
	url := testsuite.PostgresURL(b)
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	app := "bench" + strconv.FormatInt(time.Now().UnixNano(), 36)
	s := openPostgres(b, postgres.Options{URL: url + sep + "application_name=" + app, MaxConns: 16})
	w := storagetest.NewWorld(b, s)
	w.Endpoint(b, s, "https://a.example/hook")
	ctx := b.Context()
	var n atomic.Int64
	create := func() {
		rx := w.Prescription()
		rx.PrescriptionItem = storage.PrescriptionItem{ItemName: fmt.Sprint("Item ", n.Add(1)), Quantity: "1"}
		require.NoError(b, s.CreatePrescription(ctx, &rx))
	}
	var warm sync.WaitGroup
	for range 16 {
		warm.Go(func() { // open the pool's connections and prepare
			for range 8 {
				create()
			}
		})
	}
	warm.Wait()
	// The pool's backends, by their application name.
	pids := func() []int {
		rows, err := s.Pool().Query(ctx, `SELECT pid FROM pg_stat_activity WHERE application_name = $1`, app)
		require.NoError(b, err)
		var out []int
		for rows.Next() {
			var pid int
			require.NoError(b, rows.Scan(&pid))
			out = append(out, pid)
		}
		require.NoError(b, rows.Err())
		return out
	}
	serverCPU := func() time.Duration {
		var t time.Duration
		for _, pid := range pids() {
			raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			if err != nil {
				continue
			}
			f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
			u, _ := strconv.ParseInt(f[11], 10, 64)
			k, _ := strconv.ParseInt(f[12], 10, 64)
			t += time.Duration(u+k) * 10 * time.Millisecond // USER_HZ 100
		}
		return t
	}
	selfCPU := func() time.Duration {
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	srv0, self0 := serverCPU(), selfCPU()
	b.SetParallelism(8) // 16 goroutines on 2 CPUs
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			create()
		}
	})
	b.StopTimer()
	b.ReportMetric(float64((serverCPU()-srv0).Microseconds())/float64(b.N), "server-µs/op")
	b.ReportMetric(float64((selfCPU()-self0).Microseconds())/float64(b.N), "client-µs/op")
}
