package queue_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/queue"
	"github.com/rxgate/rxgate/queue/signature"
	"github.com/rxgate/rxgate/storage"
	"github.com/rxgate/rxgate/storage/badger"
)

// TestDeliveryTable runs each row of table 3.3 against a real endpoint:
// what the endpoint does, how many attempts follow, and how the event ends.
func TestDeliveryTable(t *testing.T) {
	t.Parallel()
	status := func(code int) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(code) }
	}
	tests := []struct {
		name     string
		handler  http.HandlerFunc // nil: no server (see url)
		url      func(t *testing.T) string
		timeout  time.Duration
		caFile   bool // trust the test server's certificate
		noHits   bool // no request reaches a handler
		attempts int
		final    string
		code     int
		errText  string
	}{
		{name: "200 delivers", handler: status(200), attempts: 1, final: storage.EventDelivered, code: 200},
		{name: "201 delivers", handler: status(201), attempts: 1, final: storage.EventDelivered, code: 201},
		{name: "204 delivers", handler: status(204), attempts: 1, final: storage.EventDelivered, code: 204},
		{name: "400 fails at once", handler: status(400), attempts: 1, final: storage.EventFailed, code: 400, errText: "HTTP 400"},
		{name: "401 fails at once", handler: status(401), attempts: 1, final: storage.EventFailed, code: 401, errText: "HTTP 401"},
		{name: "404 fails at once", handler: status(404), attempts: 1, final: storage.EventFailed, code: 404, errText: "HTTP 404"},
		{name: "410 fails at once", handler: status(410), attempts: 1, final: storage.EventFailed, code: 410, errText: "HTTP 410"},
		{name: "408 is retried", handler: status(408), attempts: 3, final: storage.EventFailed, code: 408, errText: "HTTP 408"},
		{name: "429 is retried and counts", handler: status(429), attempts: 3, final: storage.EventFailed, code: 429, errText: "HTTP 429"},
		{name: "500 is retried", handler: status(500), attempts: 3, final: storage.EventFailed, code: 500, errText: "HTTP 500"},
		{name: "503 is retried", handler: status(503), attempts: 3, final: storage.EventFailed, code: 503, errText: "HTTP 503"},
		{name: "redirect is not followed and fails", handler: func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/moved" {
				w.WriteHeader(200) // reaching here would be following the redirect
				return
			}
			http.Redirect(w, r, "/moved", http.StatusTemporaryRedirect)
		}, attempts: 1, final: storage.EventFailed, code: 307, errText: "HTTP 307"},
		{name: "closed port is retried", url: func(t *testing.T) string {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			addr := ln.Addr().String()
			require.NoError(t, ln.Close())
			return "http://" + addr + "/hook"
		}, noHits: true, attempts: 3, final: storage.EventFailed, errText: "connection refused"},
		{name: "hang past the timeout is retried", handler: func(w http.ResponseWriter, r *http.Request) {
			hang(r)
		}, timeout: 100 * time.Millisecond, attempts: 3, final: storage.EventFailed, errText: "timeout: no response within 100ms"},
		{name: "TLS certificate that does not verify is retried", handler: status(200), url: tlsURL(false), noHits: true,
			attempts: 3, final: storage.EventFailed, errText: "tls: certificate signed by an unknown authority"},
		{name: "TLS certificate trusted through ca_file delivers", handler: status(200), url: tlsURL(true), caFile: true,
			attempts: 1, final: storage.EventDelivered, code: 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var hits atomic.Int32
			url := ""
			var caFile string
			switch {
			case tt.url != nil:
				url = tt.url(t)
				if tt.caFile {
					caFile = url[strings.Index(url, "#")+1:]
				}
				url, _, _ = strings.Cut(url, "#")
				if tt.handler != nil {
					tlsHandlers.Store(url, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
						hits.Add(1)
						tt.handler(w, r)
					}))
				}
			default:
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.URL.Path == "/hook" {
						hits.Add(1)
					}
					tt.handler(w, r)
				}))
				t.Cleanup(srv.Close)
				url = srv.URL + "/hook"
			}
			h := newHarness(t, withOptions(func(c *queue.Options) {
				if tt.timeout > 0 {
					c.Timeout = tt.timeout
				}
				c.CAFile = caFile
			}))
			e := h.endpoint(url)
			id := h.prescribe()
			results := h.final()

			require.Len(t, results, tt.attempts, "attempts made")
			for i, r := range results {
				assert.Equal(t, id, r.Job.EventID)
				assert.Equal(t, i, r.Job.Attempts, "attempts counted before this one")
				assert.Equal(t, e.ID, r.Attempt.EndpointID)
				assert.Equal(t, tt.code, r.Attempt.StatusCode)
				assert.Contains(t, r.Attempt.Error, tt.errText)
				if i < tt.attempts-1 {
					assert.Equal(t, "retry", r.Outcome)
				}
			}
			ev := h.event(id)
			assert.Equal(t, tt.final, ev.Status)
			assert.Len(t, ev.Attempts, tt.attempts, "every attempt is in the event log")
			if tt.noHits {
				assert.Zero(t, hits.Load())
			} else {
				assert.EqualValues(t, tt.attempts, hits.Load(), "requests the endpoint saw")
			}
			pending, leased := h.jobs()
			assert.Empty(t, pending, "nothing is re-sent automatically")
			assert.Empty(t, leased)
		})
	}
}

// hang never answers: it returns when the client gives up. The body is
// read first: net/http notices a closed connection only after that.
func hang(r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	<-r.Context().Done()
}

// tlsHandlers routes the shared TLS test servers' requests to each test.
var tlsHandlers sync.Map // url -> http.Handler

