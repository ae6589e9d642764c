package storage_test

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage"
	"github.com/rxgate/rxgate/testsuite/storagetest"
)

// openInMemory is a storagetest.Opener for in-memory stores.
func openInMemory(t testing.TB, opts storage.Options) *storage.Store {
	t.Helper()
	opts.InMemory = true
	return open(t, opts)
}

// openOnDisk is a storagetest.Opener for stores in a fresh directory.
func openOnDisk(t testing.TB, opts storage.Options) *storage.Store {
	t.Helper()
	opts.Dir = t.TempDir()
	return open(t, opts)
}

// open opens a store that is closed when t ends.
func open(t testing.TB, opts storage.Options) *storage.Store {
	t.Helper()
	s, err := storage.Open(opts)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.Close()) })
	return s
}

func newClock() *storagetest.Clock {
	return storagetest.NewClock(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC), time.Millisecond)
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
		{name: "OnDisk", open: openOnDisk, opts: []storagetest.Option{storagetest.Small()}},
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
	_, err := storage.Open(storage.Options{})
	require.Error(t, err)
}

func TestPing(t *testing.T) {
	t.Parallel()
	s, err := storage.Open(storage.Options{InMemory: true})
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
	Prescriptions []storage.Prescription // newest first
	Drugs         []storage.CustomDrug   // as the first user lists them
	Meta          []byte
}

func createWorld(t testing.TB, s *storage.Store) world {
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

	for i := range 3 {
		rx := storage.Prescription{
			OrgID: user.OrgID, UserID: user.ID, PatientID: w.Patient.ID,
			ItemName: fmt.Sprintf("Item %d", i), Quantity: "10",
			Delivery: storage.Delivery{Method: "sms", Pharmacy: &storage.Pharmacy{PharmacyID: "ph-1", Name: "Corner"}},
		}
		require.NoError(t, s.CreatePrescription(ctx, &rx))
		w.Prescriptions = append([]storage.Prescription{rx}, w.Prescriptions...)
	}
	ceased, err := s.UpdatePrescription(ctx, user.OrgID, user.ID, w.Patient.ID, w.Prescriptions[2].SCID, func(p *storage.Prescription) error {
		p.Status = storage.StatusCeased
		return nil
	})
	require.NoError(t, err)
	w.Prescriptions[2] = *ceased

	w.Drugs = []storage.CustomDrug{
		{OrgID: user.OrgID, ItemGenericName: "Org drug", PoisonClass: "S4"},
		{OrgID: user.OrgID, UserID: user.ID, ItemGenericName: "User drug", BrandName: "Brand"},
	}
	require.NoError(t, s.CreateCustomDrugs(ctx, w.Drugs))

	w.Meta, err = s.LoadOrCreateMeta(ctx, "test", func() ([]byte, error) { return []byte("meta value"), nil })
	require.NoError(t, err)
	return w
}

