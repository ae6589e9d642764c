// Package storagetest is the conformance suite of the storage contracts:
// storage.Store and storage.JobStore. Every backend runs it from its own
// test through Run, with an Opener that returns a fresh store, as dex's
// storage/conformance does for its backends. It calls what production
// calls (the stored-JSON lists the partner API serves, the event log,
// replay and the whole job lifecycle), and checks what several queues, in
// one process or in several sharing a database, rely on: a lease carries
// its owner and an expiry, only expired leases are taken back, a live
// lease can be renewed, and the per-endpoint limit holds across owners.
package storagetest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage"
	"github.com/rxgate/rxgate/testsuite/fake"
)

// Opener returns a fresh, empty store whose clock is now, as the two
// interfaces over it, and closes it when t ends.
type Opener func(t testing.TB, now func() time.Time) (storage.Store, storage.JobStore)

// Restarter ends the store s, which an Opener or an earlier restart
// returned, as a process that crashed would (writing nothing on its way
// out, where the backend can be stopped so), and opens it again on the
// same data under the same identity (a PostgreSQL replica's id), with
// clock now. What the old store leaves behind is the Restarter's to close
// when t ends.
type Restarter func(t testing.TB, s storage.Store, now func() time.Time) (storage.Store, storage.JobStore)

// Option adjusts a Run.
type Option func(*config)

type config struct {
	// restart, when set, restarts a store (WithRestart).
	restart Restarter
	// prescriptions is how many prescriptions a paging test walks over.
	prescriptions int
	// users is how many users the user list paging test walks over.
	users int
	// drugs is how many custom drugs one CreateCustomDrugs call stores.
	drugs int
}

// Small shrinks the large-volume cases (the prescription and user lists
// that are walked page by page, the bulk custom drug import) for stores
// whose every write is synced to disk. Every behaviour is still checked,
// including lists that span several pages and a bulk import that spans
// several write batches.
func Small() Option {
	return func(c *config) {
		c.prescriptions = 23
		c.users = 23
		c.drugs = 1_001
	}
}

// WithRestart runs the tests of what a restarted process finds, with
// restart; without it they are skipped (an in-memory store has nothing to
// restart on).
func WithRestart(restart Restarter) Option {
	return func(c *config) { c.restart = restart }
}

// test is one conformance test.
type test struct {
	name string
	run  func(t *testing.T, e *env)
}

// Run runs every conformance test, each on a fresh store from open that
// uses a fake clock.
func Run(t *testing.T, open Opener, opts ...Option) {
	cfg := config{prescriptions: 63, users: 101, drugs: 1_200}
	for _, o := range opts {
		o(&cfg)
	}
	var tests []test
	tests = append(tests, entityTests...)
	tests = append(tests, eventTests...)
	tests = append(tests, jobTests...)
	tests = append(tests, auditTests...)
	tests = append(tests, healthTests...)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := &env{cfg: cfg, open: open}
			e.clock = fake.NewSteppingClock(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC), time.Millisecond)
			e.s, e.q = open(t, e.clock.Now)
			tt.run(t, e)
		})
	}
}

// env is what one conformance test works with.
type env struct {
	s     storage.Store
	q     storage.JobStore
	clock *fake.Clock
	cfg   config
	open  Opener
}

// createdDateLayout is how the spec writes created_date.
const createdDateLayout = "2006-01-02T15:04:05.000Z"

// crockford is the alphabet of a scid.
const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

var errUpdater = errors.New("storagetest: updater refused")

// requireEqual fails t unless want and got are equal, field by field; a
// prescription's EventStatus, which only CreatePrescription reports, is
// not compared.
func requireEqual(t testing.TB, want, got any, msgAndArgs ...any) {
	t.Helper()
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(storage.Prescription{}, "EventStatus")); diff != "" {
		require.Fail(t, "mismatch (-want +got):\n"+diff, msgAndArgs...)
	}
}

// mustNotRun is an updater for calls that must fail before calling it.
func mustNotRun[T any](t testing.TB) func(*T) error {
	return func(*T) error {
		t.Helper()
		t.Error("updater called")
		return nil
	}
}

func ptr[T any](v T) *T { return &v }

// dstPrefix is what the JSON list helpers put in dst before calling a
// store: the page must be appended after it, and it must stay as it was.
const dstPrefix = `{"data":`