// tlsURL starts an httptest TLS server for the test; with trust, it also
// writes its certificate to a PEM file whose path follows a "#" in the
// returned URL.
func tlsURL(trust bool) func(t *testing.T) string {
	return func(t *testing.T) string {
		var srv *httptest.Server
		srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if h, ok := tlsHandlers.Load(srv.URL + "/hook"); ok {
				h.(http.Handler).ServeHTTP(w, r)
				return
			}
			w.WriteHeader(http.StatusNotFound)
		}))
		t.Cleanup(srv.Close)
		url := srv.URL + "/hook"
		if trust {
			path := filepath.Join(t.TempDir(), "ca.pem")
			pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
			require.NoError(t, os.WriteFile(path, pemBytes, 0o600))
			url += "#" + path
		}
		return url
	}
}

// TestDeliveryRequest checks what is sent: POST, JSON content type, the
// stored bytes, the signature, X-Webhook-Id and User-Agent.
func TestDeliveryRequest(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t, nil)
	var method string
	rec.answer = func(_ int, r *http.Request) int { method = r.Method; return 200 }
	h := newHarness(t)
	e := h.endpoint(rec.server.URL + "/hooks/rx?tenant=1")
	id := h.prescribe()
	res := h.final()
	require.Len(t, res, 1)
	got := rec.got()
	require.Len(t, got, 1)
	req := got[0]

	assert.Equal(t, http.MethodPost, method)
	assert.Equal(t, "application/json", req.header.Get("Content-Type"))
	assert.Equal(t, id, req.header.Get("X-Webhook-Id"))
	assert.Equal(t, "rxgate/test", req.header.Get("User-Agent"))
	ev := h.event(id)
	assert.Equal(t, ev.Payload, req.body, "the exact stored bytes")

	// A receiver written from spec 6.4 alone verifies it.
	header := req.header.Get("X-Webhook-Signature")
	ts, sig, ok := strings.Cut(strings.TrimPrefix(header, "t="), ",v1=")
	require.True(t, ok, header)
	assert.NotContains(t, sig, ",", "one signature outside a rotation")
	m := hmac.New(sha256.New, []byte(e.Secret))
	m.Write([]byte(ts + "." + string(req.body)))
	assert.Equal(t, hex.EncodeToString(m.Sum(nil)), sig)
	n, err := strconv.ParseInt(ts, 10, 64)
	require.NoError(t, err)
	assert.InDelta(t, time.Now().Unix(), n, 5)
	assert.NoError(t, signature.Verify([]string{e.Secret}, header, req.body, time.Now()))
}

// TestEveryEndpointOfThePartner checks that an event goes to each endpoint
// of the organization's partner and to no other.
func TestEveryEndpointOfThePartner(t *testing.T) {
	t.Parallel()
	one, two, stranger := newRecorder(t, nil), newRecorder(t, nil), newRecorder(t, nil)
	h := newHarness(t)
	e1 := h.endpoint(one.server.URL)
	e2 := h.endpoint(two.server.URL)
	other := storage.Partner{Name: "Other"}
	require.NoError(t, h.store.CreatePartner(t.Context(), &other))
	require.NoError(t, h.store.CreateWebhookEndpoint(t.Context(), &storage.WebhookEndpoint{PartnerID: other.ID, URL: stranger.server.URL, Secret: "x"}))

	id := h.prescribe()
	r1, r2 := h.next(), h.next()
	assert.ElementsMatch(t, []string{e1.ID, e2.ID}, []string{r1.Attempt.EndpointID, r2.Attempt.EndpointID})
	assert.Len(t, one.got(), 1)
	assert.Len(t, two.got(), 1)
	assert.Empty(t, stranger.got())
	assert.NotEqual(t, one.got()[0].header.Get("X-Webhook-Signature"), two.got()[0].header.Get("X-Webhook-Signature"), "each endpoint's own secret")
	assert.Equal(t, storage.EventDelivered, h.event(id).Status)
}

// TestBackoffScheduleAndFreshTimestamps drives retries with a fake clock:
// attempts wait 1 s, then 2 s (jitter pinned to its middle), and each
// attempt is signed with the time it is sent.
func TestBackoffScheduleAndFreshTimestamps(t *testing.T) {
	t.Parallel()
	statuses := []int{500, 503, 200}
	rec := newRecorder(t, func(n int, _ *http.Request) int { return statuses[n-1] })
	h := newHarness(t, withFakeClock(), withOptions(func(c *queue.Options) {
		c.BackoffBase, c.BackoffMax = time.Second, time.Minute
	}), withOptions(func(o *queue.Options) {
		o.Backoff = queue.Exponential{Base: time.Second, Max: time.Minute, Rand: func() float64 { return 0.5 }}
	}))
	e := h.endpoint(rec.server.URL)
	t0 := h.clock.Now()
	id := h.prescribe()

	r := h.next()
	assert.Equal(t, "retry", r.Outcome)
	assert.Equal(t, t0, r.Attempt.AttemptedAt)
	assert.Equal(t, t0.Add(time.Second), r.RetryAt)
	pending, _ := h.jobs()
	require.Len(t, pending, 1)
	assert.Equal(t, 1, pending[0].Attempts)
	assert.Equal(t, t0.Add(time.Second), pending[0].Due)

	h.clock.Advance(time.Second)
	r = h.next()
	assert.Equal(t, "retry", r.Outcome)
	assert.Equal(t, t0.Add(time.Second), r.Attempt.AttemptedAt)
	assert.Equal(t, t0.Add(3*time.Second), r.RetryAt, "twice the base")

	h.clock.Advance(2 * time.Second)
	r = h.next()
	assert.Equal(t, "delivered", r.Outcome)
	assert.Equal(t, t0.Add(3*time.Second), r.Attempt.AttemptedAt)

	got := rec.got()
	require.Len(t, got, 3)
	for i, offset := range []time.Duration{0, time.Second, 3 * time.Second} {
		sent := t0.Add(offset)
		header := got[i].header.Get("X-Webhook-Signature")
		assert.True(t, strings.HasPrefix(header, fmt.Sprintf("t=%d,", sent.Unix())), "attempt %d signed at its own time: %s", i+1, header)
		assert.NoError(t, signature.Verify([]string{e.Secret}, header, got[i].body, sent))
		assert.Equal(t, got[0].body, got[i].body, "every attempt sends the same bytes")
	}
	ev := h.event(id)
	assert.Equal(t, storage.EventDelivered, ev.Status)
	codes := []int{}
	for _, a := range ev.Attempts {
		codes = append(codes, a.StatusCode)
	}
	assert.Equal(t, []int{500, 503, 200}, codes)
}