// readWorld reads back everything createWorld wrote.
func readWorld(t testing.TB, s *storage.Store, ids world) world {
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
	w.Users, _, err = s.ListUsers(ctx, ids.Organization.ID, storage.PageRequest{Limit: 10})
	require.NoError(t, err)
	user := ids.Users[0]
	p, rxs, _, err := s.ListPrescriptions(ctx, user.OrgID, user.ID, ids.Patient.ID, storage.PageRequest{Limit: 10})
	require.NoError(t, err)
	w.Patient, w.Prescriptions = *p, rxs
	w.Drugs, err = s.ListCustomDrugs(ctx, user.OrgID, user.ID)
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
	s, err := storage.Open(storage.Options{Dir: dir, Now: clock.Now})
	require.NoError(t, err)
	want := createWorld(t, s)
	before := readWorld(t, s, want)
	require.Empty(t, cmp.Diff(want, before), "read before the restart (-want +got)")

	user, patient := want.Users[0], want.Patient
	page := storage.PageRequest{Limit: 1}
	_, _, first, err := s.ListPrescriptions(t.Context(), user.OrgID, user.ID, patient.ID, page)
	require.NoError(t, err)
	require.NotEmpty(t, first.LastKey)
	page.Cursor = first.LastKey
	_, wantItems, wantInfo, err := s.ListPrescriptions(t.Context(), user.OrgID, user.ID, patient.ID, page)
	require.NoError(t, err)
	require.NoError(t, s.Close())

	s = open(t, storage.Options{Dir: dir, Now: clock.Now})
	after := readWorld(t, s, want)
	require.Empty(t, cmp.Diff(want, after), "read after the restart (-want +got)")

	_, items, info, err := s.ListPrescriptions(t.Context(), user.OrgID, user.ID, patient.ID, page)
	require.NoError(t, err, "a cursor issued before the restart")
	require.Empty(t, cmp.Diff(wantItems, items))
	require.Equal(t, wantInfo, info)

	// The unique indexes survived too.
	err = s.CreateUser(t.Context(), &storage.User{OrgID: user.OrgID, Email: "grace@example.COM"})
	require.ErrorIs(t, err, storage.ErrAlreadyExists)
	err = s.CreatePatient(t.Context(), &storage.Patient{OrgID: user.OrgID, UserID: user.ID, PartnerPatientID: "PP-1"})
	require.ErrorIs(t, err, storage.ErrAlreadyExists)
	_, err = s.UpdatePrescription(t.Context(), user.OrgID, user.ID, patient.ID, want.Prescriptions[0].SCID, func(*storage.Prescription) error { return nil })
	require.NoError(t, err, "the scid index")
}

func TestUpdatePatientConcurrently(t *testing.T) {
	t.Parallel()
	s := openInMemory(t, storage.Options{Now: newClock().Now})
	ctx := t.Context()
	p := &storage.Partner{Name: "Acme"}
	require.NoError(t, s.CreatePartner(ctx, p))
	o := &storage.Organization{PartnerID: p.ID, Name: "Clinic"}
	require.NoError(t, s.CreateOrganization(ctx, o))
	u := &storage.User{OrgID: o.ID, Email: "grace@example.com"}
	require.NoError(t, s.CreateUser(ctx, u))
	patient := &storage.Patient{OrgID: o.ID, UserID: u.ID}
	require.NoError(t, s.CreatePatient(ctx, patient))

	fields := []func(*storage.Patient) **string{
		func(p *storage.Patient) **string { return &p.FamilyName },
		func(p *storage.Patient) **string { return &p.GivenName },
		func(p *storage.Patient) **string { return &p.DateOfBirth },
		func(p *storage.Patient) **string { return &p.Sex },
		func(p *storage.Patient) **string { return &p.Title },
		func(p *storage.Patient) **string { return &p.Phone },
		func(p *storage.Patient) **string { return &p.Email },
		func(p *storage.Patient) **string { return &p.IHINumber },
	}
	const rounds = 25
	var wg sync.WaitGroup
	for i, field := range fields {
		wg.Go(func() {
			for round := range rounds {
				_, err := s.UpdatePatient(ctx, o.ID, u.ID, patient.ID, func(p *storage.Patient) error {
					*field(p) = ptr(fmt.Sprintf("field %d round %d", i, round))
					return nil
				})
				assert.NoError(t, err, "field %d round %d", i, round)
			}
		})
	}
	wg.Wait()

	got, err := s.GetPatient(ctx, o.ID, u.ID, patient.ID)
	require.NoError(t, err)
	for i, field := range fields {
		v := *field(got)
		require.NotNil(t, v, "field %d", i)
		assert.Equal(t, fmt.Sprintf("field %d round %d", i, rounds-1), *v, "field %d lost an update", i)
	}
}

func TestHashSecret(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		secret string
		want   string // hex SHA-256
	}{
		{name: "empty", secret: "", want: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		{name: "abc", secret: "abc", want: "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, hex.EncodeToString(storage.HashSecret(tt.secret)))
		})
	}
}

