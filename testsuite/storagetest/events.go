package storagetest

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage"
)

// eventTests cover the event log: what a prescription announces, when an
// event is skipped, the filters and cursors of ListEvents, and replay.
var eventTests = []test{
	{name: "EventSkippedUntilValidated", run: testEventSkippedUntilValidated},
	{name: "EventTargetsFollowEndpoints", run: testEventTargetsFollowEndpoints},
	{name: "EventPayload", run: testEventPayload},
	{name: "EventAtomicWithPrescription", run: testEventAtomic},
	{name: "ListEvents", run: testListEvents},
	{name: "ListEventsByPartner", run: testListEventsByPartner},
	{name: "ReplayEvent", run: testReplayEvent},
	{name: "CreateTestEvent", run: testCreateTestEvent},
	{name: "PurgeEvents", run: testPurgeEvents},
	{name: "Count", run: testCount},
	{name: "CreatePrescriptionsConcurrently", run: testCreatePrescriptionsConcurrently},
}

// hookWorld is a partner with one organization, a prescriber and a patient.
type hookWorld struct {
	e       *env
	partner storage.Partner
	org     storage.Organization
	user    storage.User
	patient storage.Patient
}

func newHookWorld(t testing.TB, e *env, validated bool) *hookWorld {
	t.Helper()
	p := storage.Partner{Name: "Partner"}
	require.NoError(t, e.s.CreatePartner(t.Context(), &p))
	return newHookWorldOf(t, e, p, validated)
}

// newHookWorldOf is newHookWorld with an organization of a partner that
// exists already.
func newHookWorldOf(t testing.TB, e *env, p storage.Partner, validated bool) *hookWorld {
	t.Helper()
	ctx := t.Context()
	w := &hookWorld{e: e, partner: p}
	w.org = storage.Organization{Name: "Clinic", PartnerID: w.partner.ID}
	require.NoError(t, e.s.CreateOrganization(ctx, &w.org))
	if validated {
		w.validate(t)
	}
	w.user = storage.User{OrgID: w.org.ID, Email: storage.NewID() + "@example.com", GivenName: "Ada", FamilyName: "L", Role: storage.RolePrescriber}
	require.NoError(t, e.s.CreateUser(ctx, &w.user))
	w.patient = storage.Patient{OrgID: w.org.ID, UserID: w.user.ID, PartnerPatientID: "PP-" + storage.NewID()[:8]}
	require.NoError(t, e.s.CreatePatient(ctx, &w.patient))
	return w
}

func (w *hookWorld) validate(t testing.TB) {
	t.Helper()
	o, err := w.e.s.ValidateOrganization(t.Context(), w.org.ID)
	require.NoError(t, err)
	w.org = *o
}

func (w *hookWorld) endpoint(t testing.TB, url string) storage.WebhookEndpoint {
	t.Helper()
	ep := storage.WebhookEndpoint{PartnerID: w.partner.ID, URL: url, Secret: storage.NewSecret()}
	require.NoError(t, w.e.s.CreateWebhookEndpoint(t.Context(), &ep))
	return ep
}

// prescribe creates a prescription and returns it with its event.
func (w *hookWorld) prescribe(t testing.TB) (storage.Prescription, storage.Event) {
	t.Helper()
	rx := newPrescription(&w.patient, "Item")
	require.NoError(t, w.e.s.CreatePrescription(t.Context(), &rx))
	ev := eventOf(t, w.e.s, w.org.ID, rx.SCID)
	require.Equal(t, ev.Status, rx.EventStatus, "CreatePrescription reports its event's status")
	return rx, ev
}

// eventOf finds the one event whose payload names scid.
func eventOf(t testing.TB, s storage.Store, orgID, scid string) storage.Event {
	t.Helper()
	var found []storage.Event
	for _, ev := range allEvents(t, s, storage.EventFilter{OrganizationID: orgID}) {
		var p struct {
			Data struct {
				SCID string `json:"scid"`
			} `json:"data"`
		}
		require.NoError(t, json.Unmarshal(ev.Payload, &p))
		if p.Data.SCID == scid {
			found = append(found, ev)
		}
	}
	require.Len(t, found, 1, "one event per prescription")
	return found[0]
}