// TestRetryAfter checks that Retry-After is honoured up to backoff_max and
// that a 429 is retried like a 5xx, counting the attempt.
func TestRetryAfter(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		status     int
		retryAfter func(now time.Time) string
		want       time.Duration
	}{
		{name: "429 without Retry-After backs off", status: 429, want: time.Second},
		{name: "429 Retry-After seconds", status: 429, retryAfter: func(time.Time) string { return "30" }, want: 30 * time.Second},
		{name: "503 Retry-After seconds", status: 503, retryAfter: func(time.Time) string { return "45" }, want: 45 * time.Second},
		{name: "Retry-After date", status: 429, retryAfter: func(now time.Time) string { return now.Add(40 * time.Second).Format(http.TimeFormat) }, want: 40 * time.Second},
		{name: "Retry-After beyond backoff_max is capped", status: 429, retryAfter: func(time.Time) string { return "3600" }, want: time.Minute},
		{name: "Retry-After shorter than the backoff keeps the backoff", status: 429, retryAfter: func(time.Time) string { return "0" }, want: time.Second},
		{name: "malformed Retry-After is ignored", status: 429, retryAfter: func(time.Time) string { return "later" }, want: time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			clock := newFakeClock()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tt.retryAfter != nil {
					w.Header().Set("Retry-After", tt.retryAfter(clock.Now()))
				}
				w.WriteHeader(tt.status)
			}))
			t.Cleanup(srv.Close)
			h := newHarness(t, func(h *harness) { h.clock = clock }, withOptions(func(c *queue.Options) {
				c.BackoffBase, c.BackoffMax = time.Second, time.Minute
			}), withOptions(func(o *queue.Options) {
				o.Backoff = queue.Exponential{Base: time.Second, Max: time.Minute}
			}))
			h.endpoint(srv.URL)
			t0 := clock.Now()
			h.prescribe()
			r := h.next()
			assert.Equal(t, "retry", r.Outcome)
			assert.Equal(t, tt.status, r.Attempt.StatusCode)
			assert.Equal(t, t0.Add(tt.want), r.RetryAt)
			pending, _ := h.jobs()
			require.Len(t, pending, 1)
			assert.Equal(t, 1, pending[0].Attempts, "the attempt counts (table 3.3)")
		})
	}
}

// TestRotationGrace checks that deliveries carry the old and the new
// signature during the grace period, and only the new one after it.
func TestRotationGrace(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t, nil)
	h := newHarness(t, withFakeClock())
	e := h.endpoint(rec.server.URL)
	old := e.Secret
	rotated, err := h.store.RotateWebhookSecret(t.Context(), e.ID, "the-new-secret", h.clock.Now().Add(24*time.Hour))
	require.NoError(t, err)

	h.prescribe()
	require.Equal(t, "delivered", h.next().Outcome)
	h.clock.Advance(24 * time.Hour)
	h.prescribe()
	require.Equal(t, "delivered", h.next().Outcome)

	got := rec.got()
	require.Len(t, got, 2)
	during := got[0].header.Get("X-Webhook-Signature")
	assert.Equal(t, 2, strings.Count(during, "v1="), during)
	sentAt := h.clock.Now().Add(-24 * time.Hour)
	assert.Equal(t, signature.Header(sentAt, got[0].body, old, rotated.Secret), during, "old first, then new")
	for _, s := range []string{old, rotated.Secret} {
		assert.NoError(t, signature.Verify([]string{s}, during, got[0].body, sentAt))
	}
	after := got[1].header.Get("X-Webhook-Signature")
	assert.Equal(t, 1, strings.Count(after, "v1="), after)
	assert.NoError(t, signature.Verify([]string{rotated.Secret}, after, got[1].body, h.clock.Now()))
	assert.ErrorIs(t, signature.Verify([]string{old}, after, got[1].body, h.clock.Now()), signature.ErrSignatureMismatch)
}

// TestJobsSurviveACrash is the queue's persistence check on disk: queued
// jobs, and a job leased by a process that died mid-attempt, are found
// pending after reopening the store and are delivered once a queue starts.
func TestJobsSurviveACrash(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t, nil)
	dir := t.TempDir()
	s, err := badger.Open(badger.Options{Dir: dir})
	require.NoError(t, err)
	h := newHarness(t, withStore(s), withoutStart())
	h.endpoint(rec.server.URL)
	var ids []string
	for range 3 {
		ids = append(ids, h.prescribe())
	}
	// The dead process had leased one job and was making its attempt.
	res, err := s.ClaimJobs(t.Context(), storage.ClaimRequest{Owner: "dead", Now: time.Now(), LeaseFor: time.Hour, Max: 1})
	require.NoError(t, err)
	require.Len(t, res.Jobs, 1)
	require.NoError(t, s.Close())

	s, err = badger.Open(badger.Options{Dir: dir})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.Close()) })
	pending, leased, err := s.ListJobs(t.Context())
	require.NoError(t, err)
	assert.Len(t, pending, 3, "queued jobs are on disk, the one in flight at the crash too")
	assert.Empty(t, leased, "its lease died with the process")
	assert.True(t, slices.ContainsFunc(pending, func(j storage.Job) bool { return j.ID == res.Jobs[0].ID }))

	h2 := newHarness(t, withStore(s), withoutStart())
	h2.partner, h2.org = h.partner, h.org
	h2.start()
	seen := map[string]bool{}
	for range 3 {
		r := h2.next()
		assert.Equal(t, "delivered", r.Outcome)
		seen[r.Job.EventID] = true
	}
	for _, id := range ids {
		assert.True(t, seen[id], "event %s delivered after the restart", id)
		ev, err := s.GetEvent(t.Context(), id)
		require.NoError(t, err)
		assert.Equal(t, storage.EventDelivered, ev.Status)
		assert.Len(t, ev.Attempts, 1, "the interrupted attempt left no record")
	}
	pending, leased, err = s.ListJobs(t.Context())
	require.NoError(t, err)
	assert.Empty(t, pending)
	assert.Empty(t, leased)
}