// listPrescriptions calls ListPrescriptionsJSON, the method the partner API
// serves, and decodes its page: a JSON array of prescriptions appended to
// dst, each with exactly the members of storage.Prescription. It fills in
// what the stored objects do not carry: the ids, from the call, and
// CreatedAt, from created_date (the suite's clock ticks whole
// milliseconds, which created_date keeps).
func listPrescriptions(t testing.TB, s storage.Store, orgID, userID, patientID string, req storage.PageRequest) (*storage.Patient, []storage.Prescription, storage.PageInfo, error) {
	t.Helper()
	patient, out, info, err := s.ListPrescriptionsJSON(t.Context(), orgID, userID, patientID, req, []byte(dstPrefix))
	if err != nil {
		return patient, nil, info, err
	}
	var items []storage.Prescription
	decodeAppended(t, out, &items)
	require.Len(t, items, info.Count, "the page holds Count prescriptions")
	for i := range items {
		p := &items[i]
		p.OrgID, p.UserID, p.PatientID = orgID, userID, patientID
		p.CreatedAt, err = time.Parse(createdDateLayout, p.CreatedDate)
		require.NoError(t, err, "created_date %q", p.CreatedDate)
	}
	return patient, items, info, nil
}

// listCustomDrugs calls ListCustomDrugsJSON, the method the partner API
// serves, and decodes the array it appends to dst. The drugs come without
// OrgID and UserID, which the stored objects do not carry: compare them
// with listed.
func listCustomDrugs(t testing.TB, s storage.Store, orgID, userID string) ([]storage.CustomDrug, error) {
	t.Helper()
	out, n, err := s.ListCustomDrugsJSON(t.Context(), orgID, userID, []byte(dstPrefix))
	if err != nil {
		return nil, err
	}
	var drugs []storage.CustomDrug
	decodeAppended(t, out, &drugs)
	require.Len(t, drugs, n, "the count is the number of drugs in the array")
	return drugs, nil
}

// listed is drugs as listCustomDrugs returns them.
func listed(drugs ...storage.CustomDrug) []storage.CustomDrug {
	out := make([]storage.CustomDrug, len(drugs))
	for i, d := range drugs {
		d.OrgID, d.UserID = "", ""
		out[i] = d
	}
	return out
}

// decodeAppended checks that out is dstPrefix followed by one JSON array
// whose objects have only members of *v's elements, and decodes it into v.
func decodeAppended(t testing.TB, out []byte, v any) {
	t.Helper()
	require.True(t, bytes.HasPrefix(out, []byte(dstPrefix)), "the page is appended to dst, which stays as it was")
	body := out[len(dstPrefix):]
	require.True(t, json.Valid(body), "the page is valid JSON: %s", body)
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(v), "the page is an array of the stored objects")
	require.False(t, dec.More(), "one array and nothing after it")
}

// createDrug stores one custom drug through CreateCustomDrugs.
func createDrug(t testing.TB, s storage.Store, d *storage.CustomDrug) error {
	t.Helper()
	drugs := []storage.CustomDrug{*d}
	if err := s.CreateCustomDrugs(t.Context(), drugs); err != nil {
		return err
	}
	*d = drugs[0]
	return nil
}

func createPartner(t testing.TB, s storage.Store, name string) *storage.Partner {
	t.Helper()
	p := &storage.Partner{Name: name, SecretHash: storage.HashSecret(storage.NewSecret())}
	require.NoError(t, s.CreatePartner(t.Context(), p))
	return p
}

func createOrganization(t testing.TB, s storage.Store, partnerID, name string) *storage.Organization {
	t.Helper()
	o := &storage.Organization{
		Name:          name,
		PartnerID:     partnerID,
		AllowedScopes: []string{"patients", "prescriptions"},
		SecretHash:    storage.HashSecret(storage.NewSecret()),
	}
	require.NoError(t, s.CreateOrganization(t.Context(), o))
	return o
}

func createUser(t testing.TB, s storage.Store, orgID, email string) *storage.User {
	t.Helper()
	u := &storage.User{
		OrgID:      orgID,
		Email:      email,
		GivenName:  "Grace",
		FamilyName: "Hopper",
		Title:      "Dr",
		Role:       storage.RolePrescriber,
	}
	require.NoError(t, s.CreateUser(t.Context(), u))
	return u
}

