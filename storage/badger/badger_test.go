package badger_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage"
	"github.com/rxgate/rxgate/storage/badger"
	"github.com/rxgate/rxgate/testsuite/fake"
	"github.com/rxgate/rxgate/testsuite/storagetest"
)

// open opens a store that is closed when t ends.
func open(t testing.TB, opts badger.Options) *badger.Store {
	t.Helper()
	s, err := badger.Open(opts)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.Close()) })
	return s
}

// openInMemory is a storagetest.Opener for in-memory stores.
func openInMemory(t testing.TB, now func() time.Time) (storage.Store, storage.JobStore) {
	s := open(t, badger.Options{InMemory: true, Now: now})
	return s, s
}

// openOnDisk is a storagetest.Opener for stores in a fresh directory.
func openOnDisk(t testing.TB, now func() time.Time) (storage.Store, storage.JobStore) {
	s := open(t, badger.Options{Dir: t.TempDir(), Now: now})
	return s, s
}

// onDisk is a store of openRestartable's, which a restart replaces.
type onDisk struct {
	dir        string
	durability badger.Durability
	s          *badger.Store
}

// onDisks are openRestartable's stores, by their current *badger.Store.
var onDisks sync.Map

// openRestartable is openOnDisk for stores that restartOnDisk restarts.
func openRestartable(t testing.TB, now func() time.Time) (storage.Store, storage.JobStore) {
	return openRestartableWith(badger.DurabilityJournal)(t, now)
}

// openRestartableWith is openRestartable with the durability given.
func openRestartableWith(durability badger.Durability) storagetest.Opener {
	return func(t testing.TB, now func() time.Time) (storage.Store, storage.JobStore) {
		return openRestartable1(t, now, durability)
	}
}

func openRestartable1(t testing.TB, now func() time.Time, durability badger.Durability) (storage.Store, storage.JobStore) {
	d := &onDisk{dir: t.TempDir(), durability: durability}
	var err error
	d.s, err = badger.Open(badger.Options{Dir: d.dir, Now: now, Durability: durability})
	require.NoError(t, err)
	onDisks.Store(d.s, d)
	t.Cleanup(func() { assert.NoError(t, d.s.Close()) })
	return d.s, d.s
}

// restartOnDisk is a storagetest.Restarter for openRestartable's stores:
// Close, then Open on the directory. A Close writes no lease (Badger
// keeps them in memory), so to the leases it is a crash.
func restartOnDisk(t testing.TB, s storage.Store, now func() time.Time) (storage.Store, storage.JobStore) {
	v, ok := onDisks.LoadAndDelete(s)
	require.True(t, ok, "a store of openRestartable's")
	d := v.(*onDisk)
	require.NoError(t, d.s.Close())
	var err error
	d.s, err = badger.Open(badger.Options{Dir: d.dir, Now: now, Durability: d.durability})
	require.NoError(t, err)
	onDisks.Store(d.s, d)
	return d.s, d.s
}

func newClock() *fake.Clock {
	return fake.NewSteppingClock(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC), time.Millisecond)
}

func ptr[T any](v T) *T { return &v }

func TestConformance(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		open storagetest.Opener
		opts []storagetest.Option
	}{
		{name: "InMemory", open: openInMemory},
		// Every write is synced: keep the volumes small.
		{name: "OnDisk", open: openRestartable, opts: []storagetest.Option{storagetest.Small(), storagetest.WithRestart(restartOnDisk)}},
		// Badger's SyncWrites instead of the journal (issue 26, item 5).
		{name: "OnDiskSyncWrites", open: openRestartableWith(badger.DurabilitySyncWrites), opts: []storagetest.Option{storagetest.Small(), storagetest.WithRestart(restartOnDisk)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			storagetest.Run(t, tt.open, tt.opts...)
		})
	}
}

func TestOpenNeedsADirectory(t *testing.T) {
	t.Parallel()
	_, err := badger.Open(badger.Options{})
	require.Error(t, err)
}

