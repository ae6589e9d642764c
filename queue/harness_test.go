package queue_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/queue"
	"github.com/rxgate/rxgate/storage"
	"github.com/rxgate/rxgate/storage/badger"
	"github.com/rxgate/rxgate/testsuite"
	"github.com/rxgate/rxgate/testsuite/fake"
)

var _ queue.Clock = (*fake.Clock)(nil)

// newFakeClock is the fake clock of the queue's tests.
func newFakeClock() *fake.Clock {
	return fake.NewClock(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC))
}

// testOptions are the queue options of the tests: milliseconds of
// backoff.
func testOptions() queue.Options {
	return queue.Options{
		Workers:               4,
		Timeout:               5 * time.Second,
		MaxAttempts:           3,
		BackoffBase:           time.Millisecond,
		BackoffMax:            5 * time.Millisecond,
		AllowInsecureLoopback: true,
		UserAgent:             "rxgate/test",
	}
}

// harness is a store with one validated organization (partner, prescriber,
// patient) and a queue on it.
type harness struct {
	t       testing.TB
	store   storage.Backend
	clock   *fake.Clock // nil on the real clock
	q       *queue.Queue
	results chan queue.Result
	opts    queue.Options
	noStart bool

	partner storage.Partner
	org     storage.Organization
	user    storage.User
	patient storage.Patient
}

type harnessOption func(*harness)

// withFakeClock drives the store and the queue from a fake clock.
func withFakeClock() harnessOption {
	return func(h *harness) { h.clock = newFakeClock() }
}

// withOptions changes the queue options.
func withOptions(fn func(*queue.Options)) harnessOption {
	return func(h *harness) { fn(&h.opts) }
}

// withStore uses s instead of a new in-memory store.
func withStore(s storage.Backend) harnessOption {
	return func(h *harness) { h.store = s }
}

// withoutStart leaves the queue unstarted.
func withoutStart() harnessOption {
	return func(h *harness) { h.noStart = true }
}

func newHarness(t testing.TB, opts ...harnessOption) *harness {
	t.Helper()
	h := &harness{t: t, results: make(chan queue.Result, 20_000)}
	h.opts = testOptions()
	for _, o := range opts {
		o(h)
	}
	if h.store == nil {
		var now func() time.Time
		if h.clock != nil {
			now = h.clock.Now
		}
		// The queue's tests run on Badger, and on PostgreSQL too in make
		// test's second pass (testsuite.EnvStore).
		if testsuite.OnPostgres() {
			h.store = testsuite.OpenPostgres(t, now)
		} else {
			s, err := badger.Open(badger.Options{InMemory: true, Now: now})
			require.NoError(t, err)
			t.Cleanup(func() { assert.NoError(t, s.Close()) })
			h.store = s
		}
	}
	if h.clock != nil {
		h.opts.Clock = h.clock
	}
	h.opts.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	observe := h.opts.Observe
	h.opts.Observe = func(r queue.Result) {
		if observe != nil {
			observe(r)
		}
		h.results <- r
	}
	h.fixtures()
	q, err := queue.New(h.store, h.opts)
	require.NoError(t, err)
	h.q = q
	if !h.noStart {
		h.start()
	}
	return h
}

// start starts the queue; t's cleanup stops it.
func (h *harness) start() {
	h.t.Helper()
	require.NoError(h.t, h.q.Start(h.t.Context()))
	h.t.Cleanup(func() { assert.NoError(h.t, h.q.Stop(contextWithTimeout(h.t, 10*time.Second))) })
}

func (h *harness) fixtures() {
	t := h.t
	ctx := t.Context()
	h.partner = storage.Partner{Name: "Partner"}
	require.NoError(t, h.store.CreatePartner(ctx, &h.partner))
	h.org = storage.Organization{Name: "Clinic", PartnerID: h.partner.ID}
	require.NoError(t, h.store.CreateOrganization(ctx, &h.org))
	_, err := h.store.ValidateOrganization(ctx, h.org.ID)
	require.NoError(t, err)
	h.user = storage.User{OrgID: h.org.ID, Email: storage.NewID() + "@example.com", GivenName: "Ada", FamilyName: "L", Role: storage.RolePrescriber}
	require.NoError(t, h.store.CreateUser(ctx, &h.user))
	h.patient = storage.Patient{OrgID: h.org.ID, UserID: h.user.ID, PartnerPatientID: "PP-1"}
	require.NoError(t, h.store.CreatePatient(ctx, &h.patient))
}