func createPatient(t testing.TB, s storage.Store, u *storage.User, ppid string) *storage.Patient {
	t.Helper()
	p := &storage.Patient{
		OrgID:            u.OrgID,
		UserID:           u.ID,
		PartnerPatientID: ppid,
		PatientFields: storage.PatientFields{
			FamilyName:  ptr("Citizen"),
			GivenName:   ptr("Jane"),
			DateOfBirth: ptr("1980-04-01"),
			Sex:         ptr("F"),
			CTGEligible: ptr(true),
			AustralianAddress: &storage.Address{
				StreetNumber: "1", StreetName: "George St", Suburb: "Sydney", State: "NSW", Postcode: "2000",
			},
		},
	}
	require.NoError(t, s.CreatePatient(t.Context(), p))
	return p
}

// newPrescription is a prescription of p with an item.
func newPrescription(p *storage.Patient, item string) storage.Prescription {
	return storage.Prescription{
		OrgID:            p.OrgID,
		UserID:           p.UserID,
		PatientID:        p.ID,
		PrescriptionItem: storage.PrescriptionItem{ItemName: item, Quantity: "20", PBSCode: "1234X"},
	}
}

// createPrescriptions creates n prescriptions for p and returns them in
// creation order.
func createPrescriptions(t testing.TB, s storage.Store, p *storage.Patient, n int) []storage.Prescription {
	t.Helper()
	out := make([]storage.Prescription, 0, n)
	for i := range n {
		rx := newPrescription(p, fmt.Sprintf("Amoxicillin %d", i))
		require.NoError(t, s.CreatePrescription(t.Context(), &rx))
		out = append(out, rx)
	}
	return out
}

// tenant is a partner, an organization, a user and one of its patients.
type tenant struct {
	partner *storage.Partner
	org     *storage.Organization
	user    *storage.User
	patient *storage.Patient
}

func createTenant(t testing.TB, s storage.Store, name string) tenant {
	t.Helper()
	var tn tenant
	tn.partner = createPartner(t, s, name+" partner")
	tn.org = createOrganization(t, s, tn.partner.ID, name+" clinic")
	tn.user = createUser(t, s, tn.org.ID, "grace@"+name+".example")
	tn.patient = createPatient(t, s, tn.user, "")
	return tn
}

// lister reads one page of a list.
type lister[T any] func(req storage.PageRequest) ([]T, storage.PageInfo, error)

func prescriptionPages(t testing.TB, s storage.Store, p *storage.Patient) lister[storage.Prescription] {
	return func(req storage.PageRequest) ([]storage.Prescription, storage.PageInfo, error) {
		_, items, info, err := listPrescriptions(t, s, p.OrgID, p.UserID, p.ID, req)
		return items, info, err
	}
}

func userPages(t testing.TB, s storage.Store, orgID string) lister[storage.User] {
	return func(req storage.PageRequest) ([]storage.User, storage.PageInfo, error) {
		return s.ListUsers(t.Context(), orgID, req)
	}
}

func eventPages(t testing.TB, s storage.Store, f storage.EventFilter) lister[storage.Event] {
	return func(req storage.PageRequest) ([]storage.Event, storage.PageInfo, error) {
		return s.ListEvents(t.Context(), f, req)
	}
}

// walk reads every page of list with limit, checking each page's
// bookkeeping, and returns the items in the order listed. between, when not
// nil, runs after each page that has a next one.
func walk[T any](t testing.TB, limit int, list lister[T], between func()) []T {
	t.Helper()
	var all []T
	cursor := ""
	for n := 0; ; n++ {
		require.Less(t, n, 1<<16, "the walk does not end")
		items, info, err := list(storage.PageRequest{Limit: limit, Cursor: cursor})
		require.NoError(t, err, "page %d", n)
		want := storage.PageInfo{
			Count:   len(items),
			HasNext: info.LastKey != "",
			Limit:   limit,
			Offset:  len(all),
			LastKey: info.LastKey,
		}
		require.Equal(t, want, info, "page %d", n)
		if info.HasNext {
			require.Len(t, items, limit, "page %d is short but has a next page", n)
		}
		if n > 0 {
			require.NotEmpty(t, items, "page %d, reached through a cursor, is empty", n)
		}
		all = append(all, items...)
		if !info.HasNext {
			return all
		}
		cursor = info.LastKey
		if between != nil {
			between()
		}
	}
}

func scids(ps []storage.Prescription) []string {
	out := make([]string, len(ps))
	for i := range ps {
		out[i] = ps[i].SCID
	}
	return out
}

func userIDs(us []storage.User) []string {
	out := make([]string, len(us))
	for i := range us {
		out[i] = us[i].ID
	}
	return out
}

func drugIDs(ds []storage.CustomDrug) []string {
	out := make([]string, len(ds))
	for i := range ds {
		out[i] = ds[i].ID
	}
	return out
}