// TestRecordBound checks Options.MaxRecordBytes: out of range it is
// refused at Open; a record over it is ErrTooLarge, with nothing stored,
// and one at it is stored.
func TestRecordBound(t *testing.T) {
	t.Parallel()
	for _, n := range []int{-1, badger.MaxRecordLimit + 1} {
		_, err := badger.Open(badger.Options{InMemory: true, MaxRecordBytes: n})
		require.Error(t, err, n)
	}
	s := open(t, badger.Options{InMemory: true, MaxRecordBytes: 4096})
	ctx := t.Context()
	p := &storage.Partner{Name: "Bound", SecretHash: storage.HashSecret(storage.NewSecret())}
	require.NoError(t, s.CreatePartner(ctx, p))
	o := &storage.Organization{Name: "Bound clinic", PartnerID: p.ID, SecretHash: storage.HashSecret(storage.NewSecret())}
	require.NoError(t, s.CreateOrganization(ctx, o))
	drug := func(name string) storage.CustomDrug {
		return storage.CustomDrug{OrgID: o.ID, ItemGenericName: name, ItemStrength: "1 mg", ItemForm: "tablet", RouteOfAdministration: "oral"}
	}
	err := s.CreateCustomDrugs(ctx, []storage.CustomDrug{drug("small"), drug(strings.Repeat("x", 4096))})
	require.ErrorIs(t, err, storage.ErrTooLarge)
	u := &storage.User{OrgID: o.ID, Email: "gp@bound.example", GivenName: "Ada", FamilyName: "Byron", Role: storage.RolePrescriber}
	require.NoError(t, s.CreateUser(ctx, u))
	_, n, err := s.ListCustomDrugsJSON(ctx, o.ID, u.ID, nil)
	require.NoError(t, err)
	require.Zero(t, n, "a refused batch stores nothing")
	require.NoError(t, s.CreateCustomDrugs(ctx, []storage.CustomDrug{drug(strings.Repeat("x", 3000))}))
}

// TestOpenAfterKillDuringMemtableCreation: a process killed between
// creating a memtable log and sizing it leaves an empty *.mem file, which
// Badger alone refuses to open (issue #2207); the store opens, with its
// data. While another store has the directory open, nothing is removed.
func TestOpenAfterKillDuringMemtableCreation(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := badger.Open(badger.Options{Dir: dir})
	require.NoError(t, err)
	p := &storage.Partner{Name: "Kept", SecretHash: storage.HashSecret(storage.NewSecret())}
	require.NoError(t, s.CreatePartner(t.Context(), p))
	empty := filepath.Join(dir, "99999.mem")
	require.NoError(t, os.WriteFile(empty, nil, 0o600))
	_, err = badger.Open(badger.Options{Dir: dir})
	require.Error(t, err, "the directory is in use")
	require.FileExists(t, empty, "a store in use keeps its files")
	require.NoError(t, s.Close())

	s = open(t, badger.Options{Dir: dir})
	got, err := s.GetPartner(t.Context(), p.ID)
	require.NoError(t, err)
	require.Equal(t, "Kept", got.Name)
}

func TestPing(t *testing.T) {
	t.Parallel()
	s, err := badger.Open(badger.Options{InMemory: true})
	require.NoError(t, err)
	require.NoError(t, s.Ping(t.Context()))
	require.NoError(t, s.Close())
	require.Error(t, s.Ping(t.Context()), "a closed store")
}

// world is one of everything, as created.
type world struct {
	Partner       storage.Partner
	Organization  storage.Organization
	Users         []storage.User
	Patient       storage.Patient
	Prescriptions []byte // the first page as served
	Drugs         []byte // as the first user lists them
	Endpoint      storage.WebhookEndpoint
	Events        []storage.Event
	Meta          []byte
}