// TestStopFinishesInFlightAttempts: Stop waits for an attempt in flight and
// records it.
func TestStopFinishesInFlightAttempts(t *testing.T) {
	t.Parallel()
	entered, release := make(chan struct{}), make(chan struct{})
	rec := newRecorder(t, func(int, *http.Request) int {
		close(entered)
		<-release
		return 200
	})
	h := newHarness(t, withoutStart())
	h.endpoint(rec.server.URL)
	require.NoError(t, h.q.Start(t.Context()))
	id := h.prescribe()
	<-entered
	stopped := make(chan error, 1)
	go func() { stopped <- h.q.Stop(contextWithTimeout(t, 10*time.Second)) }()
	close(release)
	require.NoError(t, <-stopped)
	assert.Equal(t, "delivered", h.next().Outcome)
	assert.Equal(t, storage.EventDelivered, h.event(id).Status)
	pending, leased := h.jobs()
	assert.Empty(t, pending)
	assert.Empty(t, leased)
	require.NoError(t, h.q.Stop(t.Context()), "a second Stop is harmless")
	require.NoError(t, h.q.Start(t.Context()), "Start after Stop does nothing")
}

// TestStopReturnsAbandonedAttempts: when Stop's context ends first, the
// attempt in flight is abandoned, not counted, and its job is pending
// again for the next start.
func TestStopReturnsAbandonedAttempts(t *testing.T) {
	t.Parallel()
	entered := make(chan struct{})
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(entered) })
		hang(r)
	}))
	t.Cleanup(srv.Close)
	h := newHarness(t, withoutStart(), withOptions(func(c *queue.Options) { c.Timeout = time.Minute }))
	h.endpoint(srv.URL)
	require.NoError(t, h.q.Start(t.Context()))
	id := h.prescribe()
	<-entered
	require.NoError(t, h.q.Stop(contextWithTimeout(t, 50*time.Millisecond)))
	pending, leased := h.jobs()
	require.Len(t, pending, 1)
	assert.Empty(t, leased, "no lease is left behind")
	assert.Equal(t, 0, pending[0].Attempts, "the abandoned attempt does not count")
	ev := h.event(id)
	assert.Equal(t, storage.EventPending, ev.Status)
	assert.Empty(t, ev.Attempts)
	select {
	case r := <-h.results:
		t.Fatalf("an abandoned attempt was recorded: %+v", r)
	default:
	}
}

// TestHangingEndpointDoesNotStarveOthers: an endpoint that never answers
// holds at most half the workers, so another partner's event is delivered
// while its backlog waits.
func TestHangingEndpointDoesNotStarveOthers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		hanging int // endpoints of the first partner, each hanging
		most    int32
	}{
		{name: "one hanging endpoint", hanging: 1, most: 2},
		{name: "two hanging endpoints", hanging: 2, most: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var inFlight, most atomic.Int32
			release := make(chan struct{})
			hang := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := inFlight.Add(1)
				defer inFlight.Add(-1)
				for {
					m := most.Load()
					if n <= m || most.CompareAndSwap(m, n) {
						break
					}
				}
				_, _ = io.Copy(io.Discard, r.Body)
				select {
				case <-release:
				case <-r.Context().Done():
				}
				w.WriteHeader(200)
			})
			fine := newRecorder(t, nil)
			servers := make([]*httptest.Server, tt.hanging)
			for i := range servers {
				servers[i] = httptest.NewServer(hang)
				t.Cleanup(servers[i].Close)
			}

			h := newHarness(t, withOptions(func(c *queue.Options) { c.Workers, c.Timeout = 4, time.Minute }))
			// Cleanups run last first: the endpoints answer, then the queue
			// stops, then the servers close.
			t.Cleanup(func() { close(release) })
			for _, srv := range servers {
				h.endpoint(srv.URL)
			}
			for range 10 {
				h.prescribe()
			}
			// A second partner whose endpoint answers at once.
			ctx := t.Context()
			p2 := storage.Partner{Name: "Second"}
			require.NoError(t, h.store.CreatePartner(ctx, &p2))
			o2 := storage.Organization{Name: "Second clinic", PartnerID: p2.ID}
			require.NoError(t, h.store.CreateOrganization(ctx, &o2))
			_, err := h.store.ValidateOrganization(ctx, o2.ID)
			require.NoError(t, err)
			u2 := storage.User{OrgID: o2.ID, Email: "b@example.com", GivenName: "B", FamilyName: "B", Role: storage.RolePrescriber}
			require.NoError(t, h.store.CreateUser(ctx, &u2))
			pt2 := storage.Patient{OrgID: o2.ID, UserID: u2.ID}
			require.NoError(t, h.store.CreatePatient(ctx, &pt2))
			require.NoError(t, h.store.CreateWebhookEndpoint(ctx, &storage.WebhookEndpoint{PartnerID: p2.ID, URL: fine.server.URL, Secret: "s"}))
			for range 3 {
				require.NoError(t, h.store.CreatePrescription(ctx, &storage.Prescription{OrgID: o2.ID, UserID: u2.ID, PatientID: pt2.ID}))
			}

			for range 3 {
				r := h.next()
				assert.Equal(t, "delivered", r.Outcome, "the other partner's events are delivered while the first partner's endpoints hang")
			}
			assert.Len(t, fine.got(), 3)
			assert.LessOrEqual(t, most.Load(), tt.most, "the hanging endpoints held at most half the workers each and left one free")
		})
	}
}

