package storage_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage"
)

// hookWorld is a partner with one organization, a prescriber and a patient.
type hookWorld struct {
	s       *storage.Store
	partner storage.Partner
	org     storage.Organization
	user    storage.User
	patient storage.Patient
}

func newHookWorld(t testing.TB, s *storage.Store, validated bool) *hookWorld {
	t.Helper()
	ctx := t.Context()
	w := &hookWorld{s: s}
	w.partner = storage.Partner{Name: "Partner"}
	require.NoError(t, s.CreatePartner(ctx, &w.partner))
	w.org = storage.Organization{Name: "Clinic", PartnerID: w.partner.ID}
	require.NoError(t, s.CreateOrganization(ctx, &w.org))
	if validated {
		w.validate(t)
	}
	w.user = storage.User{OrgID: w.org.ID, Email: storage.NewID() + "@example.com", GivenName: "Ada", FamilyName: "L", Role: storage.RolePrescriber}
	require.NoError(t, s.CreateUser(ctx, &w.user))
	w.patient = storage.Patient{OrgID: w.org.ID, UserID: w.user.ID, PartnerPatientID: "PP-" + storage.NewID()[:8]}
	require.NoError(t, s.CreatePatient(ctx, &w.patient))
	return w
}

func (w *hookWorld) validate(t testing.TB) {
	t.Helper()
	o, err := w.s.ValidateOrganization(t.Context(), w.org.ID)
	require.NoError(t, err)
	w.org = *o
}

func (w *hookWorld) endpoint(t testing.TB, url string) storage.WebhookEndpoint {
	t.Helper()
	e := storage.WebhookEndpoint{PartnerID: w.partner.ID, URL: url, Secret: storage.NewSecret()}
	require.NoError(t, w.s.CreateWebhookEndpoint(t.Context(), &e))
	return e
}

// prescribe creates a prescription and returns it with its event.
func (w *hookWorld) prescribe(t testing.TB) (storage.Prescription, storage.Event) {
	t.Helper()
	rx := storage.Prescription{OrgID: w.org.ID, UserID: w.user.ID, PatientID: w.patient.ID, ItemName: "Item", Quantity: "1"}
	require.NoError(t, w.s.CreatePrescription(t.Context(), &rx))
	return rx, eventOf(t, w.s, w.org.ID, rx.SCID)
}

// eventOf finds the event whose payload names scid.
func eventOf(t testing.TB, s *storage.Store, orgID, scid string) storage.Event {
	t.Helper()
	var found []storage.Event
	for _, e := range allEvents(t, s, storage.EventFilter{OrganizationID: orgID}) {
		var p struct {
			Data struct {
				SCID string `json:"scid"`
			} `json:"data"`
		}
		require.NoError(t, json.Unmarshal(e.Payload, &p))
		if p.Data.SCID == scid {
			found = append(found, e)
		}
	}
	require.Len(t, found, 1, "one event per prescription")
	return found[0]
}

func allEvents(t testing.TB, s *storage.Store, f storage.EventFilter) []storage.Event {
	t.Helper()
	var out []storage.Event
	req := storage.PageRequest{Limit: 7}
	for {
		page, info, err := s.ListEvents(t.Context(), f, req)
		require.NoError(t, err)
		out = append(out, page...)
		if !info.HasNext {
			return out
		}
		req.Cursor = info.LastKey
	}
}

func jobs(t testing.TB, s *storage.Store) (pending, leased []storage.Job) {
	t.Helper()
	pending, leased, err := s.ListJobs(t.Context())
	require.NoError(t, err)
	return pending, leased
}