func allEvents(t testing.TB, s storage.Store, f storage.EventFilter) []storage.Event {
	t.Helper()
	return walk(t, 7, eventPages(t, s, f), nil)
}

func eventIDs(es []storage.Event) []string {
	out := []string{}
	for _, ev := range es {
		out = append(out, ev.ID)
	}
	return out
}

// jobs reads the whole queue.
func jobs(t testing.TB, q storage.JobStore) (pending, leased []storage.Job) {
	t.Helper()
	pending, leased, err := q.ListJobs(t.Context())
	require.NoError(t, err)
	return pending, leased
}

func testEventSkippedUntilValidated(t *testing.T, e *env) {
	w := newHookWorld(t, e, false)
	e1 := w.endpoint(t, "https://a.example/hook")

	_, ev := w.prescribe(t)
	require.Equal(t, storage.EventSkipped, ev.Status)
	require.Equal(t, storage.SkipNotValidated, ev.SkipReason)
	require.Empty(t, ev.Targets)
	pending, leased := jobs(t, e.q)
	require.Empty(t, pending, "nothing is queued before validate (spec 6.1)")
	require.Empty(t, leased)

	w.validate(t)
	e2 := w.endpoint(t, "https://b.example/hook")
	_, ev = w.prescribe(t)
	require.Equal(t, storage.EventPending, ev.Status)
	require.Empty(t, ev.SkipReason)
	require.ElementsMatch(t, []storage.EventTarget{{EndpointID: e1.ID, Status: storage.EventPending}, {EndpointID: e2.ID, Status: storage.EventPending}}, ev.Targets)
	pending, _ = jobs(t, e.q)
	require.Len(t, pending, 2, "one job per endpoint of the partner")
	for _, j := range pending {
		require.Equal(t, ev.ID, j.EventID)
		require.Equal(t, 0, j.Attempts)
		require.Equal(t, 1, j.Round)
		require.Equal(t, ev.CreatedAt, j.Due, "due at once")
		require.Empty(t, j.LeaseID)
		require.Empty(t, j.Owner)
	}
	require.ElementsMatch(t, []string{e1.ID, e2.ID}, []string{pending[0].EndpointID, pending[1].EndpointID})

	// Another partner's endpoints get nothing.
	other := newHookWorld(t, e, true)
	_, ev = other.prescribe(t)
	require.Equal(t, storage.EventSkipped, ev.Status)
	require.Equal(t, storage.SkipNoEndpoints, ev.SkipReason)
	pending, _ = jobs(t, e.q)
	require.Len(t, pending, 2)
}

// testEventTargetsFollowEndpoints: each create targets the partner's
// endpoints as they are when it commits, however many creates came before
// with other endpoints (a store may remember the endpoints between creates),
// and another partner's endpoints never count.
func testEventTargetsFollowEndpoints(t *testing.T, e *env) {
	w := newHookWorld(t, e, true)
	other := newHookWorld(t, e, true)
	targets := func() []string {
		t.Helper()
		_, ev := w.prescribe(t)
		ids := []string{}
		for _, tg := range ev.Targets {
			ids = append(ids, tg.EndpointID)
		}
		return ids
	}
	a := w.endpoint(t, "https://a.example/hook")
	require.Equal(t, []string{a.ID}, targets())
	require.Equal(t, []string{a.ID}, targets(), "again, with nothing changed")
	b := w.endpoint(t, "https://b.example/hook")
	require.ElementsMatch(t, []string{a.ID, b.ID}, targets(), "an endpoint registered since")
	other.endpoint(t, "https://c.example/hook")
	require.ElementsMatch(t, []string{a.ID, b.ID}, targets(), "another partner's endpoint")
	require.NoError(t, e.s.DeleteWebhookEndpoint(t.Context(), a.ID))
	require.Equal(t, []string{b.ID}, targets(), "an endpoint deleted since")
	require.NoError(t, e.s.DeleteWebhookEndpoint(t.Context(), b.ID))
	_, ev := w.prescribe(t)
	require.Equal(t, storage.EventSkipped, ev.Status, "no endpoint left")
	require.Equal(t, storage.SkipNoEndpoints, ev.SkipReason)
	c := w.endpoint(t, "https://a.example/hook")
	require.Equal(t, []string{c.ID}, targets(), "registered again")
}