func createWorld(t testing.TB, s *badger.Store) world {
	t.Helper()
	ctx := t.Context()
	var w world
	w.Partner = storage.Partner{Name: "Acme", SecretHash: storage.HashSecret("partner secret")}
	require.NoError(t, s.CreatePartner(ctx, &w.Partner))
	w.Organization = storage.Organization{
		Name:          "Clinic",
		PartnerID:     w.Partner.ID,
		AllowedScopes: []string{"patients"},
		SecretHash:    storage.HashSecret("organization secret"),
	}
	require.NoError(t, s.CreateOrganization(ctx, &w.Organization))
	o, err := s.ValidateOrganization(ctx, w.Organization.ID)
	require.NoError(t, err)
	w.Organization = *o
	w.Endpoint = storage.WebhookEndpoint{PartnerID: w.Partner.ID, URL: "https://hooks.example", Secret: "webhook secret"}
	require.NoError(t, s.CreateWebhookEndpoint(ctx, &w.Endpoint))
	for _, email := range []string{"Grace@Example.com", "ada@example.com"} {
		u := storage.User{
			OrgID: w.Organization.ID, Email: email, GivenName: "Grace", FamilyName: "Hopper",
			Title: "Dr", Role: storage.RolePrescriber,
		}
		require.NoError(t, s.CreateUser(ctx, &u))
		w.Users = append(w.Users, u)
	}
	u, _, err := s.SetUserDisabled(ctx, w.Organization.ID, w.Users[1].ID, true)
	require.NoError(t, err)
	w.Users[1] = *u
	user := w.Users[0]

	w.Patient = storage.Patient{
		OrgID: user.OrgID, UserID: user.ID, PartnerPatientID: "PP-1",
		PatientFields: storage.PatientFields{
			FamilyName: ptr("Citizen"), GivenName: ptr("Jane"), CTGEligible: ptr(false),
			AustralianAddress: &storage.Address{StreetNumber: "1", StreetName: "George St", Suburb: "Sydney", State: "NSW", Postcode: "2000"},
		},
	}
	require.NoError(t, s.CreatePatient(ctx, &w.Patient))
	p, err := s.UpdatePatient(ctx, user.OrgID, user.ID, w.Patient.ID, func(p *storage.Patient) error {
		p.GivenName = ptr("Janet")
		p.Verifications = []storage.Verification{{
			Status: "requested", RequestedAt: time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC), Fields: []string{"given_name"},
		}}
		return nil
	})
	require.NoError(t, err)
	w.Patient = *p

	var scids []string
	for i := range 3 {
		rx := storage.Prescription{
			OrgID: user.OrgID, UserID: user.ID, PatientID: w.Patient.ID,
			PrescriptionItem: storage.PrescriptionItem{ItemName: fmt.Sprintf("Item %d", i), Quantity: "10"},
			Delivery:         storage.Delivery{Method: "sms", Pharmacy: &storage.Pharmacy{PharmacyID: "ph-1", Name: "Corner"}},
		}
		require.NoError(t, s.CreatePrescription(ctx, &rx))
		scids = append(scids, rx.SCID)
	}
	_, err = s.UpdatePrescription(ctx, user.OrgID, user.ID, w.Patient.ID, scids[0], func(p *storage.Prescription) error {
		p.Status = storage.StatusCeased
		return nil
	})
	require.NoError(t, err)
	_, w.Prescriptions, _, err = s.ListPrescriptionsJSON(ctx, user.OrgID, user.ID, w.Patient.ID, storage.PageRequest{Limit: 10}, nil)
	require.NoError(t, err)

	drugs := []storage.CustomDrug{
		{OrgID: user.OrgID, ItemGenericName: "Org drug", PoisonClass: "S4"},
		{OrgID: user.OrgID, UserID: user.ID, ItemGenericName: "User drug", BrandName: "Brand"},
	}
	require.NoError(t, s.CreateCustomDrugs(ctx, drugs))
	w.Drugs, _, err = s.ListCustomDrugsJSON(ctx, user.OrgID, user.ID, nil)
	require.NoError(t, err)
	w.Events, _, err = s.ListEvents(ctx, storage.EventFilter{}, storage.PageRequest{Limit: 10})
	require.NoError(t, err)
	require.Len(t, w.Events, 3)

	w.Meta, err = s.LoadOrCreateMeta(ctx, "test", func() ([]byte, error) { return []byte("meta value"), nil })
	require.NoError(t, err)
	return w
}

// readWorld reads back everything createWorld wrote.
func readWorld(t testing.TB, s *badger.Store, ids world) world {
	t.Helper()
	ctx := t.Context()
	var w world
	partners, err := s.ListPartners(ctx)
	require.NoError(t, err)
	require.Len(t, partners, 1)
	w.Partner = partners[0]
	orgs, err := s.ListOrganizations(ctx)
	require.NoError(t, err)
	require.Len(t, orgs, 1)
	w.Organization = orgs[0]
	ep, err := s.GetWebhookEndpoint(ctx, ids.Endpoint.ID)
	require.NoError(t, err)
	w.Endpoint = *ep
	w.Users, _, err = s.ListUsers(ctx, ids.Organization.ID, storage.PageRequest{Limit: 10})
	require.NoError(t, err)
	user := ids.Users[0]
	p, rxs, _, err := s.ListPrescriptionsJSON(ctx, user.OrgID, user.ID, ids.Patient.ID, storage.PageRequest{Limit: 10}, nil)
	require.NoError(t, err)
	w.Patient, w.Prescriptions = *p, rxs
	w.Drugs, _, err = s.ListCustomDrugsJSON(ctx, user.OrgID, user.ID, nil)
	require.NoError(t, err)
	w.Events, _, err = s.ListEvents(ctx, storage.EventFilter{}, storage.PageRequest{Limit: 10})
	require.NoError(t, err)
	w.Meta, err = s.LoadOrCreateMeta(ctx, "test", func() ([]byte, error) {
		t.Error("the metadata value was lost")
		return nil, nil
	})
	require.NoError(t, err)
	return w
}