func TestSecretMatches(t *testing.T) {
	t.Parallel()
	secret := storage.NewSecret()
	hash := storage.HashSecret(secret)
	flipped := append([]byte(nil), hash...)
	flipped[len(flipped)-1] ^= 1
	tests := []struct {
		name   string
		hash   []byte
		secret string
		want   bool
	}{
		{name: "the secret", hash: hash, secret: secret, want: true},
		{name: "empty secret and its hash", hash: storage.HashSecret(""), secret: "", want: true},
		{name: "another secret", hash: hash, secret: storage.NewSecret()},
		{name: "empty secret", hash: hash, secret: ""},
		{name: "secret with a suffix", hash: hash, secret: secret + "x"},
		{name: "secret missing a character", hash: hash, secret: secret[:len(secret)-1]},
		{name: "nil hash", hash: nil, secret: secret},
		{name: "nil hash and empty secret", hash: nil, secret: ""},
		{name: "truncated hash", hash: hash[:16], secret: secret},
		{name: "hash with a byte appended", hash: append(append([]byte(nil), hash...), 0), secret: secret},
		{name: "hash with a bit flipped", hash: flipped, secret: secret},
		{name: "the secret's bytes as the hash", hash: []byte(secret), secret: secret},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, storage.SecretMatches(tt.hash, tt.secret))
		})
	}
}

func TestNewSecret(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for range 1_000 {
		s := storage.NewSecret()
		require.Len(t, s, 43)
		raw, err := base64.RawURLEncoding.DecodeString(s)
		require.NoError(t, err, "URL-safe base64 without padding")
		require.Len(t, raw, 32)
		require.False(t, seen[s], "repeated secret %q", s)
		seen[s] = true
	}
}

func TestNewSCID(t *testing.T) {
	t.Parallel()
	format := regexp.MustCompile(`^[0-9ABCDEFGHJKMNPQRSTVWXYZ]{18}$`) // Crockford's base32
	seen := map[string]bool{}
	for range 1_000 {
		scid := storage.NewSCID()
		require.Regexp(t, format, scid)
		require.False(t, seen[scid], "repeated scid %q", scid)
		seen[scid] = true
	}
}

func TestNewID(t *testing.T) {
	t.Parallel()
	prev := storage.NewID()
	for range 1_000 {
		id := storage.NewID()
		require.Greater(t, id, prev, "ids sort in creation order")
		prev = id
	}
}

// benchPatient returns an in-memory store holding one patient with n
// prescriptions.
func benchPatient(b *testing.B, n int) (*storage.Store, *storage.Patient) {
	b.Helper()
	s := openInMemory(b, storage.Options{Now: newClock().Now})
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
			ItemName: fmt.Sprintf("Amoxicillin %d", i), Quantity: "20", PBSCode: "1234X",
			ItemStrength: "500 mg", ItemForm: "capsule", PatientInstructions: "One capsule three times a day",
		}
		require.NoError(b, s.CreatePrescription(ctx, &rx))
	}
	return s, patient
}

func benchmarkListPrescriptions(b *testing.B, depth int) {
	const total, limit = 10_000, 20
	s, p := benchPatient(b, total)
	ctx := b.Context()
	// Walk in pages of up to 100 to the cursor depth items deep.
	req := storage.PageRequest{Limit: limit}
	for offset := 0; offset < depth; {
		_, _, info, err := s.ListPrescriptions(ctx, p.OrgID, p.UserID, p.ID,
			storage.PageRequest{Limit: min(100, depth-offset), Cursor: req.Cursor})
		require.NoError(b, err)
		req.Cursor, offset = info.LastKey, offset+info.Count
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		_, items, info, err := s.ListPrescriptions(ctx, p.OrgID, p.UserID, p.ID, req)
		if err != nil || len(items) != limit || info.Offset != depth {
			b.Fatalf("got %d items at offset %d, %v", len(items), info.Offset, err)
		}
	}
}

func BenchmarkListPrescriptionsFirstPage(b *testing.B) { benchmarkListPrescriptions(b, 0) }

func BenchmarkListPrescriptionsDeep(b *testing.B) { benchmarkListPrescriptions(b, 9_000) }

// benchmarkListPrescriptionsJSON is benchmarkListPrescriptions for the
// served path, which copies the stored bytes instead of decoding them.
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