func testEventPayload(t *testing.T, e *env) {
	w := newHookWorld(t, e, true)
	w.endpoint(t, "https://a.example/hook")
	rx, ev := w.prescribe(t)

	require.Equal(t, storage.EventPrescriptionCreated, ev.Type)
	require.Equal(t, w.org.ID, ev.OrganizationID)
	require.Equal(t, w.partner.ID, ev.PartnerID)
	require.Equal(t, 1, ev.Round)
	var got map[string]any
	require.NoError(t, json.Unmarshal(ev.Payload, &got))
	require.Equal(t, map[string]any{
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
	require.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`, got["timestamp"])
	require.True(t, strings.HasPrefix(string(ev.Payload), `{"event_type":"prescription.created","event_id":`),
		"the members in the spec's order, as stored and signed: %s", ev.Payload)

	// Event ids are unique.
	_, ev2 := w.prescribe(t)
	require.NotEqual(t, ev.ID, ev2.ID)
}

// testEventAtomic checks that a prescription never exists without its
// event, nor an event without its prescription.
func testEventAtomic(t *testing.T, e *env) {
	w := newHookWorld(t, e, true)
	w.endpoint(t, "https://a.example/hook")
	rx, _ := w.prescribe(t)

	dup := storage.Prescription{OrgID: w.org.ID, UserID: w.user.ID, PatientID: w.patient.ID, SCID: rx.SCID}
	require.ErrorIs(t, e.s.CreatePrescription(t.Context(), &dup), storage.ErrAlreadyExists)
	missing := storage.Prescription{OrgID: w.org.ID, UserID: w.user.ID, PatientID: storage.NewID()}
	require.ErrorIs(t, e.s.CreatePrescription(t.Context(), &missing), storage.ErrNotFound)

	// A create that fails after its event was written in the transaction
	// (the prescription itself is refused as too large) leaves neither.
	huge := newPrescription(&w.patient, "Huge")
	huge.DoctorNotes = strings.Repeat("x", storage.MaxRecordBytes+1)
	require.ErrorIs(t, e.s.CreatePrescription(t.Context(), &huge), storage.ErrTooLarge)

	require.Len(t, allEvents(t, e.s, storage.EventFilter{}), 1, "failed creates wrote no event")
	pending, _ := jobs(t, e.q)
	require.Len(t, pending, 1, "failed creates queued nothing")
	list := walk(t, 50, prescriptionPages(t, e.s, &w.patient), nil)
	require.Len(t, list, 1, "failed creates stored no prescription")

	for range 5 {
		w.prescribe(t)
	}
	list = walk(t, 50, prescriptionPages(t, e.s, &w.patient), nil)
	require.Len(t, allEvents(t, e.s, storage.EventFilter{}), len(list))
	for _, p := range list {
		eventOf(t, e.s, w.org.ID, p.SCID)
	}
}

func testListEvents(t *testing.T, e *env) {
	ctx := t.Context()
	one := newHookWorld(t, e, true)
	one.endpoint(t, "https://one.example")
	two := newHookWorld(t, e, false)
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
		{name: "both, none", filter: storage.EventFilter{OrganizationID: one.org.ID, Status: storage.EventSkipped}, want: []string{}},
		{name: "unknown organization", filter: storage.EventFilter{OrganizationID: storage.NewID()}, want: []string{}},
		{name: "unusable organization id", filter: storage.EventFilter{OrganizationID: "a/b"}, want: []string{}},
		{name: "unknown status", filter: storage.EventFilter{Status: "lost"}, want: []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, limit := range []int{1, 5, 100} {
				require.Equal(t, tt.want, eventIDs(walk(t, limit, eventPages(t, e.s, tt.filter), nil)), "limit %d", limit)
			}
		})
	}

	page, info, err := e.s.ListEvents(ctx, storage.EventFilter{OrganizationID: one.org.ID}, storage.PageRequest{Limit: 3})
	require.NoError(t, err)
	require.Equal(t, oneIDs[:3], eventIDs(page))
	require.True(t, info.HasNext)
	_, _, err = e.s.ListEvents(ctx, storage.EventFilter{OrganizationID: two.org.ID}, storage.PageRequest{Limit: 3, Cursor: info.LastKey})
	require.ErrorIs(t, err, storage.ErrBadCursor, "a cursor works only for its own filter")
	_, _, err = e.s.ListEvents(ctx, storage.EventFilter{}, storage.PageRequest{Limit: 3, Cursor: info.LastKey})
	require.ErrorIs(t, err, storage.ErrBadCursor)
	_, _, err = e.s.ListEvents(ctx, storage.EventFilter{OrganizationID: one.org.ID, Status: storage.EventPending}, storage.PageRequest{Limit: 3, Cursor: info.LastKey})
	require.ErrorIs(t, err, storage.ErrBadCursor)

	got, err := e.s.GetEvent(ctx, oneIDs[0])
	require.NoError(t, err)
	require.Equal(t, page[0], *got, "GetEvent and ListEvents agree")
	_, err = e.s.GetEvent(ctx, storage.NewID())
	require.ErrorIs(t, err, storage.ErrNotFound)
	_, err = e.s.GetEvent(ctx, "a/b")
	require.ErrorIs(t, err, storage.ErrNotFound)
}

// testListEventsByPartner: EventFilter.PartnerID lists that partner's
// events only, across its organizations and with the other filters, with
// pages whose count, offset and hasNext count its events alone (walk
// checks each page); another partner's organization lists nothing; the
// index follows status changes and purges; cursors are bound to the
// partner.
func testListEventsByPartner(t *testing.T, e *env) {
	ctx := t.Context()
	one := newHookWorld(t, e, true)
	one.endpoint(t, "https://one.example")
	oneB := newHookWorldOf(t, e, one.partner, false) // same partner, not validated: skipped
	two := newHookWorld(t, e, false)
	var onePending, oneSkipped, oneAll, twoIDs []string
	for i := range 15 {
		switch i % 3 {
		case 0:
			_, ev := two.prescribe(t)
			twoIDs = append(twoIDs, ev.ID)
		case 1:
			_, ev := one.prescribe(t)
			onePending = append(onePending, ev.ID)
			oneAll = append(oneAll, ev.ID)
		default:
			_, ev := oneB.prescribe(t)
			oneSkipped = append(oneSkipped, ev.ID)
			oneAll = append(oneAll, ev.ID)
		}
	}
	p1, p2 := one.partner.ID, two.partner.ID
	check := func(t *testing.T, f storage.EventFilter, want []string) {
		t.Helper()
		for _, limit := range []int{1, 2, 3, 100} {
			got := walk(t, limit, eventPages(t, e.s, f), nil)
			require.Equal(t, want, eventIDs(got), "limit %d", limit)
			for _, ev := range got {
				require.Equal(t, f.PartnerID, ev.PartnerID)
			}
		}
	}
	for _, tt := range []struct {
		name   string
		filter storage.EventFilter
		want   []string
	}{
		{"partner, across its organizations", storage.EventFilter{PartnerID: p1}, oneAll},
		{"the other partner", storage.EventFilter{PartnerID: p2}, twoIDs},
		{"partner and status", storage.EventFilter{PartnerID: p1, Status: storage.EventSkipped}, oneSkipped},
		{"partner and the other status", storage.EventFilter{PartnerID: p1, Status: storage.EventPending}, onePending},
		{"partner and its organization", storage.EventFilter{PartnerID: p1, OrganizationID: oneB.org.ID}, oneSkipped},
		{"partner, organization and status", storage.EventFilter{PartnerID: p1, OrganizationID: one.org.ID, Status: storage.EventPending}, onePending},
		{"another partner's organization", storage.EventFilter{PartnerID: p1, OrganizationID: two.org.ID}, []string{}},
		{"another partner's organization and status", storage.EventFilter{PartnerID: p1, OrganizationID: two.org.ID, Status: storage.EventSkipped}, []string{}},
		{"unknown partner", storage.EventFilter{PartnerID: storage.NewID()}, []string{}},
		{"unusable partner id", storage.EventFilter{PartnerID: "a/b"}, []string{}},
	} {
		t.Run(tt.name, func(t *testing.T) { check(t, tt.filter, tt.want) })
	}

	// Cursors are bound to the partner.
	_, info, err := e.s.ListEvents(ctx, storage.EventFilter{PartnerID: p1}, storage.PageRequest{Limit: 2})
	require.NoError(t, err)
	require.True(t, info.HasNext)
	for _, f := range []storage.EventFilter{{}, {PartnerID: p2}, {OrganizationID: one.org.ID}} {
		_, _, err = e.s.ListEvents(ctx, f, storage.PageRequest{Limit: 2, Cursor: info.LastKey})
		require.ErrorIs(t, err, storage.ErrBadCursor, "%+v", f)
	}
	_, all, err := e.s.ListEvents(ctx, storage.EventFilter{}, storage.PageRequest{Limit: 2})
	require.NoError(t, err)
	_, _, err = e.s.ListEvents(ctx, storage.EventFilter{PartnerID: p1}, storage.PageRequest{Limit: 2, Cursor: all.LastKey})
	require.ErrorIs(t, err, storage.ErrBadCursor, "the whole log's cursor")

	// A replay moves the event between the partner's status lists.
	oneB.validate(t)
	_, err = e.s.ReplayEvent(ctx, oneSkipped[0])
	require.NoError(t, err)
	check(t, storage.EventFilter{PartnerID: p1, Status: storage.EventSkipped}, oneSkipped[1:])
	pending := walk(t, 100, eventPages(t, e.s, storage.EventFilter{PartnerID: p1, Status: storage.EventPending}), nil)
	require.Contains(t, eventIDs(pending), oneSkipped[0])
	require.Len(t, pending, len(onePending)+1)

	// A purge takes the events out of the partner's lists too.
	_, err = e.s.PurgeEvents(ctx, time.Now().Add(time.Hour))
	require.NoError(t, err)
	check(t, storage.EventFilter{PartnerID: p1, Status: storage.EventSkipped}, []string{})
	check(t, storage.EventFilter{PartnerID: p2}, []string{})
	require.Len(t, walk(t, 2, eventPages(t, e.s, storage.EventFilter{PartnerID: p1}), nil), len(onePending)+1)
}

func testReplayEvent(t *testing.T, e *env) {
	ctx := t.Context()
	w := newHookWorld(t, e, false)
	_, skipped := w.prescribe(t)
	_, err := e.s.ReplayEvent(ctx, skipped.ID)
	require.ErrorIs(t, err, storage.ErrNotValidated)
	w.validate(t)
	_, err = e.s.ReplayEvent(ctx, skipped.ID)
	require.ErrorIs(t, err, storage.ErrNoEndpoints)
	_, err = e.s.ReplayEvent(ctx, storage.NewID())
	require.ErrorIs(t, err, storage.ErrNotFound)
	_, err = e.s.ReplayEvent(ctx, "a/b")
	require.ErrorIs(t, err, storage.ErrNotFound)
	got, err := e.s.GetEvent(ctx, skipped.ID)
	require.NoError(t, err)
	require.Equal(t, skipped, *got, "a refused replay changes nothing")

	ep := w.endpoint(t, "https://a.example/hook")
	_, ev := w.prescribe(t)
	_, err = e.s.ReplayEvent(ctx, ev.ID)
	require.ErrorIs(t, err, storage.ErrEventPending)
	res, err := e.q.ClaimJobs(ctx, storage.ClaimRequest{Owner: "q", Now: ev.CreatedAt, LeaseFor: time.Minute, Max: 1})
	require.NoError(t, err)
	require.Len(t, res.Jobs, 1)
	first := storage.Attempt{AttemptedAt: ev.CreatedAt, EndpointID: ep.ID, StatusCode: 200}
	_, err = complete(t, e.q, &res.Jobs[0].Job, first)
	require.NoError(t, err)

	replayed, err := e.s.ReplayEvent(ctx, ev.ID)
	require.NoError(t, err)
	require.Equal(t, ev.ID, replayed.ID, "the same event id")
	require.Equal(t, ev.Payload, replayed.Payload, "the same body")
	require.Equal(t, storage.EventPending, replayed.Status)
	require.Equal(t, 2, replayed.Round)
	require.Equal(t, []storage.Attempt{first}, replayed.Attempts, "earlier attempts are kept")
	require.Equal(t, []storage.EventTarget{{EndpointID: ep.ID, Status: storage.EventPending}}, replayed.Targets)
	stored, err := e.s.GetEvent(ctx, ev.ID)
	require.NoError(t, err)
	require.Equal(t, replayed, stored)
	pending, _ := jobs(t, e.q)
	require.Len(t, pending, 1)
	require.Equal(t, 2, pending[0].Round)
	require.Equal(t, 0, pending[0].Attempts, "a fresh round of attempts")
	require.NotEqual(t, res.Jobs[0].ID, pending[0].ID)

	// The skipped event can be replayed now.
	replayed, err = e.s.ReplayEvent(ctx, skipped.ID)
	require.NoError(t, err)
	require.Equal(t, storage.EventPending, replayed.Status)
	require.Empty(t, replayed.SkipReason)
	require.Equal(t, []string{skipped.ID, ev.ID}, eventIDs(allEvents(t, e.s, storage.EventFilter{Status: storage.EventPending})))
	require.Empty(t, allEvents(t, e.s, storage.EventFilter{Status: storage.EventSkipped}))
	require.Empty(t, allEvents(t, e.s, storage.EventFilter{Status: storage.EventDelivered}), "the delivered round's status moved")
}

// testPurgeEvents: events created before the cutoff that are delivered,
// failed or skipped go, with their index entries; a pending one stays,
// however old, until it is no longer pending; newer events stay.
func testPurgeEvents(t *testing.T, e *env) {
	ctx := t.Context()
	w := newHookWorld(t, e, true)
	w.endpoint(t, "https://a.example/hook")
	unvalidated := newHookWorld(t, e, false)

	_, skipped := unvalidated.prescribe(t)
	_, delivered := w.prescribe(t)
	_, failed := w.prescribe(t)
	_, pending := w.prescribe(t)
	res := claim(t, e.q, "purger", e.clock.Now(), 3, 0)
	require.Len(t, res.Jobs, 3)
	jobOf := map[string]*storage.Job{}
	for i := range res.Jobs {
		jobOf[res.Jobs[i].EventID] = &res.Jobs[i].Job
	}
	_, err := complete(t, e.q, jobOf[delivered.ID], storage.Attempt{AttemptedAt: e.clock.Now(), StatusCode: 200})
	require.NoError(t, err)
	_, err = archive(t, e.q, jobOf[failed.ID], storage.Attempt{AttemptedAt: e.clock.Now(), StatusCode: 410})
	require.NoError(t, err)
	require.NoError(t, e.q.ReleaseJobs(ctx, []storage.Job{*jobOf[pending.ID]}))

	cutoff := e.clock.Now()
	_, newer := unvalidated.prescribe(t)

	n, err := e.s.PurgeEvents(ctx, cutoff)
	require.NoError(t, err)
	require.Equal(t, 3, n, "the delivered, the failed and the skipped event before the cutoff")
	for _, gone := range []storage.Event{skipped, delivered, failed} {
		_, err := e.s.GetEvent(ctx, gone.ID)
		require.ErrorIs(t, err, storage.ErrNotFound, "%s event", gone.Status)
	}
	ids := func(f storage.EventFilter) []string {
		var out []string
		for _, ev := range allEvents(t, e.s, f) {
			out = append(out, ev.ID)
		}
		return out
	}
	require.Equal(t, []string{pending.ID, newer.ID}, ids(storage.EventFilter{}), "the pending event and the newer one stay")
	require.Empty(t, ids(storage.EventFilter{Status: storage.EventDelivered}), "no index entry is left")
	require.Empty(t, ids(storage.EventFilter{OrganizationID: w.org.ID, Status: storage.EventFailed}))
	require.Equal(t, []string{pending.ID}, ids(storage.EventFilter{OrganizationID: w.org.ID}))
	p, _ := jobs(t, e.q)
	require.Len(t, p, 1, "the pending event keeps its job")

	n, err = e.s.PurgeEvents(ctx, cutoff)
	require.NoError(t, err)
	require.Zero(t, n, "nothing more before the cutoff")

	res = claim(t, e.q, "purger", e.clock.Now(), 1, 0)
	require.Len(t, res.Jobs, 1)
	_, err = complete(t, e.q, &res.Jobs[0].Job, storage.Attempt{AttemptedAt: e.clock.Now(), StatusCode: 200})
	require.NoError(t, err)
	n, err = e.s.PurgeEvents(ctx, cutoff)
	require.NoError(t, err)
	require.Equal(t, 1, n, "once delivered, the old event goes")
	require.Equal(t, []string{newer.ID}, ids(storage.EventFilter{}))
}

func testCount(t *testing.T, e *env) {
	ctx := t.Context()
	counts := func() storage.Counts {
		t.Helper()
		c, err := e.s.Count(ctx)
		require.NoError(t, err)
		return c
	}
	zero := map[string]int{storage.EventSkipped: 0, storage.EventPending: 0, storage.EventDelivered: 0, storage.EventFailed: 0}
	require.Equal(t, storage.Counts{Events: zero}, counts(), "an empty store counts zero of everything, every status named")

	w := newHookWorld(t, e, true)
	w.endpoint(t, "https://a.example/hook")
	unvalidated := newHookWorld(t, e, false)
	for range 2 {
		u := storage.User{OrgID: w.org.ID, Email: storage.NewID() + "@example.com", GivenName: "G", FamilyName: "F", Role: storage.RoleMember}
		require.NoError(t, e.s.CreateUser(ctx, &u))
	}
	unvalidated.prescribe(t)
	_, delivered := w.prescribe(t)
	_, failed := w.prescribe(t)
	w.prescribe(t)
	w.prescribe(t)
	res := claim(t, e.q, "counter", e.clock.Now(), 10, 0)
	for i := range res.Jobs {
		j := &res.Jobs[i].Job
		switch res.Jobs[i].EventID {
		case delivered.ID:
			_, err := complete(t, e.q, j, storage.Attempt{AttemptedAt: e.clock.Now(), StatusCode: 200})
			require.NoError(t, err)
		case failed.ID:
			_, err := archive(t, e.q, j, storage.Attempt{AttemptedAt: e.clock.Now(), StatusCode: 410})
			require.NoError(t, err)
		default:
			require.NoError(t, e.q.ReleaseJobs(ctx, []storage.Job{*j}))
		}
	}
	want := storage.Counts{Organizations: 2, Users: 4, Events: map[string]int{
		storage.EventSkipped: 1, storage.EventPending: 2, storage.EventDelivered: 1, storage.EventFailed: 1,
	}}
	require.Equal(t, want, counts())

	n, err := e.s.PurgeEvents(ctx, e.clock.Now())
	require.NoError(t, err)
	require.Equal(t, 3, n)
	want.Events = map[string]int{storage.EventSkipped: 0, storage.EventPending: 2, storage.EventDelivered: 0, storage.EventFailed: 0}
	require.Equal(t, want, counts(), "purged events are no longer counted")
}

// testCreatePrescriptionsConcurrently: many creates for one patient at once,
// with an endpoint registered in the middle of them, all succeed (none runs
// out of conflict retries), and each event went to the endpoints that
// existed when it was written: every job's endpoint is the partner's.
func testCreatePrescriptionsConcurrently(t *testing.T, e *env) {
	w := newHookWorld(t, e, true)
	first := w.endpoint(t, "https://a.example/hook")
	const workers, each = 16, 8
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for i := range workers {
		wg.Go(func() {
			for range each {
				rx := newPrescription(&w.patient, "Item")
				errs <- e.s.CreatePrescription(t.Context(), &rx)
			}
		})
		if i == workers/2 {
			w.endpoint(t, "https://b.example/hook")
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	pending, _ := jobs(t, e.q)
	require.GreaterOrEqual(t, len(pending), workers*each, "every event has a job for the first endpoint at least")
	byEndpoint := map[string]int{}
	for _, j := range pending {
		byEndpoint[j.EndpointID]++
	}
	require.Equal(t, workers*each, byEndpoint[first.ID], "every event went to the endpoint that existed before it")
	require.Len(t, byEndpoint, 2, "the endpoint registered in the middle got the events written after it")
}

// testCreateTestEvent: a webhook.test event goes to its one endpoint, not
// to the partner's others, belongs to no organization, is delivered as
// any event is, cannot be replayed, and goes with retention.
func testCreateTestEvent(t *testing.T, e *env) {
	ctx := t.Context()
	w := newHookWorld(t, e, false) // a test send needs no validate
	a := w.endpoint(t, "https://a.example/hook")
	w.endpoint(t, "https://b.example/hook")
	_, err := e.s.CreateTestEvent(ctx, storage.NewID())
	require.ErrorIs(t, err, storage.ErrNotFound)
	_, err = e.s.CreateTestEvent(ctx, "not/an id")
	require.ErrorIs(t, err, storage.ErrNotFound)

	ev, err := e.s.CreateTestEvent(ctx, a.ID)
	require.NoError(t, err)
	require.Equal(t, storage.EventWebhookTest, ev.Type)
	require.Empty(t, ev.OrganizationID)
	require.Equal(t, w.partner.ID, ev.PartnerID)
	require.Equal(t, storage.EventPending, ev.Status)
	require.Equal(t, []storage.EventTarget{{EndpointID: a.ID, Status: storage.EventPending}}, ev.Targets)
	var body map[string]any
	require.NoError(t, json.Unmarshal(ev.Payload, &body))
	require.Equal(t, "webhook.test", body["event_type"])
	require.Equal(t, ev.ID, body["event_id"])
	require.Equal(t, a.ID, body["data"].(map[string]any)["endpoint_id"])
	stored, err := e.s.GetEvent(ctx, ev.ID)
	require.NoError(t, err)
	requireEqual(t, ev, stored)
	require.Empty(t, allEvents(t, e.s, storage.EventFilter{OrganizationID: w.org.ID}), "in no organization's log")
	require.Contains(t, eventIDs(allEvents(t, e.s, storage.EventFilter{Status: storage.EventPending})), ev.ID)

	res := claim(t, e.q, "q1", e.clock.Now(), 10, 0)
	require.Len(t, res.Jobs, 1, "one job, to the endpoint tested")
	require.Equal(t, a.ID, res.Jobs[0].EndpointID)
	require.Equal(t, ev.Payload, res.Jobs[0].Payload)
	got, err := complete(t, e.q, &res.Jobs[0].Job, storage.Attempt{AttemptedAt: e.clock.Now(), EndpointID: a.ID, StatusCode: 204})
	require.NoError(t, err)
	require.Equal(t, storage.EventDelivered, got.Status)
	_, err = e.s.ReplayEvent(ctx, ev.ID)
	require.Error(t, err, "a test send is not replayed")

	n, err := e.s.PurgeEvents(ctx, e.clock.Now().Add(time.Hour))
	require.NoError(t, err)
	require.GreaterOrEqual(t, n, 1)
	_, err = e.s.GetEvent(ctx, ev.ID)
	require.ErrorIs(t, err, storage.ErrNotFound)
}