func TestPrescriptionEventSkippedUntilValidated(t *testing.T) {
	t.Parallel()
	s := openInMemory(t, storage.Options{Now: newClock().Now})
	w := newHookWorld(t, s, false)
	e1 := w.endpoint(t, "https://a.example/hook")

	_, ev := w.prescribe(t)
	assert.Equal(t, storage.EventSkipped, ev.Status)
	assert.Equal(t, storage.SkipNotValidated, ev.SkipReason)
	assert.Empty(t, ev.Targets)
	pending, leased := jobs(t, s)
	assert.Empty(t, pending, "nothing is queued before validate (spec 6.1)")
	assert.Empty(t, leased)

	w.validate(t)
	e2 := w.endpoint(t, "https://b.example/hook")
	_, ev = w.prescribe(t)
	assert.Equal(t, storage.EventPending, ev.Status)
	assert.Empty(t, ev.SkipReason)
	assert.ElementsMatch(t, []storage.EventTarget{{EndpointID: e1.ID, Status: storage.EventPending}, {EndpointID: e2.ID, Status: storage.EventPending}}, ev.Targets)
	pending, _ = jobs(t, s)
	require.Len(t, pending, 2, "one job per endpoint of the partner")
	for _, j := range pending {
		assert.Equal(t, ev.ID, j.EventID)
		assert.Equal(t, 0, j.Attempts)
		assert.Equal(t, 1, j.Round)
		assert.Equal(t, ev.CreatedAt, j.Due, "due at once")
	}
	assert.ElementsMatch(t, []string{e1.ID, e2.ID}, []string{pending[0].EndpointID, pending[1].EndpointID})

	// Another partner's endpoints get nothing.
	other := newHookWorld(t, s, true)
	_, ev = other.prescribe(t)
	assert.Equal(t, storage.EventSkipped, ev.Status)
	assert.Equal(t, storage.SkipNoEndpoints, ev.SkipReason)
	pending, _ = jobs(t, s)
	assert.Len(t, pending, 2)
}

