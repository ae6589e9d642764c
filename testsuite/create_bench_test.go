package testsuite_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rxgate/rxgate/config"
	"github.com/rxgate/rxgate/testsuite"
)

// BenchmarkDurableCreate is the create path in-process, for profiles (go
// test -bench BenchmarkDurableCreate -cpuprofile ...): prescriptions
// created through the operator API over loopback HTTP at concurrency 8 and
// 64, on a disk store (every commit synced), with a webhook endpoint
// registered, so each create writes the prescription, its event and its
// job, and the queue delivers them meanwhile. make bench-load measures the
// same on the built binary.
func BenchmarkDurableCreate(b *testing.B) {
	for _, conc := range []int{8, 64} {
		b.Run(fmt.Sprintf("concurrency=%d", conc), func(b *testing.B) {
			env := testsuite.Start(b, testsuite.WithConfig(func(c *config.Config) {
				c.Storage.InMemory = false
				c.Storage.Dir = filepath.Join(b.TempDir(), "data")
				c.Webhooks.AllowInsecureLoopback = true
			}))
			tn := env.NewTenant(b)
			validate(b, env, tn)
			rcv := newLoadReceiver()
			srv := httptest.NewServer(rcv)
			b.Cleanup(srv.Close)
			_, secret := registerEndpoint(b, env, tn.PartnerID, srv.URL+"/")
			rcv.secret.Store(secret)
			transport := &http.Transport{MaxIdleConnsPerHost: 128}
			b.Cleanup(transport.CloseIdleConnections)
			c := &creator{client: &http.Client{Transport: transport}, url: env.AdminPath(tn.PatientPath() + "/prescriptions"),
				key: env.AdminKey, prefix: "BC"}
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			for range conc {
				wg.Go(func() {
					for next.Add(1) <= int64(b.N) {
						if _, _, err := c.create(); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "creates/s")
		})
	}
}