// TestQueueRefusesAtDelivery checks rules that hold even for an endpoint
// stored before the configuration changed: plain http needs
// allow_insecure_loopback, and a deleted endpoint gets nothing.
func TestQueueRefusesAtDelivery(t *testing.T) {
	t.Parallel()
	t.Run("plain http without allow_insecure_loopback", func(t *testing.T) {
		t.Parallel()
		rec := newRecorder(t, nil)
		h := newHarness(t, withOptions(func(c *queue.Options) { c.AllowInsecureLoopback = false }))
		h.endpoint(rec.server.URL)
		id := h.prescribe()
		r := h.next()
		assert.Equal(t, "failed", r.Outcome)
		assert.Contains(t, r.Attempt.Error, "must use https")
		assert.Empty(t, rec.got())
		assert.Equal(t, storage.EventFailed, h.event(id).Status)
	})
	t.Run("localhost is dialled only on loopback", func(t *testing.T) {
		t.Parallel()
		rec := newRecorder(t, nil)
		h := newHarness(t)
		h.endpoint(strings.Replace(rec.server.URL, "127.0.0.1", "localhost", 1))
		h.prescribe()
		assert.Equal(t, "delivered", h.next().Outcome)
	})
	t.Run("deleted endpoint", func(t *testing.T) {
		t.Parallel()
		rec := newRecorder(t, nil)
		h := newHarness(t, withoutStart())
		e := h.endpoint(rec.server.URL)
		id := h.prescribe()
		require.NoError(t, h.store.DeleteWebhookEndpoint(t.Context(), e.ID))
		h.start()
		r := h.next()
		assert.Equal(t, "failed", r.Outcome)
		assert.Equal(t, "webhook endpoint deleted", r.Attempt.Error)
		assert.Empty(t, rec.got())
		assert.Equal(t, storage.EventFailed, h.event(id).Status)
	})
}

// TestQueueRefusesNonPublicDestinations: a delivery whose address (after
// name resolution) is loopback, private or otherwise not public is refused
// before any connection, with one fixed error, and retried as a failed
// connection is; webhooks.allowed_networks (or, for loopback,
// allow_insecure_loopback) opens it.
func TestQueueRefusesNonPublicDestinations(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		host      string // replaces 127.0.0.1 in the receiver's URL
		loopback  bool
		allowed   []string
		delivered bool
	}{
		// localhost is a name: it is resolved, and the address the dialer
		// is about to connect to (127.0.0.1 or ::1) is what is refused.
		{name: "a name that resolves to a refused address", host: "localhost"},
		{name: "an address literal", host: "127.0.0.1"},
		{name: "an IPv4-mapped address literal", host: "[::ffff:127.0.0.1]"},
		{name: "an allowlisted network", host: "127.0.0.1", allowed: []string{"127.0.0.0/8"}, delivered: true},
		{name: "an allowlisted network, mapped", host: "[::ffff:127.0.0.1]", allowed: []string{"127.0.0.1/32"}, delivered: true},
		{name: "another allowlisted network", host: "127.0.0.1", allowed: []string{"10.0.0.0/8", "::1/128"}},
		{name: "allow_insecure_loopback", host: "127.0.0.1", loopback: true, delivered: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			url, caFile, accepts := countingTLSReceiver(t)
			url = strings.Replace(url, "127.0.0.1", tt.host, 1)
			h := newHarness(t, withOptions(func(c *queue.Options) {
				c.CAFile = caFile
				c.AllowInsecureLoopback = tt.loopback
				for _, n := range tt.allowed {
					c.AllowedNetworks = append(c.AllowedNetworks, netip.MustParsePrefix(n))
				}
			}))
			h.endpoint(url)
			id := h.prescribe()
			results := h.final()
			if tt.delivered {
				require.Len(t, results, 1)
				assert.Equal(t, "delivered", results[0].Outcome)
				assert.Equal(t, 200, results[0].Attempt.StatusCode)
				assert.EqualValues(t, 1, accepts.Load(), "connections the receiver accepted")
				return
			}
			require.Len(t, results, 3, "retried as a failed connection is")
			for i, r := range results {
				assert.Equal(t, queue.DestinationNotAllowed, r.Attempt.Error, "the whole error, whatever the host")
				assert.Zero(t, r.Attempt.StatusCode)
				if i < len(results)-1 {
					assert.Equal(t, "retry", r.Outcome)
				}
			}
			assert.Equal(t, storage.EventFailed, h.event(id).Status)
			assert.Zero(t, accepts.Load(), "connections the receiver accepted")
		})
	}
}

// countingTLSReceiver starts a TLS receiver on 127.0.0.1 that answers 200
// and counts the connections it accepts; it returns its URL and a PEM file
// of its certificate (for Options.CAFile).
func countingTLSReceiver(t testing.TB) (string, string, *atomic.Int32) {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) }))
	accepts := new(atomic.Int32)
	srv.Listener = countingListener{Listener: srv.Listener, n: accepts}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	path := filepath.Join(t.TempDir(), "ca.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	require.NoError(t, os.WriteFile(path, pemBytes, 0o600))
	return srv.URL + "/hook", path, accepts
}

// countingListener counts the connections accepted.
type countingListener struct {
	net.Listener
	n *atomic.Int32
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// TestReplaySendsAgain checks that a replayed event is sent again with the
// same id and bytes and a new signature timestamp.
func TestReplaySendsAgain(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t, func(n int, _ *http.Request) int {
		if n == 1 {
			return 410
		}
		return 200
	})
	h := newHarness(t, withFakeClock())
	h.endpoint(rec.server.URL)
	id := h.prescribe()
	assert.Equal(t, "failed", h.next().Outcome)
	h.clock.Advance(time.Hour)
	ev, err := h.store.ReplayEvent(t.Context(), id)
	require.NoError(t, err)
	assert.Equal(t, 2, ev.Round)
	r := h.next()
	assert.Equal(t, "delivered", r.Outcome)
	assert.Equal(t, 0, r.Job.Attempts, "a fresh round")
	got := rec.got()
	require.Len(t, got, 2)
	assert.Equal(t, got[0].body, got[1].body)
	assert.Equal(t, id, got[1].header.Get("X-Webhook-Id"))
	assert.NotEqual(t, got[0].header.Get("X-Webhook-Signature"), got[1].header.Get("X-Webhook-Signature"))
	assert.True(t, strings.HasPrefix(got[1].header.Get("X-Webhook-Signature"), fmt.Sprintf("t=%d,", h.clock.Now().Unix())))
	final := h.event(id)
	assert.Equal(t, storage.EventDelivered, final.Status)
	assert.Len(t, final.Attempts, 2)
}