func TestPrescriptionEventPayload(t *testing.T) {
	t.Parallel()
	s := openInMemory(t, storage.Options{Now: newClock().Now})
	w := newHookWorld(t, s, true)
	w.endpoint(t, "https://a.example/hook")
	rx, ev := w.prescribe(t)

	assert.Equal(t, storage.EventPrescriptionCreated, ev.Type)
	assert.Equal(t, w.org.ID, ev.OrganizationID)
	assert.Equal(t, w.partner.ID, ev.PartnerID)
	assert.Equal(t, 1, ev.Round)
	var got map[string]any
	require.NoError(t, json.Unmarshal(ev.Payload, &got))
	assert.Equal(t, map[string]any{
		"event_type":      "prescription.created",
		"event_id":        ev.ID,
		"timestamp":       ev.CreatedAt.Format("2006-01-02T15:04:05.000Z07:00"),
		"partner_id":      w.partner.ID,
		"organization_id": w.org.ID,
		"data": map[string]any{
			"patient_id":         w.patient.ID,
			"partner_patient_id": w.patient.PartnerPatientID,
			"user_id":            w.user.ID,
			"scid":               rx.SCID,
		},
	}, got, "exactly the envelope of spec 6.2")
	assert.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`, got["timestamp"])

	// Event ids are unique.
	_, ev2 := w.prescribe(t)
	assert.NotEqual(t, ev.ID, ev2.ID)
}

// TestPrescriptionEventAtomic checks that a prescription never exists
// without its event, nor an event without its prescription.
func TestPrescriptionEventAtomic(t *testing.T) {
	t.Parallel()
	s := openInMemory(t, storage.Options{Now: newClock().Now})
	w := newHookWorld(t, s, true)
	w.endpoint(t, "https://a.example/hook")
	rx, _ := w.prescribe(t)

	dup := storage.Prescription{OrgID: w.org.ID, UserID: w.user.ID, PatientID: w.patient.ID, SCID: rx.SCID}
	require.ErrorIs(t, s.CreatePrescription(t.Context(), &dup), storage.ErrAlreadyExists)
	missing := storage.Prescription{OrgID: w.org.ID, UserID: w.user.ID, PatientID: storage.NewID()}
	require.ErrorIs(t, s.CreatePrescription(t.Context(), &missing), storage.ErrNotFound)

	// A create that fails after its event was written in the transaction
	// (the prescription itself is refused as too large) leaves neither.
	huge := storage.Prescription{OrgID: w.org.ID, UserID: w.user.ID, PatientID: w.patient.ID, DoctorNotes: strings.Repeat("x", 300<<10)}
	require.ErrorIs(t, s.CreatePrescription(t.Context(), &huge), storage.ErrTooLarge)

	events := allEvents(t, s, storage.EventFilter{})
	assert.Len(t, events, 1, "failed creates wrote no event")
	pending, _ := jobs(t, s)
	assert.Len(t, pending, 1, "failed creates queued nothing")
	_, list, _, err := s.ListPrescriptions(t.Context(), w.org.ID, w.user.ID, w.patient.ID, storage.PageRequest{Limit: 50})
	require.NoError(t, err)
	assert.Len(t, list, 1, "failed creates stored no prescription")

	for range 5 {
		w.prescribe(t)
	}
	_, list, _, err = s.ListPrescriptions(t.Context(), w.org.ID, w.user.ID, w.patient.ID, storage.PageRequest{Limit: 50})
	require.NoError(t, err)
	events = allEvents(t, s, storage.EventFilter{})
	require.Len(t, events, len(list))
	for _, p := range list {
		eventOf(t, s, w.org.ID, p.SCID)
	}
}

func TestJobLifecycle(t *testing.T) {
	t.Parallel()
	s := openInMemory(t, storage.Options{Now: newClock().Now})
	ctx := t.Context()
	w := newHookWorld(t, s, true)
	a := w.endpoint(t, "https://a.example/hook")
	b := w.endpoint(t, "https://b.example/hook")
	_, ev := w.prescribe(t)
	t0 := ev.CreatedAt

	res, err := s.ClaimJobs(ctx, storage.ClaimRequest{Now: t0.Add(-time.Second), LeaseFor: time.Minute, Max: 10})
	require.NoError(t, err)
	assert.Empty(t, res.Jobs, "not due yet")
	assert.Equal(t, t0, res.NextDue)

	res, err = s.ClaimJobs(ctx, storage.ClaimRequest{Now: t0, LeaseFor: time.Minute, Max: 10})
	require.NoError(t, err)
	require.Len(t, res.Jobs, 2)
	assert.True(t, res.NextDue.IsZero(), "nothing left")
	byEndpoint := map[string]storage.ClaimedJob{}
	for _, j := range res.Jobs {
		byEndpoint[j.EndpointID] = j
		assert.Equal(t, ev.Payload, j.Payload, "the stored bytes are sent")
		require.NotNil(t, j.Endpoint)
		assert.Equal(t, j.EndpointID, j.Endpoint.ID)
		assert.NotEmpty(t, j.LeaseID)
		assert.Equal(t, t0.Add(time.Minute), j.LeasedUntil)
	}
	pending, leased := jobs(t, s)
	assert.Empty(t, pending)
	assert.Len(t, leased, 2)

	// A retry counts the attempt and requeues the job.
	ja := byEndpoint[a.ID]
	attempt := storage.Attempt{AttemptedAt: t0, EndpointID: a.ID, StatusCode: 503, Error: "HTTP 503", DurationMS: 12}
	got, err := s.RetryJob(ctx, &ja.Job, attempt, t0.Add(time.Second))
	require.NoError(t, err)
	assert.Equal(t, storage.EventPending, got.Status)
	assert.Equal(t, []storage.Attempt{attempt}, got.Attempts)
	_, err = s.RetryJob(ctx, &ja.Job, attempt, t0.Add(time.Second))
	assert.ErrorIs(t, err, storage.ErrLeaseLost, "a lease ends once")
	pending, leased = jobs(t, s)
	require.Len(t, pending, 1)
	assert.Equal(t, 1, pending[0].Attempts)
	assert.Equal(t, t0.Add(time.Second), pending[0].Due)
	assert.Empty(t, pending[0].LeaseID)
	assert.Len(t, leased, 1)

	// b delivered: the event stays pending while a is.
	jb := byEndpoint[b.ID]
	wrong := jb.Job
	wrong.LeaseID = "someone-else"
	_, err = s.CompleteJob(ctx, &wrong, storage.Attempt{EndpointID: b.ID})
	assert.ErrorIs(t, err, storage.ErrLeaseLost)
	got, err = s.CompleteJob(ctx, &jb.Job, storage.Attempt{AttemptedAt: t0, EndpointID: b.ID, StatusCode: 200})
	require.NoError(t, err)
	assert.Equal(t, storage.EventPending, got.Status)

	res, err = s.ClaimJobs(ctx, storage.ClaimRequest{Now: t0.Add(time.Second), LeaseFor: time.Minute, Max: 10})
	require.NoError(t, err)
	require.Len(t, res.Jobs, 1)
	assert.Equal(t, 1, res.Jobs[0].Attempts)
	got, err = s.ArchiveJob(ctx, &res.Jobs[0].Job, storage.Attempt{AttemptedAt: t0.Add(time.Second), EndpointID: a.ID, StatusCode: 410, Error: "HTTP 410"})
	require.NoError(t, err)
	assert.Equal(t, storage.EventFailed, got.Status, "one endpoint failed permanently")
	assert.ElementsMatch(t, []storage.EventTarget{{EndpointID: a.ID, Status: storage.EventFailed}, {EndpointID: b.ID, Status: storage.EventDelivered}}, got.Targets)
	assert.Len(t, got.Attempts, 3)
	pending, leased = jobs(t, s)
	assert.Empty(t, pending)
	assert.Empty(t, leased)

	stored, err := s.GetEvent(ctx, ev.ID)
	require.NoError(t, err)
	assert.Equal(t, got, stored)
	// The status index moved with the status.
	assert.Equal(t, []string{ev.ID}, eventIDs(allEvents(t, s, storage.EventFilter{Status: storage.EventFailed})))
	assert.Empty(t, allEvents(t, s, storage.EventFilter{Status: storage.EventPending}))
	assert.Equal(t, []string{ev.ID}, eventIDs(allEvents(t, s, storage.EventFilter{OrganizationID: w.org.ID, Status: storage.EventFailed})))
}

func TestEventDeliveredWhenEveryEndpointIs(t *testing.T) {
	t.Parallel()
	s := openInMemory(t, storage.Options{Now: newClock().Now})
	ctx := t.Context()
	w := newHookWorld(t, s, true)
	w.endpoint(t, "https://a.example/hook")
	w.endpoint(t, "https://b.example/hook")
	_, ev := w.prescribe(t)
	res, err := s.ClaimJobs(ctx, storage.ClaimRequest{Now: ev.CreatedAt, LeaseFor: time.Minute, Max: 10})
	require.NoError(t, err)
	require.Len(t, res.Jobs, 2)
	got, err := s.CompleteJob(ctx, &res.Jobs[0].Job, storage.Attempt{EndpointID: res.Jobs[0].EndpointID, StatusCode: 200})
	require.NoError(t, err)
	assert.Equal(t, storage.EventPending, got.Status)
	got, err = s.CompleteJob(ctx, &res.Jobs[1].Job, storage.Attempt{EndpointID: res.Jobs[1].EndpointID, StatusCode: 204})
	require.NoError(t, err)
	assert.Equal(t, storage.EventDelivered, got.Status)
}

func TestReleaseAndReclaimJobs(t *testing.T) {
	t.Parallel()
	s := openInMemory(t, storage.Options{Now: newClock().Now})
	ctx := t.Context()
	w := newHookWorld(t, s, true)
	w.endpoint(t, "https://a.example/hook")
	_, ev := w.prescribe(t)
	_, ev2 := w.prescribe(t)
	t0 := ev.CreatedAt

	res, err := s.ClaimJobs(ctx, storage.ClaimRequest{Now: ev2.CreatedAt, LeaseFor: time.Minute, Max: 10})
	require.NoError(t, err)
	require.Len(t, res.Jobs, 2)

	// Release: back to pending, due as before, nothing counted.
	require.NoError(t, s.ReleaseJobs(ctx, []storage.Job{res.Jobs[0].Job}))
	pending, leased := jobs(t, s)
	require.Len(t, pending, 1)
	require.Len(t, leased, 1)
	assert.Equal(t, res.Jobs[0].ID, pending[0].ID)
	assert.Equal(t, res.Jobs[0].Due, pending[0].Due)
	assert.Equal(t, 0, pending[0].Attempts)
	_, err = s.CompleteJob(ctx, &res.Jobs[0].Job, storage.Attempt{})
	assert.ErrorIs(t, err, storage.ErrLeaseLost, "a released lease is gone")
	require.NoError(t, s.ReleaseJobs(ctx, []storage.Job{res.Jobs[0].Job}), "releasing twice is harmless")

	// Reclaim: only expired leases, due at the time given.
	n, err := s.ReclaimJobs(ctx, t0.Add(59*time.Second), t0.Add(59*time.Second))
	require.NoError(t, err)
	assert.Equal(t, 0, n)
	n, err = s.ReclaimJobs(ctx, ev2.CreatedAt.Add(time.Minute), t0.Add(2*time.Minute))
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	pending, leased = jobs(t, s)
	assert.Len(t, pending, 2)
	assert.Empty(t, leased)
	for _, j := range pending {
		assert.Equal(t, 0, j.Attempts, "a reclaimed attempt is not counted")
	}
	_, err = s.CompleteJob(ctx, &res.Jobs[1].Job, storage.Attempt{})
	assert.ErrorIs(t, err, storage.ErrLeaseLost, "the dead worker's result is dropped")
	got, err := s.GetEvent(ctx, ev2.ID)
	require.NoError(t, err)
	assert.Empty(t, got.Attempts)
}

func TestClaimJobsTakesTurns(t *testing.T) {
	t.Parallel()
	s := openInMemory(t, storage.Options{Now: newClock().Now})
	ctx := t.Context()
	busy := newHookWorld(t, s, true)
	a := busy.endpoint(t, "https://busy.example/hook")
	quiet := newHookWorld(t, s, true)
	b := quiet.endpoint(t, "https://quiet.example/hook")
	for range 10 {
		busy.prescribe(t)
	}
	_, last := quiet.prescribe(t)
	now := last.CreatedAt

	count := func(js []storage.ClaimedJob) map[string]int {
		m := map[string]int{}
		for _, j := range js {
			m[j.EndpointID]++
		}
		return m
	}
	// Max 2: one each, although a's ten jobs are older.
	res, err := s.ClaimJobs(ctx, storage.ClaimRequest{Now: now, LeaseFor: time.Minute, Max: 2})
	require.NoError(t, err)
	assert.Equal(t, map[string]int{a.ID: 1, b.ID: 1}, count(res.Jobs))
	assert.Equal(t, now.Add(-time.Hour).Before(res.NextDue), true)

	// Allow caps one endpoint's share.
	res, err = s.ClaimJobs(ctx, storage.ClaimRequest{Now: now, LeaseFor: time.Minute, Max: 8,
		Allow: func(id string) int { return map[string]int{a.ID: 3}[id] }})
	require.NoError(t, err)
	assert.Equal(t, map[string]int{a.ID: 3}, count(res.Jobs))
	assert.True(t, res.NextDue.IsZero(), "a may take no more and b has nothing")

	// Jobs of one endpoint come in due order.
	pending, _ := jobs(t, s)
	var dues []time.Time
	for _, j := range pending {
		dues = append(dues, j.Due)
	}
	assert.True(t, slices.IsSortedFunc(dues, func(x, y time.Time) int { return x.Compare(y) }))

	// When Max is smaller than the endpoints, After rotates who goes first.
	quiet.prescribe(t)
	first, err := s.ClaimJobs(ctx, storage.ClaimRequest{Now: now.Add(time.Hour), LeaseFor: time.Minute, Max: 1})
	require.NoError(t, err)
	require.Len(t, first.Jobs, 1)
	second, err := s.ClaimJobs(ctx, storage.ClaimRequest{Now: now.Add(time.Hour), LeaseFor: time.Minute, Max: 1, After: first.Jobs[0].EndpointID})
	require.NoError(t, err)
	require.Len(t, second.Jobs, 1)
	assert.NotEqual(t, first.Jobs[0].EndpointID, second.Jobs[0].EndpointID)
	assert.Equal(t, now.Add(time.Hour), second.NextDue, "more is due but Max was reached")
}

// TestClaimSince checks the bounded claim: it sees jobs due from Since on,
// also after many claimed jobs left deletion markers before them.
func TestClaimSince(t *testing.T) {
	t.Parallel()
	s := openInMemory(t, storage.Options{Now: newClock().Now})
	ctx := t.Context()
	w := newHookWorld(t, s, true)
	w.endpoint(t, "https://a.example/hook")
	var last storage.Event
	for range 50 {
		_, last = w.prescribe(t)
	}
	res, err := s.ClaimJobs(ctx, storage.ClaimRequest{Now: last.CreatedAt, LeaseFor: time.Minute, Max: 40})
	require.NoError(t, err)
	require.Len(t, res.Jobs, 40)
	for _, j := range res.Jobs {
		_, err := s.CompleteJob(ctx, &j.Job, storage.Attempt{EndpointID: j.EndpointID, StatusCode: 200})
		require.NoError(t, err)
	}
	pending, _ := jobs(t, s)
	require.Len(t, pending, 10)
	since := pending[5].Due

	from := func(string) time.Time { return since }
	res, err = s.ClaimJobs(ctx, storage.ClaimRequest{Now: last.CreatedAt, LeaseFor: time.Minute, Max: 100, Since: from})
	require.NoError(t, err)
	require.Len(t, res.Jobs, 5, "jobs due before Since are left for a full claim")
	assert.Equal(t, pending[5].ID, res.Jobs[0].ID)
	assert.Equal(t, map[string]time.Time{pending[0].EndpointID: {}}, res.Pending, "nothing left from Since on")
	res, err = s.ClaimJobs(ctx, storage.ClaimRequest{Now: last.CreatedAt, LeaseFor: time.Minute, Max: 2})
	require.NoError(t, err)
	assert.Len(t, res.Jobs, 2, "a full claim sees the rest")
	assert.Equal(t, map[string]time.Time{pending[0].EndpointID: pending[2].Due}, res.Pending, "the earliest job left")

	_, next := w.prescribe(t)
	res, err = s.ClaimJobs(ctx, storage.ClaimRequest{Now: next.CreatedAt.Add(-time.Nanosecond), LeaseFor: time.Minute, Max: 100, Since: from})
	require.NoError(t, err)
	assert.Empty(t, res.Jobs)
	assert.Equal(t, next.CreatedAt, res.NextDue)
	assert.Equal(t, next.CreatedAt, res.Pending[pending[0].EndpointID], "a job not yet due is pending too")
}

func TestClaimDeletedEndpoint(t *testing.T) {
	t.Parallel()
	s := openInMemory(t, storage.Options{Now: newClock().Now})
	w := newHookWorld(t, s, true)
	e := w.endpoint(t, "https://a.example/hook")
	_, ev := w.prescribe(t)
	require.NoError(t, s.DeleteWebhookEndpoint(t.Context(), e.ID))
	res, err := s.ClaimJobs(t.Context(), storage.ClaimRequest{Now: ev.CreatedAt, LeaseFor: time.Minute, Max: 1,
		Since: func(string) time.Time { return time.Time{} }})
	require.NoError(t, err)
	assert.Empty(t, res.Jobs, "a bounded claim looks only at existing endpoints")
	res, err = s.ClaimJobs(t.Context(), storage.ClaimRequest{Now: ev.CreatedAt, LeaseFor: time.Minute, Max: 1})
	require.NoError(t, err)
	require.Len(t, res.Jobs, 1, "a full claim finds the queued job, to be recorded as failed")
	assert.Nil(t, res.Jobs[0].Endpoint)
	assert.Equal(t, ev.Payload, res.Jobs[0].Payload)
}

func TestReplayEvent(t *testing.T) {
	t.Parallel()
	s := openInMemory(t, storage.Options{Now: newClock().Now})
	ctx := t.Context()
	w := newHookWorld(t, s, false)
	_, skipped := w.prescribe(t)
	_, err := s.ReplayEvent(ctx, skipped.ID)
	assert.ErrorIs(t, err, storage.ErrNotValidated)
	w.validate(t)
	_, err = s.ReplayEvent(ctx, skipped.ID)
	assert.ErrorIs(t, err, storage.ErrNoEndpoints)
	_, err = s.ReplayEvent(ctx, storage.NewID())
	assert.ErrorIs(t, err, storage.ErrNotFound)

	e := w.endpoint(t, "https://a.example/hook")
	_, ev := w.prescribe(t)
	_, err = s.ReplayEvent(ctx, ev.ID)
	assert.ErrorIs(t, err, storage.ErrEventPending)
	res, err := s.ClaimJobs(ctx, storage.ClaimRequest{Now: ev.CreatedAt, LeaseFor: time.Minute, Max: 1})
	require.NoError(t, err)
	require.Len(t, res.Jobs, 1)
	first := storage.Attempt{AttemptedAt: ev.CreatedAt, EndpointID: e.ID, StatusCode: 200}
	_, err = s.CompleteJob(ctx, &res.Jobs[0].Job, first)
	require.NoError(t, err)

	replayed, err := s.ReplayEvent(ctx, ev.ID)
	require.NoError(t, err)
	assert.Equal(t, ev.ID, replayed.ID, "the same event id")
	assert.Equal(t, ev.Payload, replayed.Payload, "the same body")
	assert.Equal(t, storage.EventPending, replayed.Status)
	assert.Equal(t, 2, replayed.Round)
	assert.Equal(t, []storage.Attempt{first}, replayed.Attempts, "earlier attempts are kept")
	pending, _ := jobs(t, s)
	require.Len(t, pending, 1)
	assert.Equal(t, 2, pending[0].Round)
	assert.Equal(t, 0, pending[0].Attempts, "a fresh round of attempts")
	assert.NotEqual(t, res.Jobs[0].ID, pending[0].ID)

	// The skipped event can be replayed now.
	replayed, err = s.ReplayEvent(ctx, skipped.ID)
	require.NoError(t, err)
	assert.Equal(t, storage.EventPending, replayed.Status)
	assert.Empty(t, replayed.SkipReason)
	assert.Equal(t, []string{skipped.ID, ev.ID}, eventIDs(allEvents(t, s, storage.EventFilter{Status: storage.EventPending})))
	assert.Empty(t, allEvents(t, s, storage.EventFilter{Status: storage.EventSkipped}))
}

func TestListEvents(t *testing.T) {
	t.Parallel()
	s := openInMemory(t, storage.Options{Now: newClock().Now})
	ctx := t.Context()
	one := newHookWorld(t, s, true)
	one.endpoint(t, "https://one.example")
	two := newHookWorld(t, s, false)
	var oneIDs, twoIDs, all []string
	for i := range 12 {
		if i%3 == 0 {
			_, ev := two.prescribe(t)
			twoIDs = append(twoIDs, ev.ID)
			all = append(all, ev.ID)
			continue
		}
		_, ev := one.prescribe(t)
		oneIDs = append(oneIDs, ev.ID)
		all = append(all, ev.ID)
	}
	tests := []struct {
		name   string
		filter storage.EventFilter
		want   []string
	}{
		{name: "all, oldest first", filter: storage.EventFilter{}, want: all},
		{name: "organization", filter: storage.EventFilter{OrganizationID: one.org.ID}, want: oneIDs},
		{name: "status", filter: storage.EventFilter{Status: storage.EventSkipped}, want: twoIDs},
		{name: "both", filter: storage.EventFilter{OrganizationID: one.org.ID, Status: storage.EventPending}, want: oneIDs},
		{name: "both, none", filter: storage.EventFilter{OrganizationID: one.org.ID, Status: storage.EventSkipped}},
		{name: "unknown organization", filter: storage.EventFilter{OrganizationID: storage.NewID()}},
		{name: "unusable organization id", filter: storage.EventFilter{OrganizationID: "a/b"}},
		{name: "unknown status", filter: storage.EventFilter{Status: "lost"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, eventIDs(allEvents(t, s, tt.filter)))
		})
	}

	page, info, err := s.ListEvents(ctx, storage.EventFilter{OrganizationID: one.org.ID}, storage.PageRequest{Limit: 3})
	require.NoError(t, err)
	assert.Equal(t, oneIDs[:3], eventIDs(page))
	assert.True(t, info.HasNext)
	_, _, err = s.ListEvents(ctx, storage.EventFilter{OrganizationID: two.org.ID}, storage.PageRequest{Limit: 3, Cursor: info.LastKey})
	assert.ErrorIs(t, err, storage.ErrBadCursor, "a cursor works only for its own filter")
	_, _, err = s.ListEvents(ctx, storage.EventFilter{}, storage.PageRequest{Limit: 3, Cursor: info.LastKey})
	assert.ErrorIs(t, err, storage.ErrBadCursor)
}

// TestJobsSurviveReopen is the queue's persistence check: jobs, pending and
// leased, are on disk when the store is opened again.
func TestJobsSurviveReopen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := storage.Open(storage.Options{Dir: dir, Now: newClock().Now})
	require.NoError(t, err)
	w := newHookWorld(t, s, true)
	w.endpoint(t, "https://a.example/hook")
	var events []storage.Event
	for range 3 {
		_, ev := w.prescribe(t)
		events = append(events, ev)
	}
	res, err := s.ClaimJobs(t.Context(), storage.ClaimRequest{Now: events[0].CreatedAt, LeaseFor: time.Minute, Max: 1})
	require.NoError(t, err)
	require.Len(t, res.Jobs, 1)
	wantPending, wantLeased := jobs(t, s)
	require.Len(t, wantPending, 2)
	require.Len(t, wantLeased, 1)
	require.NoError(t, s.Close())

	s, err = storage.Open(storage.Options{Dir: dir})
	require.NoError(t, err)
	defer func() { assert.NoError(t, s.Close()) }()
	pending, leased := jobs(t, s)
	assert.Equal(t, wantPending, pending)
	assert.Equal(t, wantLeased, leased)
	for _, ev := range events {
		got, err := s.GetEvent(t.Context(), ev.ID)
		require.NoError(t, err)
		assert.Equal(t, ev.Payload, got.Payload)
	}
}

func eventIDs(es []storage.Event) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.ID)
	}
	return out
}