func TestReopen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clock := newClock()
	s, err := badger.Open(badger.Options{Dir: dir, Now: clock.Now})
	require.NoError(t, err)
	want := createWorld(t, s)
	before := readWorld(t, s, want)
	require.Empty(t, cmp.Diff(want, before), "read before the restart (-want +got)")

	user, patient := want.Users[0], want.Patient
	page := storage.PageRequest{Limit: 1}
	_, _, first, err := s.ListPrescriptionsJSON(t.Context(), user.OrgID, user.ID, patient.ID, page, nil)
	require.NoError(t, err)
	require.NotEmpty(t, first.LastKey)
	page.Cursor = first.LastKey
	_, wantItems, wantInfo, err := s.ListPrescriptionsJSON(t.Context(), user.OrgID, user.ID, patient.ID, page, nil)
	require.NoError(t, err)
	require.NoError(t, s.Close())

	s = open(t, badger.Options{Dir: dir, Now: clock.Now})
	after := readWorld(t, s, want)
	require.Empty(t, cmp.Diff(want, after), "read after the restart (-want +got)")

	_, items, info, err := s.ListPrescriptionsJSON(t.Context(), user.OrgID, user.ID, patient.ID, page, nil)
	require.NoError(t, err, "a cursor issued before the restart")
	require.Equal(t, string(wantItems), string(items))
	require.Equal(t, wantInfo, info)

	// The unique indexes survived too.
	err = s.CreateUser(t.Context(), &storage.User{OrgID: user.OrgID, Email: "grace@example.COM"})
	require.ErrorIs(t, err, storage.ErrAlreadyExists)
	err = s.CreatePatient(t.Context(), &storage.Patient{OrgID: user.OrgID, UserID: user.ID, PartnerPatientID: "PP-1"})
	require.ErrorIs(t, err, storage.ErrAlreadyExists)
	err = s.CreateWebhookEndpoint(t.Context(), &storage.WebhookEndpoint{PartnerID: want.Partner.ID, URL: want.Endpoint.URL})
	require.ErrorIs(t, err, storage.ErrAlreadyExists)
}

