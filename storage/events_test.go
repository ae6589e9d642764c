package storage_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage"
)

var t0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

func TestNewPrescriptionCreated(t *testing.T) {
	t.Parallel()
	org := &storage.Organization{ID: "org", PartnerID: "partner"}
	p := &storage.Prescription{OrgID: "org", UserID: "user", PatientID: "patient", SCID: "SCID"}
	ev, err := storage.NewPrescriptionCreated(p, "PP-1", org, t0.Add(1500*time.Microsecond+300))
	require.NoError(t, err)
	require.True(t, storage.ValidID(ev.ID))
	require.Equal(t, storage.EventPrescriptionCreated, ev.Type)
	require.Equal(t, 1, ev.Round)
	require.Equal(t, t0.Add(1500*time.Microsecond), ev.CreatedAt, "kept to the microsecond")
	want := `{"event_type":"prescription.created","event_id":"` + ev.ID + `","timestamp":"2026-03-02T09:00:00.001Z",` +
		`"partner_id":"partner","organization_id":"org",` +
		`"data":{"patient_id":"patient","partner_patient_id":"PP-1","user_id":"user","scid":"SCID"}}`
	require.JSONEq(t, want, string(ev.Payload))
	require.Equal(t, want, string(ev.Payload), "the members in the spec's order")
}

func TestStartRound(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		validated  bool
		endpoints  []string
		wantStatus string
		wantReason string
		wantJobs   int
	}{
		{name: "not validated", validated: false, endpoints: []string{"a"}, wantStatus: storage.EventSkipped, wantReason: storage.SkipNotValidated},
		{name: "no endpoint", validated: true, wantStatus: storage.EventSkipped, wantReason: storage.SkipNoEndpoints},
		{name: "one endpoint", validated: true, endpoints: []string{"a"}, wantStatus: storage.EventPending, wantJobs: 1},
		{name: "two endpoints", validated: true, endpoints: []string{"a", "b"}, wantStatus: storage.EventPending, wantJobs: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ev := &storage.Event{ID: "event", Round: 3, Status: storage.EventFailed, SkipReason: "old",
				Targets: []storage.EventTarget{{EndpointID: "old", Status: storage.EventFailed}}}
			jobs := ev.StartRound(tt.validated, tt.endpoints, t0)
			require.Equal(t, tt.wantStatus, ev.Status)
			require.Equal(t, tt.wantReason, ev.SkipReason)
			require.Len(t, jobs, tt.wantJobs)
			require.Len(t, ev.Targets, tt.wantJobs, "the targets are this round's")
			for i, j := range jobs {
				require.Equal(t, tt.endpoints[i], j.EndpointID)
				require.Equal(t, storage.EventTarget{EndpointID: tt.endpoints[i], Status: storage.EventPending}, ev.Targets[i])
				require.Equal(t, "event", j.EventID)
				require.Equal(t, 3, j.Round)
				require.Equal(t, t0, j.Due, "due at once")
				require.Zero(t, j.Attempts)
				require.True(t, storage.ValidID(j.ID))
			}
		})
	}
}

func TestCheckReplay(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		status    string
		validated bool
		endpoints int
		want      error
	}{
		{name: "pending", status: storage.EventPending, validated: true, endpoints: 1, want: storage.ErrEventPending},
		{name: "not validated", status: storage.EventSkipped, endpoints: 1, want: storage.ErrNotValidated},
		{name: "no endpoint", status: storage.EventSkipped, validated: true, want: storage.ErrNoEndpoints},
		{name: "delivered", status: storage.EventDelivered, validated: true, endpoints: 1},
		{name: "failed", status: storage.EventFailed, validated: true, endpoints: 2},
		{name: "skipped", status: storage.EventSkipped, validated: true, endpoints: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ev := &storage.Event{Status: tt.status, Round: 1}
			err := ev.CheckReplay(tt.validated, tt.endpoints)
			if tt.want != nil {
				require.ErrorIs(t, err, tt.want)
				require.Equal(t, 1, ev.Round, "a refused replay starts no round")
				return
			}
			require.NoError(t, err)
			require.Equal(t, 2, ev.Round)
		})
	}
}

