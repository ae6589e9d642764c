package postgres_test

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/queue"
	"github.com/rxgate/rxgate/storage"
	"github.com/rxgate/rxgate/storage/postgres"
	"github.com/rxgate/rxgate/testsuite"
)

// stallProxy is a loopback TCP proxy that forwards between its clients
// and target until a client sends trigger. From then on it forwards
// nothing, in either direction and on every connection, new ones too,
// and holds them all open: a network that stopped delivering, which
// neither end is told about. close stops every goroutine it started.
type stallProxy struct {
	ln      net.Listener
	target  string
	trigger []byte
	stalled chan struct{} // closed at the stall
	stall   sync.Once
	done    chan struct{} // closed by close
	closing sync.Once
	wg      sync.WaitGroup

	mu     sync.Mutex
	closed bool
	conns  []net.Conn
}

func newStallProxy(t testing.TB, target, trigger string) *stallProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &stallProxy{ln: ln, target: target, trigger: []byte(trigger), stalled: make(chan struct{}), done: make(chan struct{})}
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

// Addr is the proxy's address.
func (p *stallProxy) Addr() string { return p.ln.Addr().String() }

// track keeps c to be closed by close; false when close has begun (c is
// closed then).
func (p *stallProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = c.Close()
		return false
	}
	p.conns = append(p.conns, c)
	return true
}

func (p *stallProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil || !p.track(c) {
			return
		}
		p.wg.Go(func() { p.serve(c) })
	}
}

func (p *stallProxy) serve(client net.Conn) {
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = client.Close()
		return
	}
	if !p.track(server) {
		return
	}
	p.wg.Go(func() { p.pipe(server, client, false) })
	p.pipe(client, server, true)
}

// pipe copies src to dst, looking for the trigger in what it copies when
// watch is set. After the stall it forwards nothing and closes nothing:
// it waits for close.
func (p *stallProxy) pipe(src, dst net.Conn, watch bool) {
	buf := make([]byte, 32<<10)
	var seen []byte // the end of what went before, for a trigger split across reads
	for {
		n, err := src.Read(buf)
		if n > 0 && watch {
			seen = append(seen, buf[:n]...)
			if bytes.Contains(seen, p.trigger) {
				p.stall.Do(func() { close(p.stalled) })
			}
			seen = seen[max(0, len(seen)-len(p.trigger)):]
		}
		select {
		case <-p.stalled:
			<-p.done
			return
		default:
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				_ = src.Close()
				return
			}
		}
		if err != nil {
			_ = dst.Close()
			return
		}
	}
}

// close closes the listener and every connection and waits for the
// proxy's goroutines; only the first call does.
func (p *stallProxy) close() {
	p.closing.Do(func() {
		p.mu.Lock()
		p.closed = true
		conns := p.conns
		p.mu.Unlock()
		close(p.done)
		_ = p.ln.Close()
		for _, c := range conns {
			_ = c.Close()
		}
		p.wg.Wait()
	})
}