func TestNewRejectsABadCAFile(t *testing.T) {
	t.Parallel()
	s, err := badger.Open(badger.Options{InMemory: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	path := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(path, []byte("not a certificate"), 0o600))
	opts := testOptions()
	opts.CAFile = path
	_, err = queue.New(s, opts)
	assert.ErrorContains(t, err, "CA file")
}

// TestBacklogDrains: jobs that waited long (a backlog, or a queue that was
// down) are claimed one after another without waiting for a full claim,
// however old they are.
func TestBacklogDrains(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t, nil)
	h := newHarness(t, withFakeClock(), withoutStart(), withOptions(func(c *queue.Options) { c.Workers = 1 }))
	h.endpoint(rec.server.URL)
	for range 20 {
		h.prescribe()
	}
	h.clock.Advance(10 * time.Minute)
	h.start()
	for range 20 {
		assert.Equal(t, "delivered", h.next().Outcome)
	}
	assert.Len(t, rec.got(), 20)
}

// claimCounter counts the claims a queue makes of its store.
type claimCounter struct {
	storage.Backend
	claims atomic.Int64
}

func (c *claimCounter) ClaimJobs(ctx context.Context, req storage.ClaimRequest) (storage.ClaimResult, error) {
	c.claims.Add(1)
	return c.Backend.ClaimJobs(ctx, req)
}

// TestFinishedAttemptsDoNotClaim: draining a backlog, the queue claims when
// there is something a claim can find (new jobs, leases freed by recorded
// outcomes, more due than it could take), not after every finished
// attempt, whose lease is still held then: under load a claim there
// mostly found nothing (BenchmarkDelivery drains such a backlog).
func TestFinishedAttemptsDoNotClaim(t *testing.T) {
	t.Parallel()
	const jobs = 60
	rec := newRecorder(t, nil)
	base := newHarness(t, withoutStart())
	counter := &claimCounter{Backend: base.store}
	h := newHarness(t, withStore(counter), withoutStart(), withOptions(func(c *queue.Options) { c.Workers = 4 }))
	h.endpoint(rec.server.URL)
	for range jobs {
		h.prescribe()
	}
	h.start()
	for range jobs {
		assert.Equal(t, "delivered", h.next().Outcome)
	}
	claims := counter.claims.Load()
	t.Logf("%d claims for %d deliveries", claims, jobs)
	assert.LessOrEqual(t, claims, int64(jobs), "at most one claim per delivery")
}

// failingClaims fails every claim while fail is set.
type failingClaims struct {
	storage.Backend
	fail   atomic.Bool
	claims atomic.Int64
}

func (f *failingClaims) ClaimJobs(ctx context.Context, req storage.ClaimRequest) (storage.ClaimResult, error) {
	f.claims.Add(1)
	if f.fail.Load() {
		return storage.ClaimResult{}, errors.New("the store is down")
	}
	return f.Backend.ClaimJobs(ctx, req)
}

// TestFailedClaimIsRetried: after a failed claim the dispatcher tries
// again a second later (errorPause), not at its idle poll.
func TestFailedClaimIsRetried(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t, nil)
	base := newHarness(t, withFakeClock(), withoutStart())
	store := &failingClaims{Backend: base.store}
	store.fail.Store(true)
	h := newHarness(t, withStore(store), func(h *harness) { h.clock = base.clock }, withoutStart())
	h.endpoint(rec.server.URL)
	h.prescribe()
	h.start()
	// Only the dispatcher waits on the clock, and it claims before it
	// waits.
	require.NoError(t, h.clock.WaitForWaiters(contextWithTimeout(t, 10*time.Second), 1), "the dispatcher never waited after a failed claim")
	require.NotZero(t, store.claims.Load(), "the dispatcher claimed before it waited")
	require.Empty(t, rec.got())
	store.fail.Store(false)
	h.clock.Advance(time.Second)
	assert.Equal(t, "delivered", h.next().Outcome)
	assert.Len(t, rec.got(), 1)
}

// TestLeasesAreRenewed: an attempt that outlasts its lease keeps it, because
// the queue renews the leases it holds; its own watch for expired leases
// (which takes back a crashed process's) does not take the job back and
// send it twice.
func TestLeasesAreRenewed(t *testing.T) {
	t.Parallel()
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if requests.Add(1) == 1 {
			close(entered)
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	// Timeout is real time; the lease (2 timeouts and a minute) is fake.
	h := newHarness(t, withFakeClock(), withOptions(func(o *queue.Options) { o.Timeout = time.Minute }))
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	h.endpoint(srv.URL)
	id := h.prescribe()
	<-entered
	_, leased := h.jobs()
	require.Len(t, leased, 1)
	first := leased[0].LeasedUntil

	h.clock.Advance(4 * time.Minute) // past the lease's first expiry
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, leased = h.jobs()
		if len(leased) == 1 && leased[0].LeasedUntil.After(first) {
			break
		}
		require.True(t, time.Now().Before(deadline), "the lease was not renewed within 20s: %+v", leased)
		time.Sleep(time.Millisecond)
	}
	pending, _ := h.jobs()
	assert.Empty(t, pending, "the live lease was not taken back")
	once.Do(func() { close(release) })
	r := h.next()
	assert.Equal(t, "delivered", r.Outcome, "the renewed lease records its attempt")
	assert.Equal(t, id, r.Job.EventID)
	assert.EqualValues(t, 1, requests.Load(), "the event was sent once")
}