// TestJobsSurviveReopen is the queue's persistence check: queued jobs are on
// disk when the store is opened again, and a job leased when the process
// stopped is pending again, since leases live in memory: its attempt is
// made again (at least once).
func TestJobsSurviveReopen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clock := newClock()
	s, err := badger.Open(badger.Options{Dir: dir, Now: clock.Now})
	require.NoError(t, err)
	ctx := t.Context()
	p := storage.Partner{Name: "P"}
	require.NoError(t, s.CreatePartner(ctx, &p))
	o := storage.Organization{Name: "O", PartnerID: p.ID}
	require.NoError(t, s.CreateOrganization(ctx, &o))
	_, err = s.ValidateOrganization(ctx, o.ID)
	require.NoError(t, err)
	u := storage.User{OrgID: o.ID, Email: "u@example.com"}
	require.NoError(t, s.CreateUser(ctx, &u))
	pt := storage.Patient{OrgID: o.ID, UserID: u.ID}
	require.NoError(t, s.CreatePatient(ctx, &pt))
	require.NoError(t, s.CreateWebhookEndpoint(ctx, &storage.WebhookEndpoint{PartnerID: p.ID, URL: "https://a.example"}))
	for range 3 {
		require.NoError(t, s.CreatePrescription(ctx, &storage.Prescription{OrgID: o.ID, UserID: u.ID, PatientID: pt.ID}))
	}
	now := clock.Now()
	res, err := s.ClaimJobs(ctx, storage.ClaimRequest{Owner: "dead", Now: now, LeaseFor: time.Hour, Max: 1, PerEndpoint: 1})
	require.NoError(t, err)
	require.Len(t, res.Jobs, 1)
	pending, leased, err := s.ListJobs(ctx)
	require.NoError(t, err)
	require.Len(t, pending, 2)
	require.Len(t, leased, 1)
	require.NoError(t, s.Close())

	s = open(t, badger.Options{Dir: dir, Now: clock.Now})
	pending, leased, err = s.ListJobs(ctx)
	require.NoError(t, err)
	assert.Len(t, pending, 3, "every queued job is on disk, the one leased when the process stopped too")
	assert.Empty(t, leased, "no lease outlives its process")
	res2, err := s.ClaimJobs(ctx, storage.ClaimRequest{Owner: "new", Now: now, LeaseFor: time.Hour, Max: 10, PerEndpoint: 1})
	require.NoError(t, err)
	require.Len(t, res2.Jobs, 1)
	assert.Equal(t, res.Jobs[0].ID, res2.Jobs[0].ID, "the interrupted job comes first, due as it was")
	rec, err := s.RecordOutcomes(ctx, []storage.Outcome{{Job: res.Jobs[0].Job, Next: storage.EventDelivered}})
	require.NoError(t, err)
	assert.ErrorIs(t, rec[0].Err, storage.ErrLeaseLost, "the dead process's result is dropped")
}

// benchPatient returns an in-memory store holding one patient with n
// prescriptions.
func benchPatient(b *testing.B, n int) (*badger.Store, *storage.Patient) {
	b.Helper()
	s := open(b, badger.Options{InMemory: true, Now: newClock().Now})
	ctx := b.Context()
	p := &storage.Partner{Name: "Acme"}
	require.NoError(b, s.CreatePartner(ctx, p))
	o := &storage.Organization{PartnerID: p.ID, Name: "Clinic"}
	require.NoError(b, s.CreateOrganization(ctx, o))
	u := &storage.User{OrgID: o.ID, Email: "grace@example.com", GivenName: "Grace", FamilyName: "Hopper"}
	require.NoError(b, s.CreateUser(ctx, u))
	patient := &storage.Patient{OrgID: o.ID, UserID: u.ID, PatientFields: storage.PatientFields{GivenName: ptr("Jane")}}
	require.NoError(b, s.CreatePatient(ctx, patient))
	for i := range n {
		rx := storage.Prescription{
			OrgID: o.ID, UserID: u.ID, PatientID: patient.ID,
			PrescriptionItem: storage.PrescriptionItem{
				ItemName: fmt.Sprintf("Amoxicillin %d", i), Quantity: "20", PBSCode: "1234X",
				ItemStrength: "500 mg", ItemForm: "capsule", PatientInstructions: "One capsule three times a day",
			},
		}
		require.NoError(b, s.CreatePrescription(ctx, &rx))
	}
	return s, patient
}

// benchmarkListPrescriptionsJSON measures the served page: the stored
// bytes copied, not decoded.
func benchmarkListPrescriptionsJSON(b *testing.B, depth int) {
	const total, limit = 10_000, 20
	s, p := benchPatient(b, total)
	ctx := b.Context()
	req := storage.PageRequest{Limit: limit}
	for offset := 0; offset < depth; {
		_, _, info, err := s.ListPrescriptionsJSON(ctx, p.OrgID, p.UserID, p.ID,
			storage.PageRequest{Limit: min(100, depth-offset), Cursor: req.Cursor}, nil)
		require.NoError(b, err)
		req.Cursor, offset = info.LastKey, offset+info.Count
	}
	buf := make([]byte, 0, 64<<10)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		_, out, info, err := s.ListPrescriptionsJSON(ctx, p.OrgID, p.UserID, p.ID, req, buf[:0])
		if err != nil || info.Count != limit || info.Offset != depth || len(out) < 2 {
			b.Fatalf("got %d items at offset %d, %v", info.Count, info.Offset, err)
		}
	}
}

func BenchmarkListPrescriptionsJSONFirstPage(b *testing.B) { benchmarkListPrescriptionsJSON(b, 0) }

func BenchmarkListPrescriptionsJSONDeep(b *testing.B) { benchmarkListPrescriptionsJSON(b, 9_000) }