// TestReplicaCutOffInAClaim: one replica's connection to PostgreSQL goes
// through a proxy that stops forwarding in the middle of a claim, after
// the claim took its endpoint's claim slot, as a network that drops
// would. The other replica keeps claiming and delivering: the server ends
// the silent replica's session IdleInTransactionTimeout after its last
// statement, which frees the slot; until then the other's claims skip the
// endpoint and look again claimSkipRetry later. So the other replica
// claims again within IdleInTransactionTimeout and a fraction of a second
// of the stall (well under 3s here); the test allows ten times 3s for a
// loaded machine. Without the timeouts the slot would be held until the
// server's keepalive gave up on the connection, two hours by default.
// The silent replica's own claim ends at its deadline, as unavailable
// (503).
func TestReplicaCutOffInAClaim(t *testing.T) {
	base := testsuite.PostgresURL(t)
	t.Parallel()
	const jobs = 5
	timeouts := postgres.Options{
		StatementTimeout: 5 * time.Second, LockTimeout: time.Second, IdleInTransactionTimeout: time.Second,
		NetworkTimeout: 10 * time.Second, ClaimTimeout: 2 * time.Second,
	}
	const allowed = 10 * 3 * time.Second

	delivered := make(chan struct{}, jobs)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		delivered <- struct{}{}
	}))
	t.Cleanup(receiver.Close)

	u, err := url.Parse(base)
	require.NoError(t, err)
	// The claim's read of its heads: sent after the claim took its
	// endpoints' slots, on a connection that has not run it before.
	proxy := newStallProxy(t, u.Host, "FROM unnest($1::text[]) AS e (endpoint_id)")
	u.Host = proxy.Addr()
	schema := testsuite.NewSchema()
	other := openPostgres(t, withURL(timeouts, base, schema))
	// Closed, not dropped: its connections are cut off; the other drops
	// the schema.
	silent, err := postgres.Open(t.Context(), withURL(timeouts, u.String(), schema))
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, silent.Close()) })
	seedJobs(t, other, receiver.URL, jobs)

	claimed := make(chan error, 1)
	go func() {
		_, err := silent.ClaimJobs(context.Background(), storage.ClaimRequest{Owner: "silent", Now: time.Now(), LeaseFor: time.Minute, Max: jobs})
		claimed <- err
	}()
	select {
	case <-proxy.stalled:
	case <-time.After(allowed):
		t.Fatal("the silent replica's claim never reached its walk over the endpoints")
	}
	stalledAt := time.Now()
	held, err := other.HeldSlots(t.Context())
	require.NoError(t, err)
	require.Positive(t, held, "the silent replica holds its endpoint's claim slot")

	q, err := queue.New(other, queue.Options{
		Workers: 2, Timeout: 5 * time.Second, MaxAttempts: 3, BackoffBase: 10 * time.Millisecond,
		AllowInsecureLoopback: true, Shared: true,
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	require.NoError(t, err)
	require.NoError(t, q.Start(t.Context()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		assert.NoError(t, q.Stop(ctx))
	})
	guard := time.After(allowed)
	for i := range jobs {
		select {
		case <-delivered:
		case <-guard:
			t.Fatalf("the other replica delivered %d of %d jobs within %s of the stall", i, jobs, allowed)
		}
	}
	t.Logf("the other replica delivered every job %s after the stall", time.Since(stalledAt).Round(time.Millisecond))

	select {
	case err := <-claimed:
		require.ErrorIs(t, err, storage.ErrUnavailable, "the silent replica's claim ends at its deadline as unavailable")
	case <-time.After(allowed):
		t.Fatal("the silent replica's claim did not end at its deadline")
	}
	// Connections reset now rather than silent: the silent replica's
	// cancel requests, sent as it gave up on its claim, fail at once
	// and its Close need not wait for them.
	proxy.close()
}

// withURL is opts on url, in schema.
func withURL(opts postgres.Options, url, schema string) postgres.Options {
	opts.URL, opts.Schema = url, schema
	return opts
}

// TestCallsEndAtTheirDeadline: with the network to the database silent,
// every call, of the partner API's and of the queue's, ends at its
// deadline (Options.CallTimeout) as unavailable, which the API answers
// with 503, instead of waiting for the network to come back.
func TestCallsEndAtTheirDeadline(t *testing.T) {
	base := testsuite.PostgresURL(t)
	t.Parallel()
	const stall = "rxgate test: stall"
	u, err := url.Parse(base)
	require.NoError(t, err)
	proxy := newStallProxy(t, u.Host, stall)
	u.Host = proxy.Addr()
	s, err := postgres.Open(t.Context(), postgres.Options{URL: u.String(), Schema: testsuite.NewSchema(), MaxConns: 2, CallTimeout: 500 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.Close()) })
	p := storage.Partner{Name: "P"}
	require.NoError(t, s.CreatePartner(t.Context(), &p))
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	_, err = s.Pool().Exec(ctx, "SELECT '"+stall+"'")
	require.Error(t, err)
	<-proxy.stalled

	job := storage.Job{ID: storage.NewID(), LeaseID: storage.NewID()}
	calls := []struct {
		name string
		call func(context.Context) error
	}{
		{"Ping", s.Ping},
		{"GetPartner", func(ctx context.Context) error { _, err := s.GetPartner(ctx, p.ID); return err }},
		{"CreatePartner", func(ctx context.Context) error { return s.CreatePartner(ctx, &storage.Partner{Name: "Q"}) }},
		{"ListEvents", func(ctx context.Context) error {
			_, _, err := s.ListEvents(ctx, storage.EventFilter{}, storage.PageRequest{Limit: 10})
			return err
		}},
		{"ClaimJobs", func(ctx context.Context) error {
			_, err := s.ClaimJobs(ctx, storage.ClaimRequest{Owner: "q", Now: time.Now(), LeaseFor: time.Minute, Max: 1})
			return err
		}},
		{"RenewLeases", func(ctx context.Context) error {
			_, err := s.RenewLeases(ctx, []storage.Job{job}, time.Now().Add(time.Minute))
			return err
		}},
		{"ReclaimExpired", func(ctx context.Context) error { _, err := s.ReclaimExpired(ctx, time.Now()); return err }},
		{"JobStats", func(ctx context.Context) error { _, err := s.JobStats(ctx); return err }},
		{"ListOperatorKeys", func(ctx context.Context) error { _, err := s.ListOperatorKeys(ctx); return err }},
		{"GetOperatorKey", func(ctx context.Context) error { _, err := s.GetOperatorKey(ctx, storage.NewID()); return err }},
		{"CreateOperatorKey", func(ctx context.Context) error {
			return s.CreateOperatorKey(ctx, &storage.OperatorKey{Name: "k", Role: string(storage.RoleAdmin), SecretHash: []byte("h")})
		}},
		{"RevokeOperatorKey", func(ctx context.Context) error { _, err := s.RevokeOperatorKey(ctx, storage.NewID()); return err }},
	}
	for _, c := range calls {
		// The call's own context has no deadline: the store sets it.
		err := c.call(context.Background())
		assert.ErrorIs(t, err, storage.ErrUnavailable, "%s with the database silent", c.name)
	}
	proxy.close()
}
