package testsuite_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/testsuite"
)

// tcpGate forwards connections to a target while open. Cut, it drops
// every connection it carries and refuses new ones, as a database that is
// restarted does to its clients; the shared server itself is left alone.
type tcpGate struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	open  bool
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

func newTCPGate(t *testing.T, target string) *tcpGate {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	g := &tcpGate{ln: ln, target: target, open: true, conns: map[net.Conn]struct{}{}}
	g.wg.Go(g.accept)
	t.Cleanup(func() {
		_ = ln.Close()
		g.cut()
		g.wg.Wait()
	})
	return g
}

func (g *tcpGate) accept() {
	for {
		c, err := g.ln.Accept()
		if err != nil {
			return
		}
		g.mu.Lock()
		if !g.open {
			g.mu.Unlock()
			_ = c.Close()
			continue
		}
		g.mu.Unlock()
		up, err := net.Dial("tcp", g.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		g.mu.Lock()
		g.conns[c], g.conns[up] = struct{}{}, struct{}{}
		g.mu.Unlock()
		pipe := func(dst, src net.Conn) {
			_, _ = io.Copy(dst, src)
			_, _ = dst.Close(), src.Close()
			g.mu.Lock()
			delete(g.conns, dst)
			delete(g.conns, src)
			g.mu.Unlock()
		}
		g.wg.Go(func() { pipe(up, c) })
		g.wg.Go(func() { pipe(c, up) })
	}
}

// cut drops every connection and refuses new ones until restore.
func (g *tcpGate) cut() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.open = false
	for c := range g.conns {
		_ = c.Close()
	}
}

func (g *tcpGate) restore() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.open = true
}

// TestDatabaseAwayUnderLoad: while the database cannot be reached,
// requests fail with 503 in the spec's envelope (never a 500) and
// /readyz says not ready; when it is back, service resumes by itself, and
// every create that was acknowledged is there.
func TestDatabaseAwayUnderLoad(t *testing.T) {
	t.Parallel()
	schemaURL := testsuite.PostgresSchema(t)
	u, err := url.Parse(schemaURL)
	require.NoError(t, err)
	gate := newTCPGate(t, u.Host)
	u.Host = gate.ln.Addr().String()
	env := testsuite.Start(t, testsuite.WithPostgres(u.String()))
	tn := env.NewTenant(t)

	var (
		mu       sync.Mutex
		acked    []string
		refused  int
		problems []string
	)
	create := func(ctx context.Context) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, env.AdminPath(tn.PatientPath()+"/prescriptions"),
			strings.NewReader(`{"item_name": "Amoxicillin 500 mg capsule", "quantity": "20"}`))
		if err != nil {
			return
		}
		req.Header.Set("Authorization", "Bearer "+env.AdminKey)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return // the test is ending
		}
		defer res.Body.Close()
		var body struct {
			Code  string `json:"code"`
			Error struct {
				Type string `json:"type"`
			} `json:"error"`
			Data struct {
				SCID string `json:"scid"`
			} `json:"data"`
		}
		decodeErr := json.NewDecoder(res.Body).Decode(&body)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case res.StatusCode == http.StatusCreated && decodeErr == nil:
			acked = append(acked, body.Data.SCID)
		case res.StatusCode == http.StatusServiceUnavailable && decodeErr == nil && body.Code == "SERVICE_UNAVAILABLE" &&
			strings.HasSuffix(body.Error.Type, "/service-unavailable"):
			refused++
		default:
			problems = append(problems, res.Status+" "+body.Code)
		}
	}
	ctx, stop := context.WithCancel(context.Background())
	var load sync.WaitGroup
	for range 4 {
		load.Go(func() {
			for ctx.Err() == nil {
				create(ctx)
			}
		})
	}
	defer func() { stop(); load.Wait() }()
	count := func() (int, int) { mu.Lock(); defer mu.Unlock(); return len(acked), refused }

	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 30s", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitUntil("creates under load", func() bool { n, _ := count(); return n >= 20 })
	gate.cut()
	waitUntil("503s while the database is away", func() bool { _, r := count(); return r >= 10 })
	ready := env.Do(t, testsuite.Request{URL: env.PartnerURL + "/readyz"})
	assert.Equal(t, http.StatusServiceUnavailable, ready.Status, "not ready while the database is away")
	before, _ := count()
	gate.restore()
	waitUntil("service resumes by itself", func() bool { n, _ := count(); return n >= before+20 })
	stop()
	load.Wait()

	mu.Lock()
	defer mu.Unlock()
	assert.Empty(t, problems, "every answer is a 201 or a 503 in the envelope")
	token := tn.Token(t, testsuite.RolePrescriber)
	stored := map[string]bool{}
	for cursor := ""; ; {
		scids, next := prescriptionsAt(t, env, tn, token, 50, cursor)
		for _, scid := range scids {
			stored[scid] = true
		}
		if next == "" {
			break
		}
		cursor = next
	}
	for _, scid := range acked {
		assert.True(t, stored[scid], "acknowledged create %s is stored", scid)
	}
	t.Logf("%d creates acknowledged, %d refused with 503 while the database was away", len(acked), refused)
}