// TestQueuesShareAStore: two queues on one job store (as replicas sharing a
// database would be) deliver every event to every endpoint exactly once,
// and an endpoint that hangs holds no more leases than the store allows
// however many queues claim. Queues that know they share the store
// (Options.Shared) claim nothing ahead, so the endpoint's attempts in
// flight stay within one queue's per-endpoint limit across both.
func TestQueuesShareAStore(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		shared bool
		most   int32 // attempts in flight to the hanging endpoint, both queues together
	}{
		// Each lets the endpoint have 2 in flight, and the store lets it
		// hold 4 leases (claimed ahead or in flight) between them.
		{name: "each on its own", shared: false, most: 4},
		{name: "shared", shared: true, most: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			testQueuesShareAStore(t, tt.shared, tt.most)
		})
	}
}

func testQueuesShareAStore(t *testing.T, shared bool, limit int32) {
	var mu sync.Mutex
	seen := map[string]int{} // endpoint path + event id -> deliveries
	var inFlight, most atomic.Int32
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hang" {
			n := inFlight.Add(1)
			defer inFlight.Add(-1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
		mu.Lock()
		seen[r.URL.Path+" "+r.Header.Get("X-Webhook-Id")]++
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	opts := func(o *queue.Options) { o.Workers, o.Timeout, o.Shared = 4, time.Minute, shared }
	h := newHarness(t, withOptions(opts))
	other := testOptions()
	opts(&other)
	other.Observe = func(r queue.Result) { h.results <- r }
	q2, err := queue.New(h.store, other)
	require.NoError(t, err)
	require.NoError(t, q2.Start(t.Context()))
	t.Cleanup(func() { assert.NoError(t, q2.Stop(contextWithTimeout(t, 10*time.Second))) })
	// Cleanups run last first: the hanging endpoint answers, then the
	// queues stop.
	t.Cleanup(func() { close(release) })

	for _, path := range []string{"/a", "/b", "/c", "/hang"} {
		h.endpoint(srv.URL + path)
	}
	const events = 20
	ids := make([]string, events)
	for i := range ids {
		ids[i] = h.prescribe()
	}
	for range 3 * events {
		assert.Equal(t, "delivered", h.next().Outcome)
	}
	mu.Lock()
	for _, id := range ids {
		for _, path := range []string{"/a", "/b", "/c"} {
			assert.Equal(t, 1, seen[path+" "+id], "event %s at %s", id, path)
		}
	}
	assert.Len(t, seen, 3*events, "nothing else was delivered")
	mu.Unlock()
	assert.LessOrEqual(t, most.Load(), limit, "the hanging endpoint held more attempts than the store's limit")
	_, leased := h.jobs()
	for _, j := range leased {
		assert.NotEmpty(t, j.Owner, "every lease names its owner")
	}
	assert.LessOrEqual(t, len(leased), int(limit), "leases of the hanging endpoint, by both queues")
}

// gatedOutcomes holds every RecordOutcomes until open is closed.
type gatedOutcomes struct {
	storage.Backend
	open chan struct{}
}

func (g *gatedOutcomes) RecordOutcomes(ctx context.Context, o []storage.Outcome) ([]storage.Recorded, error) {
	select {
	case <-g.open:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return g.Backend.RecordOutcomes(ctx, o)
}

// TestSlowOutcomeWriteDoesNotStopDeliveries: while outcomes wait to be
// written (a slow sync; Badger swapping its memtable), an endpoint's
// finished attempts hold their leases but not their places in the store's
// per-endpoint limit (ClaimRequest.Finished), so its next jobs are
// delivered meanwhile: before, deliveries stopped at the limit until the
// write was done, and a backlog drained one limit per write (make
// bench-load's p99 at 300/s).
func TestSlowOutcomeWriteDoesNotStopDeliveries(t *testing.T) {
	t.Parallel()
	const jobs = 12 // three times the store's limit of 4, within the outcomes' buffer
	rec := newRecorder(t, nil)
	var gate *gatedOutcomes
	h := gatedQueue(t, rec, jobs, func(s storage.Backend) storage.Backend {
		gate = &gatedOutcomes{Backend: s, open: make(chan struct{})}
		return gate
	}, nil)
	// No outcome is written until every job has been delivered; without
	// the fix the count stays at the limit and this gives up.
	require.Eventually(t, func() bool { return len(rec.got()) == jobs }, 30*time.Second, time.Millisecond,
		"deliveries stopped while outcomes waited to be written")
	openAndDrain(t, h, rec, gate.open, jobs)
}

// gatedQueue starts a queue of four workers (a per-endpoint limit of 4)
// on the store wrap makes of a fresh harness's, with tune applied to it
// first, and queues n jobs for one endpoint that rec receives.
func gatedQueue(t *testing.T, rec *recorder, n int, wrap func(storage.Backend) storage.Backend, tune func(*queue.Queue)) *harness {
	t.Helper()
	base := newHarness(t, withoutStart())
	h := newHarness(t, withStore(wrap(base.store)), withoutStart(), withOptions(func(c *queue.Options) { c.Workers = 4 }))
	if tune != nil {
		tune(h.q)
	}
	h.endpoint(rec.server.URL)
	for range n {
		h.prescribe()
	}
	h.start()
	return h
}

// openAndDrain opens a store's outcome gate and checks that each of the
// n jobs queued was delivered, once.
func openAndDrain(t *testing.T, h *harness, rec *recorder, open chan struct{}, n int) {
	t.Helper()
	close(open)
	for range n {
		assert.Equal(t, "delivered", h.next().Outcome)
	}
	assert.Len(t, rec.got(), n, "each job delivered once")
}

// loadedStore is a store whose outcome writes wait for a gate and which
// reports as many synchronous writes waiting as waiting says
// (storage.WriteLoad); it keeps every claim's request.
type loadedStore struct {
	*gatedOutcomes
	claimLog
	waiting atomic.Int64
}

func (l *loadedStore) WaitingWrites() int { return int(l.waiting.Load()) }

// wrap makes l gate s's outcome writes (gatedQueue).
func (l *loadedStore) wrap(s storage.Backend) storage.Backend {
	l.gatedOutcomes = &gatedOutcomes{Backend: s, open: make(chan struct{})}
	return l
}

func (l *loadedStore) ClaimJobs(ctx context.Context, req storage.ClaimRequest) (storage.ClaimResult, error) {
	l.record(req)
	return l.Backend.ClaimJobs(ctx, req)
}

// claimLog keeps every claim's request, in order.
type claimLog struct {
	mu     sync.Mutex
	claims []storage.ClaimRequest
}

func (c *claimLog) record(req storage.ClaimRequest) {
	c.mu.Lock()
	c.claims = append(c.claims, req)
	c.mu.Unlock()
}

func (c *claimLog) claimRequests() []storage.ClaimRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.claims)
}