func TestRecordAttempt(t *testing.T) {
	t.Parallel()
	pending := func(ids ...string) []storage.EventTarget {
		var out []storage.EventTarget
		for _, id := range ids {
			out = append(out, storage.EventTarget{EndpointID: id, Status: storage.EventPending})
		}
		return out
	}
	// Each row records one attempt of a job of endpoint a on an event of
	// round 2 whose targets are a and b.
	tests := []struct {
		name       string
		round      int
		b          string // b's status before
		status     string // a's status after the attempt
		wantStatus string
	}{
		{name: "delivered, b pending", round: 2, b: storage.EventPending, status: storage.EventDelivered, wantStatus: storage.EventPending},
		{name: "delivered, b delivered", round: 2, b: storage.EventDelivered, status: storage.EventDelivered, wantStatus: storage.EventDelivered},
		{name: "failed, b delivered", round: 2, b: storage.EventDelivered, status: storage.EventFailed, wantStatus: storage.EventFailed},
		{name: "delivered, b failed", round: 2, b: storage.EventFailed, status: storage.EventDelivered, wantStatus: storage.EventFailed},
		{name: "retried, b failed", round: 2, b: storage.EventFailed, status: storage.EventPending, wantStatus: storage.EventPending},
		{name: "a job of an earlier round", round: 1, b: storage.EventDelivered, status: storage.EventFailed, wantStatus: "unchanged"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ev := &storage.Event{Round: 2, Status: "unchanged", Targets: pending("a", "b")}
			ev.Targets[1].Status = tt.b
			a := storage.Attempt{AttemptedAt: t0.Add(1234 * time.Nanosecond).In(time.FixedZone("x", 3600)), EndpointID: "a", StatusCode: 200}
			ev.RecordAttempt(&storage.Job{EndpointID: "a", Round: tt.round}, a, tt.status)
			require.Equal(t, tt.wantStatus, ev.Status)
			require.Len(t, ev.Attempts, 1, "every attempt is kept")
			require.Equal(t, t0.Add(time.Microsecond), ev.Attempts[0].AttemptedAt, "in UTC, to the microsecond")
			if tt.round == 2 {
				require.Equal(t, tt.status, ev.Targets[0].Status)
			} else {
				require.Equal(t, storage.EventPending, ev.Targets[0].Status, "an earlier round's job changes no target")
			}
		})
	}
}

func TestEventFilterMatchable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		f    storage.EventFilter
		want bool
	}{
		{name: "everything", want: true},
		{name: "an organization", f: storage.EventFilter{OrganizationID: "org"}, want: true},
		{name: "every status", f: storage.EventFilter{Status: storage.EventFailed}, want: true},
		{name: "unknown status", f: storage.EventFilter{Status: "lost"}},
		{name: "unusable organization id", f: storage.EventFilter{OrganizationID: "a/b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, tt.f.Matchable())
		})
	}
}

func TestPrepareCreate(t *testing.T) {
	t.Parallel()
	p := storage.Prescription{OrgID: "o", UserID: "u", PatientID: "p", Status: storage.StatusCeased, Error: &storage.PrescriptionError{Description: "x"}}
	require.NoError(t, p.PrepareCreate(t0.Add(1500*time.Microsecond+1)))
	require.Len(t, p.SCID, 18)
	require.Equal(t, t0.Add(1500*time.Microsecond), p.CreatedAt)
	require.Equal(t, "2026-03-02T09:00:00.001Z", p.CreatedDate)
	require.Equal(t, storage.StatusActive, p.Status)
	require.Nil(t, p.Error)
	require.Equal(t, "ELECTRONIC", p.PrescriptionType)

	back := storage.Prescription{OrgID: "o", UserID: "u", PatientID: "p", SCID: "GIVEN", PrescriptionType: "OTHER", CreatedAt: t0.Add(-time.Hour)}
	require.NoError(t, back.PrepareCreate(t0))
	require.Equal(t, "GIVEN", back.SCID)
	require.Equal(t, "OTHER", back.PrescriptionType)
	require.Equal(t, t0.Add(-time.Hour), back.CreatedAt, "a back-dated prescription keeps its time")
}

// TestPrescriptionJSON pins the stored and served shape: the spec 2.5
// members in the spec's order, the ids and time left out.
func TestPrescriptionJSON(t *testing.T) {
	t.Parallel()
	p := storage.Prescription{OrgID: "o", UserID: "u", PatientID: "p", CreatedAt: t0, SCID: "S",
		PrescriptionItem: storage.PrescriptionItem{ItemName: "I"}}
	b, err := json.Marshal(p)
	require.NoError(t, err)
	var keys []string
	dec := json.NewDecoder(bytes.NewReader(b))
	_, _ = dec.Token()
	for dec.More() {
		k, _ := dec.Token()
		keys = append(keys, k.(string))
		var skip json.RawMessage
		require.NoError(t, dec.Decode(&skip))
	}
	require.Equal(t, []string{
		"prescription_type", "url", "scid", "status", "created_date", "item_name", "quantity",
		"number_of_repeats_authorised", "repeat_intervals", "pbs_code", "item_strength", "item_form",
		"route_administration", "pbsdva_authority_number", "phone_approval_authority_number", "schedule_number",
		"private_prescription", "emergency_supply", "brand_substitution_not_allowed", "reason_for_prescribing",
		"patient_instructions", "doctor_notes", "pharmacy_name", "regulation_24", "controlled_substance_reference",
		"unusual_dose_flag", "unusual_qty_flag", "my_sl_consent", "send_to_pharmacy", "unlisted_item_repat_authority",
		"prescriber_script_number", "custom_drug_details", "prescriber", "delivery",
	}, keys)
}