// endpoint registers url for the partner, bypassing the operator API's
// URL check (the queue checks again at delivery).
func (h *harness) endpoint(url string) storage.WebhookEndpoint {
	h.t.Helper()
	e := storage.WebhookEndpoint{PartnerID: h.partner.ID, URL: url, Secret: storage.NewSecret()}
	require.NoError(h.t, h.store.CreateWebhookEndpoint(h.t.Context(), &e))
	return e
}

// prescribe creates a prescription and returns the id of its event. The
// store wakes the queue: nothing tells it.
func (h *harness) prescribe() string {
	h.t.Helper()
	rx := storage.Prescription{OrgID: h.org.ID, UserID: h.user.ID, PatientID: h.patient.ID,
		PrescriptionItem: storage.PrescriptionItem{ItemName: "Item", Quantity: "1"}}
	require.NoError(h.t, h.store.CreatePrescription(h.t.Context(), &rx))
	return h.eventFor(rx.SCID)
}

func (h *harness) eventFor(scid string) string {
	h.t.Helper()
	req := storage.PageRequest{Limit: 100}
	for {
		page, info, err := h.store.ListEvents(h.t.Context(), storage.EventFilter{OrganizationID: h.org.ID}, req)
		require.NoError(h.t, err)
		for _, e := range page {
			if scidOf(h.t, e.Payload) == scid {
				return e.ID
			}
		}
		require.True(h.t, info.HasNext, "no event for scid %s", scid)
		req.Cursor = info.LastKey
	}
}

func scidOf(t testing.TB, body []byte) string {
	t.Helper()
	var p struct {
		Data struct {
			SCID string `json:"scid"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal(body, &p))
	return p.Data.SCID
}

// next waits for the next recorded attempt. The wait is a guard against a
// hung test, not a sleep: it returns as soon as the attempt is recorded.
func (h *harness) next() queue.Result {
	h.t.Helper()
	select {
	case r := <-h.results:
		return r
	case <-time.After(20 * time.Second):
		h.t.Fatal("no attempt was recorded within 20s")
	}
	return queue.Result{}
}

// final waits until the event's delivery ends (delivered or failed) and
// returns the results of its attempts.
func (h *harness) final() []queue.Result {
	h.t.Helper()
	var out []queue.Result
	for {
		r := h.next()
		out = append(out, r)
		if r.Outcome != "retry" {
			return out
		}
	}
}

func (h *harness) event(id string) *storage.Event {
	h.t.Helper()
	e, err := h.store.GetEvent(h.t.Context(), id)
	require.NoError(h.t, err)
	return e
}

func (h *harness) jobs() (pending, leased []storage.Job) {
	h.t.Helper()
	pending, leased, err := h.store.ListJobs(h.t.Context())
	require.NoError(h.t, err)
	return pending, leased
}

// recorder is an endpoint that answers with answer and records requests.
type recorder struct {
	mu       sync.Mutex
	requests []recorded
	answer   func(n int, r *http.Request) int // n counts from 1
	server   *httptest.Server
}

type recorded struct {
	header http.Header
	body   []byte
}

func newRecorder(t testing.TB, answer func(n int, r *http.Request) int) *recorder {
	t.Helper()
	rec := &recorder{answer: answer}
	rec.server = httptest.NewServer(rec)
	t.Cleanup(rec.server.Close)
	return rec
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body := make([]byte, 0, 512)
	buf := make([]byte, 512)
	for {
		n, err := r.Body.Read(buf)
		body = append(body, buf[:n]...)
		if err != nil {
			break
		}
	}
	rec.mu.Lock()
	rec.requests = append(rec.requests, recorded{header: r.Header.Clone(), body: body})
	n := len(rec.requests)
	rec.mu.Unlock()
	status := http.StatusOK
	if rec.answer != nil {
		status = rec.answer(n, r)
	}
	w.WriteHeader(status)
}

func (rec *recorder) got() []recorded {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]recorded(nil), rec.requests...)
}

// contextWithTimeout is a context that ends after d or with t.
func contextWithTimeout(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), d)
	t.Cleanup(cancel)
	return ctx
}