// claimsWhenFull waits until rec has limit deliveries, the endpoint full
// while its outcomes wait, then queues one more job, whose commit wakes
// the dispatcher, and waits for the claim that wakes; it returns every
// claim's request so far.
func claimsWhenFull(t *testing.T, h *harness, rec *recorder, log *claimLog, limit int) []storage.ClaimRequest {
	t.Helper()
	require.Eventually(t, func() bool { return len(rec.got()) >= limit }, 30*time.Second, time.Millisecond)
	claimed := len(log.claimRequests())
	h.prescribe()
	require.Eventually(t, func() bool { return len(log.claimRequests()) > claimed }, 30*time.Second, time.Millisecond,
		"the new job woke no claim")
	return log.claimRequests()
}

// TestBusyStorePacesDeliveriesWithOutcomes: while the store has more
// synchronous writes waiting than the queue has workers (creates whose
// callers wait; storage.WriteLoad), finished attempts whose outcome is not
// yet written count against their endpoint's limit again, so that
// deliveries pace with their outcome writes instead of taking the CPU
// those writes need (make bench-load's creates at concurrency 64); once
// the store is no longer busy, a slow outcome write no longer stops them
// (TestSlowOutcomeWriteDoesNotStopDeliveries).
func TestBusyStorePacesDeliveriesWithOutcomes(t *testing.T) {
	t.Parallel()
	const jobs, limit = 12, 4 // the store's per-endpoint limit with 4 workers
	rec := newRecorder(t, nil)
	store := &loadedStore{}
	store.waiting.Store(100)
	h := gatedQueue(t, rec, jobs, store.wrap, func(q *queue.Queue) {
		queue.SetSlowWrite(q, time.Hour) // the gated write is not slow
	})
	// A new job wakes the dispatcher, whose claim finds the endpoint
	// full: its finished attempts still count while the store is busy.
	for _, req := range claimsWhenFull(t, h, rec, &store.claimLog, limit) {
		assert.Empty(t, req.Finished, "a claim uncounted finished attempts while the store was busy")
	}
	assert.Len(t, rec.got(), limit, "deliveries went past the limit while their outcomes waited and the store was busy")

	// No longer busy: the outcomes still wait, the deliveries do not.
	store.waiting.Store(0)
	h.prescribe()
	require.Eventually(t, func() bool { return len(rec.got()) == jobs+2 }, 30*time.Second, time.Millisecond,
		"deliveries stopped while outcomes waited to be written")
	openAndDrain(t, h, rec, store.open, jobs+2)
}

// TestBusyStoreSlowWriteDoesNotStopDeliveries: however many writes wait,
// an outcome write that has taken longer than the queue's bound for one
// that rides the busy store's batches (a slow disk, a memtable swap: the
// writes wait on the disk, not on the CPU) lets finished attempts leave
// their endpoint's limit again, and deliveries go on while it lasts.
func TestBusyStoreSlowWriteDoesNotStopDeliveries(t *testing.T) {
	t.Parallel()
	const jobs = 12 // three times the store's limit of 4, within the outcomes' buffer
	rec := newRecorder(t, nil)
	store := &loadedStore{}
	store.waiting.Store(100)
	h := gatedQueue(t, rec, jobs, store.wrap, func(q *queue.Queue) { queue.SetSlowWrite(q, 10*time.Millisecond) })
	require.Eventually(t, func() bool { return len(rec.got()) == jobs }, 30*time.Second, time.Millisecond,
		"deliveries stopped while a slow outcome write lasted")
	openAndDrain(t, h, rec, store.open, jobs)
}

// handoffGate is a store that hands off (storage.JobHandoff) but hands no
// job over: it records the outcomes once open is closed, and keeps every
// claim's request.
type handoffGate struct {
	storage.Backend
	claimLog
	open chan struct{}
}

func (g *handoffGate) RecordOutcomesHandoff(ctx context.Context, o []storage.Outcome, _ storage.ClaimRequest) ([]storage.Recorded, []storage.ClaimedJob, error) {
	select {
	case <-g.open:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	rec, err := g.Backend.RecordOutcomes(ctx, o)
	return rec, nil, err
}

func (g *handoffGate) ClaimJobs(ctx context.Context, req storage.ClaimRequest) (storage.ClaimResult, error) {
	g.record(req)
	return g.Backend.ClaimJobs(ctx, req)
}

// TestHandoffStoreListsNoFinishedAttempts: on a store that hands off, an
// outcome's write hands its attempt's place on to the endpoint's next
// job, so the queue's claims do not also uncount its finished attempts
// (ClaimRequest.Finished): a place given by both would let the endpoint
// past its limit. While the writes wait, the endpoint's deliveries stop
// at its limit; once they are done, the rest go.
func TestHandoffStoreListsNoFinishedAttempts(t *testing.T) {
	t.Parallel()
	const jobs, limit = 6, 4 // the store's per-endpoint limit with 4 workers
	rec := newRecorder(t, nil)
	var store *handoffGate
	h := gatedQueue(t, rec, jobs, func(s storage.Backend) storage.Backend {
		store = &handoffGate{Backend: s, open: make(chan struct{})}
		return store
	}, nil)
	// A new job wakes the dispatcher, whose claim finds the endpoint full.
	for _, req := range claimsWhenFull(t, h, rec, &store.claimLog, limit) {
		assert.Empty(t, req.Finished, "a claim uncounted attempts whose places the outcomes' writes hand on")
	}
	assert.Len(t, rec.got(), limit, "deliveries went past the limit while their outcomes waited")
	openAndDrain(t, h, rec, store.open, jobs+1)
}
