package testsuite_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/testsuite"
)

// TestMalformedQuery: every call that reads its query answers a pair that
// is not correctly percent-encoded, or a ";" separator, with a 400
// validation error naming the parameter, instead of running as if the
// parameter were absent.
func TestMalformedQuery(t *testing.T) {
	t.Parallel()
	env := testsuite.Start(t)
	tn := env.NewTenant(t)
	token := tn.Token(t, testsuite.RoleOwner)
	lists := []struct {
		name    string
		path    string
		token   string
		headers map[string]string
	}{
		{name: "users", path: usersPath(tn), token: token, headers: tn.Headers()},
		{name: "prescriptions", path: prescriptionsPath(tn, testsuite.RolePrescriber, tn.PatientID, nil), token: tn.Token(t, testsuite.RolePrescriber), headers: tn.Headers()},
		{name: "events", path: env.AdminPath("/admin/v1/events"), token: env.AdminKey},
		{name: "webhook endpoints", path: env.AdminPath("/admin/v1/webhook-endpoints"), token: env.AdminKey},
	}
	queries := []struct {
		query string
		field string
	}{
		{query: "limit=%zz", field: "limit"},
		{query: "limit=%", field: "limit"},
		{query: "limit=5%2", field: "limit"},
		{query: "limit=5;x=1", field: "limit"},
		{query: "lastKey=%zz", field: "lastKey"},
		{query: "%zz=1", field: "%zz"},
		{query: "other=%g0&limit=5", field: "other"},
		{query: "limit=5&other=%g0", field: "other"},
	}
	var scenarios []testsuite.Scenario
	for _, l := range lists {
		scenarios = append(scenarios, testsuite.Scenario{Name: l.name + "/well formed", Path: l.path + "?limit=5&other=a%20b", Token: l.token,
			Headers: l.headers, Status: http.StatusOK})
		for _, q := range queries {
			field := q.field
			scenarios = append(scenarios, testsuite.Scenario{
				Name: l.name + "/" + q.query, Path: l.path + "?" + q.query, Token: l.token, Headers: l.headers,
				Status: http.StatusBadRequest,
				Check: func(t testing.TB, r *testsuite.Response) {
					assert.Equal(t, []string{field}, r.ValidationFields(), "%s", r.Body)
				},
			})
		}
	}
	testsuite.RunScenarios(t, env, scenarios)
}

// TestUnfinishedHeadersKeepMemoryBounded starts the real binary with the
// default limits and opens 1,000 connections that each send a request
// whose headers never end (up to 1,040,000 bytes). The server answers each
// with 431 once it has read http.max_header_bytes and closes it, its peak
// resident memory stays under 384 MiB (175-217 MiB measured; it reached
// 2.33 GB with net/http's 1 MiB default and no connection cap), and
// /healthz answers throughout.
func TestUnfinishedHeadersKeepMemoryBounded(t *testing.T) {
	t.Parallel()
	const (
		conns      = 1000
		perConn    = 1_040_000
		peakBound  = 384 << 20
		hangGuard  = 60 * time.Second // a bound on the test, not a speed
		chunkBytes = 32 << 10
	)
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("reads the server's memory from /proc; Linux only")
	}
	badgerPassOnly(t)
	bin := rxgateBinary(t)
	cfg, _ := serveConfig(t, "")
	proc := startBinary(t, bin, cfg)
	u, err := url.Parse(proc.baseURL)
	require.NoError(t, err)
	addr := u.Host
	pid := proc.cmd.Process.Pid

	ctx, cancel := context.WithTimeout(t.Context(), hangGuard)
	defer cancel()
	var healthOK, healthFailed atomic.Int64
	var lastHealthErr atomic.Value
	attackDone := make(chan struct{})
	var health sync.WaitGroup
	health.Go(func() {
		client := &http.Client{Timeout: 20 * time.Second}
		for {
			select {
			case <-attackDone:
				return
			case <-time.After(100 * time.Millisecond):
			}
			resp, err := client.Get(proc.baseURL[:len(proc.baseURL)-len(u.Path)] + "/healthz")
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}
			if err != nil || resp.StatusCode != http.StatusOK {
				healthFailed.Add(1)
				lastHealthErr.Store(fmt.Sprint(err, resp))
				continue
			}
			healthOK.Add(1)
		}
	})

	pad := bytes.Repeat([]byte("a"), chunkBytes)
	var refused, unfinished atomic.Int64
	var wg sync.WaitGroup
	for range conns {
		wg.Go(func() {
			var d net.Dialer
			c, err := d.DialContext(ctx, "tcp", addr)
			if err != nil {
				unfinished.Add(1)
				return
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(hangGuard))
			if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: rxgate\r\nX-Pad: "); err != nil {
				unfinished.Add(1)
				return
			}
			// Write until the server stops reading and closes: a write
			// error (reset) or the whole pad sent, then read its answer.
			for sent := 0; sent < perConn; sent += chunkBytes {
				if _, err := c.Write(pad); err != nil {
					if errors.Is(err, os.ErrDeadlineExceeded) {
						unfinished.Add(1) // the guard, not the server, ended it
						return
					}
					break
				}
			}
			answer, err := io.ReadAll(c)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				unfinished.Add(1) // the server never closed
				return
			}
			if len(answer) == 0 || bytes.HasPrefix(answer, []byte("HTTP/1.1 431")) {
				refused.Add(1) // closed by the server, with or without its 431 read
				return
			}
			unfinished.Add(1)
		})
	}
	wg.Wait()
	close(attackDone)
	health.Wait()

	peak := procStatusBytes(t, pid, "VmHWM")
	t.Logf("%d connections refused, peak RSS %d MiB, %d health checks answered during the attack", refused.Load(), peak>>20, healthOK.Load())
	assert.Equal(t, int64(conns), refused.Load(), "every connection is cut by the server")
	assert.Zero(t, unfinished.Load())
	assert.Less(t, peak, int64(peakBound), "peak resident memory")
	assert.Zero(t, healthFailed.Load(), "/healthz failed during the attack: %v", lastHealthErr.Load())
	assert.Positive(t, healthOK.Load(), "/healthz was checked during the attack")
}

// procStatusBytes reads a "kB" line of /proc/{pid}/status, in bytes.
func procStatusBytes(t testing.TB, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			require.NoError(t, err)
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}