func TestRotate(t *testing.T) {
	t.Parallel()
	e := storage.WebhookEndpoint{Secret: "first"}
	e.Rotate("second", t0, t0.Add(time.Hour))
	require.Equal(t, "second", e.Secret)
	require.Equal(t, "first", e.PreviousSecret)
	require.Equal(t, t0.Add(time.Hour), e.PreviousUntil)
	require.Equal(t, t0, *e.RotatedAt)
	require.Equal(t, []string{"first", "second"}, e.SigningSecrets(t0))
	require.Equal(t, []string{"second"}, e.SigningSecrets(t0.Add(time.Hour)))
}

func TestBoundAttemptDetail(t *testing.T) {
	t.Parallel()
	big := bytes.Repeat([]byte("x"), storage.MaxAttemptBodyBytes+10)
	many := make([][2]string, storage.MaxAttemptHeaders+3)
	for i := range many {
		many[i] = [2]string{"X-H", "v"}
	}
	long := [][2]string{{"A", "1"}, {"B", string(bytes.Repeat([]byte("y"), storage.MaxAttemptHeaderBytes))}, {"C", "3"}}
	tests := []struct {
		name          string
		headers       [][2]string
		body          []byte
		truncated     bool
		wantHeaders   int
		wantHeadTrunc bool
		wantBody      int
		wantBodyTrunc bool
	}{
		{name: "small answer kept whole", headers: [][2]string{{"Content-Type", "text/plain"}}, body: []byte("ok"), wantHeaders: 1, wantBody: 2},
		{name: "empty answer", wantHeaders: 0, wantBody: 0},
		{name: "body cut at 4 KiB", body: big, wantBody: storage.MaxAttemptBodyBytes, wantBodyTrunc: true},
		{name: "body already cut by the reader", body: []byte("abc"), truncated: true, wantBody: 3, wantBodyTrunc: true},
		{name: "header count bounded", headers: many, wantHeaders: storage.MaxAttemptHeaders, wantHeadTrunc: true},
		{name: "header bytes bounded, later small ones kept", headers: long, wantHeaders: 2, wantHeadTrunc: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := storage.BoundAttemptDetail(tt.headers, tt.body, tt.truncated)
			require.Len(t, d.ResponseHeaders, tt.wantHeaders)
			require.Equal(t, tt.wantHeadTrunc, d.HeadersTruncated)
			require.Len(t, d.ResponseBody, tt.wantBody)
			require.Equal(t, tt.wantBodyTrunc, d.BodyTruncated)
		})
	}
}

// TestRecordAttemptBoundsDetail: however often an event is attempted, only
// its newest attempts keep the answer, so its record stays bounded.
func TestRecordAttemptBoundsDetail(t *testing.T) {
	t.Parallel()
	e := &storage.Event{ID: "e", Round: 1, Status: storage.EventPending, Targets: []storage.EventTarget{{EndpointID: "p", Status: storage.EventPending}}}
	j := &storage.Job{EventID: "e", EndpointID: "p", Round: 1}
	body := bytes.Repeat([]byte("<"), storage.MaxAttemptBodyBytes) // escapes 6-fold in JSON as a string
	var heads [][2]string
	for range storage.MaxAttemptHeaders {
		heads = append(heads, [2]string{"X-Pad", string(bytes.Repeat([]byte("<"), storage.MaxAttemptHeaderBytes/storage.MaxAttemptHeaders-5))})
	}
	for i := range 50 {
		e.RecordAttempt(j, storage.Attempt{EndpointID: "p", StatusCode: 500, ErrorClass: storage.AttemptHTTPStatus,
			Signature: "t=1,v1=" + string(bytes.Repeat([]byte("a"), 4000)), SecretIDs: []string{storage.SecretID("s")},
			AttemptDetail: storage.BoundAttemptDetail(heads, body, true)}, storage.EventPending)
		detailed := 0
		for _, a := range e.Attempts {
			require.LessOrEqual(t, len(a.Signature), 512, "the signature kept is bounded")
			if a.ResponseBody != nil {
				detailed++
			}
		}
		require.Equal(t, min(i+1, storage.MaxDetailedAttempts), detailed)
		require.NotNil(t, e.Attempts[len(e.Attempts)-1].ResponseBody, "the newest keeps its answer")
	}
	enc, err := json.Marshal(e.Attempts)
	require.NoError(t, err)
	require.Less(t, len(enc), storage.MaxRecordBytes/2, "fifty attempts with the largest answers stay well under a record's bound")
}

func TestSecretID(t *testing.T) {
	t.Parallel()
	a, b := storage.SecretID("secret-one"), storage.SecretID("secret-two")
	require.Regexp(t, `^whk_[0-9a-f]{12}$`, a)
	require.Equal(t, a, storage.SecretID("secret-one"), "stable")
	require.NotEqual(t, a, b)
	require.NotContains(t, a, "secret")
}
