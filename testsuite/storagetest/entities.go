package storagetest

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage"
	"github.com/rxgate/rxgate/testsuite/fake"
)

// entityTests cover storage.Store's records: partners, organizations,
// users, patients, prescriptions, custom drugs, webhook endpoints, the
// stored-JSON lists and their cursors.
var entityTests = []test{
	{name: "Partners", run: testPartners},
	{name: "Organizations", run: testOrganizations},
	{name: "Users", run: testUsers},
	{name: "SetUserDisabled", run: testSetUserDisabled},
	{name: "DisabledAtIncreases", run: testDisabledAtIncreases},
	{name: "ListUsersPages", run: testListUsersPages},
	{name: "Patients", run: testPatients},
	{name: "UpdatePatient", run: testUpdatePatient},
	{name: "UpdatePatientConcurrently", run: testUpdatePatientConcurrently},
	{name: "Prescriptions", run: testPrescriptions},
	{name: "ListPrescriptionsPages", run: testListPrescriptionsPages},
	{name: "ListPrescriptionsPagesWhileCreating", run: testListPrescriptionsPagesWhileCreating},
	{name: "Cursors", run: testCursors},
	{name: "CustomDrugs", run: testCustomDrugs},
	{name: "CreateCustomDrugsBulk", run: testCreateCustomDrugsBulk},
	{name: "WebhookEndpoints", run: testWebhookEndpoints},
	{name: "RotateWebhookSecret", run: testRotateWebhookSecret},
	{name: "WebhookSignatureScheme", run: testWebhookSignatureScheme},
	{name: "Meta", run: testMeta},
	{name: "OperatorKeys", run: testOperatorKeys},
	{name: "InvalidIDs", run: testInvalidIDs},
}

func testPartners(t *testing.T, e *env) {
	ctx := t.Context()
	require.NoError(t, e.s.CreatePartner(ctx, &storage.Partner{ID: "fixed-id", Name: "Fixed"}))
	first := createPartner(t, e.s, "Acme")
	second := createPartner(t, e.s, "Globex")
	require.NotEmpty(t, first.ID)
	require.NotEqual(t, first.ID, second.ID)
	require.True(t, first.CreatedAt.Before(second.CreatedAt), "creation times must come from the store's clock")

	got, err := e.s.GetPartner(ctx, first.ID)
	require.NoError(t, err)
	requireEqual(t, first, got)

	all, err := e.s.ListPartners(ctx)
	require.NoError(t, err)
	require.Len(t, all, 3)
	require.Equal(t, []string{first.ID, second.ID}, []string{all[0].ID, all[1].ID}, "generated ids list in creation order")
	requireEqual(t, *second, all[1])

	err = e.s.CreatePartner(ctx, &storage.Partner{ID: first.ID, Name: "Impostor"})
	require.ErrorIs(t, err, storage.ErrAlreadyExists)
	got, err = e.s.GetPartner(ctx, first.ID)
	require.NoError(t, err)
	require.Equal(t, "Acme", got.Name, "a refused create must not overwrite")

	secret := storage.NewSecret()
	_, err = e.s.SetPartnerSecret(ctx, first.ID, storage.HashSecret(secret))
	require.NoError(t, err)
	got, err = e.s.GetPartner(ctx, first.ID)
	require.NoError(t, err)
	require.True(t, storage.SecretMatches(got.SecretHash, secret))
	require.False(t, storage.SecretMatches(got.SecretHash, storage.NewSecret()))
	require.False(t, storage.SecretMatches(got.SecretHash, ""))
	requireEqual(t, first.CreatedAt, got.CreatedAt, "rotating the secret keeps the creation time")

	_, err = e.s.GetPartner(ctx, "unknown")
	require.ErrorIs(t, err, storage.ErrNotFound)
	_, err = e.s.SetPartnerSecret(ctx, "unknown", storage.HashSecret(secret))
	require.ErrorIs(t, err, storage.ErrNotFound)
}

func testOrganizations(t *testing.T, e *env) {
	ctx := t.Context()
	partner := createPartner(t, e.s, "Acme")

	err := e.s.CreateOrganization(ctx, &storage.Organization{PartnerID: "unknown", Name: "Orphan"})
	require.ErrorIs(t, err, storage.ErrNotFound)
	all, err := e.s.ListOrganizations(ctx)
	require.NoError(t, err)
	require.Empty(t, all, "a refused create must not store anything")

	org := createOrganization(t, e.s, partner.ID, "Clinic")
	other := createOrganization(t, e.s, partner.ID, "Other clinic")
	got, err := e.s.GetOrganization(ctx, org.ID)
	require.NoError(t, err)
	requireEqual(t, org, got)
	require.False(t, got.Validated())
	require.True(t, got.Allows("patients"))
	require.False(t, got.Allows("admin"))

	all, err = e.s.ListOrganizations(ctx)
	require.NoError(t, err)
	requireEqual(t, []storage.Organization{*org, *other}, all)

	err = e.s.CreateOrganization(ctx, &storage.Organization{ID: org.ID, PartnerID: partner.ID, Name: "Impostor"})
	require.ErrorIs(t, err, storage.ErrAlreadyExists)

	validated, err := e.s.ValidateOrganization(ctx, org.ID)
	require.NoError(t, err)
	require.True(t, validated.Validated())
	require.True(t, validated.ValidatedAt.After(org.CreatedAt))
	again, err := e.s.ValidateOrganization(ctx, org.ID)
	require.NoError(t, err)
	requireEqual(t, validated, again, "validating twice keeps the first validated_at")
	got, err = e.s.GetOrganization(ctx, org.ID)
	require.NoError(t, err)
	requireEqual(t, validated, got)

	secret := storage.NewSecret()
	_, err = e.s.SetOrganizationSecret(ctx, org.ID, storage.HashSecret(secret))
	require.NoError(t, err)
	got, err = e.s.GetOrganization(ctx, org.ID)
	require.NoError(t, err)
	require.True(t, storage.SecretMatches(got.SecretHash, secret))
	requireEqual(t, validated.ValidatedAt, got.ValidatedAt, "rotating the secret keeps the validation")

	_, err = e.s.GetOrganization(ctx, "unknown")
	require.ErrorIs(t, err, storage.ErrNotFound)
	_, err = e.s.ValidateOrganization(ctx, "unknown")
	require.ErrorIs(t, err, storage.ErrNotFound)
	_, err = e.s.SetOrganizationSecret(ctx, "unknown", storage.HashSecret(secret))
	require.ErrorIs(t, err, storage.ErrNotFound)
}

func testUsers(t *testing.T, e *env) {
	ctx := t.Context()
	partner := createPartner(t, e.s, "Acme")
	org := createOrganization(t, e.s, partner.ID, "Clinic")
	otherOrg := createOrganization(t, e.s, partner.ID, "Other clinic")

	err := e.s.CreateUser(ctx, &storage.User{OrgID: "unknown", Email: "a@example.com"})
	require.ErrorIs(t, err, storage.ErrNotFound)

	alice := createUser(t, e.s, org.ID, "Alice@Example.com")
	got, err := e.s.GetUser(ctx, org.ID, alice.ID)
	require.NoError(t, err)
	requireEqual(t, alice, got)
	require.Equal(t, alice.CreatedAt, alice.UpdatedAt)

	tests := []struct {
		name  string
		orgID string
		email string
		want  error
	}{
		{name: "same e-mail", orgID: org.ID, email: "Alice@Example.com", want: storage.ErrAlreadyExists},
		{name: "lower case", orgID: org.ID, email: "alice@example.com", want: storage.ErrAlreadyExists},
		{name: "upper case", orgID: org.ID, email: "ALICE@EXAMPLE.COM", want: storage.ErrAlreadyExists},
		{name: "mixed case", orgID: org.ID, email: "aLiCe@eXaMpLe.CoM", want: storage.ErrAlreadyExists},
		{name: "another e-mail", orgID: org.ID, email: "bob@example.com"},
		{name: "same e-mail in another organization", orgID: otherOrg.ID, email: "alice@example.com"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := &storage.User{OrgID: tt.orgID, Email: tt.email, Role: storage.RoleMember}
			err := e.s.CreateUser(t.Context(), u)
			if tt.want != nil {
				require.ErrorIs(t, err, tt.want)
				return
			}
			require.NoError(t, err)
			got, err := e.s.GetUser(t.Context(), tt.orgID, u.ID)
			require.NoError(t, err)
			requireEqual(t, u, got)
		})
	}

	err = e.s.CreateUser(ctx, &storage.User{OrgID: org.ID, ID: alice.ID, Email: "fresh@example.com"})
	require.ErrorIs(t, err, storage.ErrAlreadyExists, "a taken user id")
	got, err = e.s.GetUser(ctx, org.ID, alice.ID)
	require.NoError(t, err)
	requireEqual(t, alice, got, "a refused create must not overwrite")

	o, u, err := e.s.GetMember(ctx, org.ID, alice.ID)
	require.NoError(t, err)
	requireEqual(t, org, o)
	requireEqual(t, alice, u)
	_, _, err = e.s.GetMember(ctx, otherOrg.ID, alice.ID)
	require.ErrorIs(t, err, storage.ErrNotFound, "a user of another organization")
	_, _, err = e.s.GetMember(ctx, "unknown", alice.ID)
	require.ErrorIs(t, err, storage.ErrNotFound)
	_, _, err = e.s.GetMember(ctx, org.ID, "unknown")
	require.ErrorIs(t, err, storage.ErrNotFound)
	_, err = e.s.GetUser(ctx, otherOrg.ID, alice.ID)
	require.ErrorIs(t, err, storage.ErrNotFound)
}

func testSetUserDisabled(t *testing.T, e *env) {
	partner := createPartner(t, e.s, "Acme")
	org := createOrganization(t, e.s, partner.ID, "Clinic")
	otherOrg := createOrganization(t, e.s, partner.ID, "Other clinic")
	user := createUser(t, e.s, org.ID, "grace@example.com")
	require.Equal(t, storage.RolePrescriber, user.Role)
	last := *user

	// The rows run in order against one user: each starts where the one
	// before left it.
	tests := []struct {
		name        string
		orgID       string
		userID      string
		disabled    bool
		wantErr     error
		wantChanged bool
	}{
		{name: "disable an enabled user", orgID: org.ID, userID: user.ID, disabled: true, wantChanged: true},
		{name: "disable again", orgID: org.ID, userID: user.ID, disabled: true},
		{name: "enable", orgID: org.ID, userID: user.ID, disabled: false, wantChanged: true},
		{name: "enable again", orgID: org.ID, userID: user.ID, disabled: false},
		{name: "unknown user", orgID: org.ID, userID: "unknown", disabled: true, wantErr: storage.ErrNotFound},
		{name: "user of another organization", orgID: otherOrg.ID, userID: user.ID, disabled: true, wantErr: storage.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, changed, err := e.s.SetUserDisabled(t.Context(), tt.orgID, tt.userID, tt.disabled)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				stored, err := e.s.GetUser(t.Context(), org.ID, user.ID)
				require.NoError(t, err)
				requireEqual(t, &last, stored, "a refused call must not write")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.wantChanged, changed)
			want := last
			want.Disabled = tt.disabled
			want.Role = storage.RoleMember
			if changed {
				require.True(t, got.UpdatedAt.After(last.UpdatedAt), "a change sets updated_at")
				want.UpdatedAt = got.UpdatedAt
				if tt.disabled {
					// Tokens issued before it stay void after an enable.
					require.Equal(t, got.UpdatedAt, got.DisabledAt, "a disable records its time")
					want.DisabledAt = got.DisabledAt
				}
			}
			requireEqual(t, &want, got)
			stored, err := e.s.GetUser(t.Context(), org.ID, user.ID)
			require.NoError(t, err)
			requireEqual(t, &want, stored)
			last = want
		})
	}
}

// testDisabledAtIncreases checks that every disable of a user records a
// later time than the one before, also when the store's clock has not moved
// or went back: a built-in token carries the DisabledAt it was minted under,
// and one minted between two disables must not match the second.
func testDisabledAtIncreases(t *testing.T, e *env) {
	ctx := t.Context()
	clock := fake.NewClock(e.clock.Now())
	s, _ := e.open(t, clock.Now)
	partner := createPartner(t, s, "Acme")
	org := createOrganization(t, s, partner.ID, "Clinic")
	user := createUser(t, s, org.ID, "grace@example.com")

	var last time.Time
	for i, move := range []time.Duration{0, 0, 0, -time.Hour, 2 * time.Hour} {
		clock.Advance(move)
		got, changed, err := s.SetUserDisabled(ctx, org.ID, user.ID, true)
		require.NoError(t, err)
		require.True(t, changed)
		require.True(t, got.DisabledAt.After(last), "disable %d: %s is not after %s", i, got.DisabledAt, last)
		require.Equal(t, got.UpdatedAt, got.DisabledAt, "a disable records its time")
		stored, err := s.GetUser(ctx, org.ID, user.ID)
		require.NoError(t, err)
		require.Equal(t, got.DisabledAt, stored.DisabledAt)
		last = got.DisabledAt
		_, _, err = s.SetUserDisabled(ctx, org.ID, user.ID, false)
		require.NoError(t, err)
	}
	require.Equal(t, storage.Timestamp(clock.Now()), last, "once the clock is ahead again, its time")
}

func testListUsersPages(t *testing.T, e *env) {
	ctx := t.Context()
	partner := createPartner(t, e.s, "Acme")
	org := createOrganization(t, e.s, partner.ID, "Clinic")
	otherOrg := createOrganization(t, e.s, partner.ID, "Other clinic")
	var want []string
	for i := range e.cfg.users {
		want = append(want, createUser(t, e.s, org.ID, fmt.Sprintf("user%03d@example.com", i)).ID)
	}
	createUser(t, e.s, otherOrg.ID, "someone@example.com")
	createUser(t, e.s, otherOrg.ID, "someone.else@example.com")

	for limit := 1; limit <= 100; limit++ {
		t.Run(fmt.Sprintf("limit=%d", limit), func(t *testing.T) {
			t.Parallel() // every walk only reads
			got := walk(t, limit, userPages(t, e.s, org.ID), nil)
			require.Equal(t, want, userIDs(got), "creation order, each user once")
		})
	}

	_, info, err := e.s.ListUsers(ctx, org.ID, storage.PageRequest{Limit: 1})
	require.NoError(t, err)
	require.NotEmpty(t, info.LastKey)
	_, _, err = e.s.ListUsers(ctx, otherOrg.ID, storage.PageRequest{Limit: 1, Cursor: info.LastKey})
	require.ErrorIs(t, err, storage.ErrBadCursor, "a cursor is bound to its organization")

	users, info, err := e.s.ListUsers(ctx, "unknown", storage.PageRequest{Limit: 10})
	require.NoError(t, err, "an organization without users lists nothing")
	require.Empty(t, users)
	require.Equal(t, storage.PageInfo{Limit: 10}, info)
}

func testPatients(t *testing.T, e *env) {
	ctx := t.Context()
	a := createTenant(t, e.s, "a")
	b := createTenant(t, e.s, "b")
	colleague := createUser(t, e.s, a.org.ID, "colleague@a.example")

	err := e.s.CreatePatient(ctx, &storage.Patient{OrgID: a.org.ID, UserID: "unknown"})
	require.ErrorIs(t, err, storage.ErrNotFound)
	err = e.s.CreatePatient(ctx, &storage.Patient{OrgID: b.org.ID, UserID: a.user.ID})
	require.ErrorIs(t, err, storage.ErrNotFound, "a user of another organization")

	p := createPatient(t, e.s, a.user, "PP-1")
	require.NotEmpty(t, p.ID)
	require.Equal(t, p.CreatedAt, p.UpdatedAt)
	got, err := e.s.GetPatient(ctx, a.org.ID, a.user.ID, p.ID)
	require.NoError(t, err)
	requireEqual(t, p, got)

	tests := []struct {
		name string
		user *storage.User
		id   string
		ppid string
		want error
	}{
		{name: "partner_patient_id taken by the same user", user: a.user, ppid: "PP-1", want: storage.ErrAlreadyExists},
		{name: "partner_patient_id taken in the organization", user: colleague, ppid: "PP-1", want: storage.ErrAlreadyExists},
		{name: "patient id taken", user: a.user, id: p.ID, ppid: "PP-2", want: storage.ErrAlreadyExists},
		{name: "same partner_patient_id in another organization", user: b.user, ppid: "PP-1"},
		{name: "another partner_patient_id", user: colleague, ppid: "PP-2"},
		{name: "no partner_patient_id", user: a.user},
		{name: "no partner_patient_id again", user: a.user},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			np := &storage.Patient{OrgID: tt.user.OrgID, UserID: tt.user.ID, ID: tt.id, PartnerPatientID: tt.ppid}
			err := e.s.CreatePatient(t.Context(), np)
			if tt.want != nil {
				require.ErrorIs(t, err, tt.want)
				return
			}
			require.NoError(t, err)
			got, err := e.s.GetPatient(t.Context(), np.OrgID, np.UserID, np.ID)
			require.NoError(t, err)
			requireEqual(t, np, got)
		})
	}

	got, err = e.s.GetPatient(ctx, a.org.ID, a.user.ID, p.ID)
	require.NoError(t, err)
	requireEqual(t, p, got, "refused creates must not overwrite")

	elsewhere := []struct {
		name, orgID, userID string
	}{
		{name: "another user of the organization", orgID: a.org.ID, userID: colleague.ID},
		{name: "another organization", orgID: b.org.ID, userID: b.user.ID},
		{name: "the user under another organization", orgID: b.org.ID, userID: a.user.ID},
	}
	for _, tt := range elsewhere {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.s.GetPatient(t.Context(), tt.orgID, tt.userID, p.ID)
			require.ErrorIs(t, err, storage.ErrNotFound)
			_, err = e.s.UpdatePatient(t.Context(), tt.orgID, tt.userID, p.ID, mustNotRun[storage.Patient](t))
			require.ErrorIs(t, err, storage.ErrNotFound)
			_, _, _, err = listPrescriptions(t, e.s, tt.orgID, tt.userID, p.ID, storage.PageRequest{Limit: 10})
			require.ErrorIs(t, err, storage.ErrNotFound)
			err = e.s.CreatePrescription(t.Context(), &storage.Prescription{OrgID: tt.orgID, UserID: tt.userID, PatientID: p.ID})
			require.ErrorIs(t, err, storage.ErrNotFound)
		})
	}
}

func testUpdatePatient(t *testing.T, e *env) {
	ctx := t.Context()
	a := createTenant(t, e.s, "a")
	p := a.patient

	requested := e.clock.Now()
	updated, err := e.s.UpdatePatient(ctx, p.OrgID, p.UserID, p.ID, func(got *storage.Patient) error {
		requireEqual(t, p, got, "the updater sees the stored patient")
		got.GivenName = ptr("Janet")
		got.Phone = ptr("0400000000")
		got.DateOfBirth = nil
		got.Verifications = append(got.Verifications, storage.Verification{
			Status: "requested", RequestedAt: requested, Fields: []string{"given_name"},
		})
		return nil
	})
	require.NoError(t, err)
	want := *p
	want.GivenName = ptr("Janet")
	want.Phone = ptr("0400000000")
	want.DateOfBirth = nil
	want.Verifications = []storage.Verification{{Status: "requested", RequestedAt: requested, Fields: []string{"given_name"}}}
	require.True(t, updated.UpdatedAt.After(p.UpdatedAt), "an update sets updated_at")
	want.UpdatedAt = updated.UpdatedAt
	requireEqual(t, &want, updated)
	got, err := e.s.GetPatient(ctx, p.OrgID, p.UserID, p.ID)
	require.NoError(t, err)
	requireEqual(t, &want, got)

	t.Run("updater error aborts without writing", func(t *testing.T) {
		calls := 0
		res, err := e.s.UpdatePatient(t.Context(), p.OrgID, p.UserID, p.ID, func(got *storage.Patient) error {
			calls++
			got.GivenName = ptr("Mallory")
			got.Email = ptr("mallory@example.com")
			return fmt.Errorf("checking the patient: %w", errUpdater)
		})
		require.ErrorIs(t, err, errUpdater, "the updater's error is returned")
		require.Nil(t, res)
		require.Equal(t, 1, calls, "an updater error is not retried")
		got, err := e.s.GetPatient(t.Context(), p.OrgID, p.UserID, p.ID)
		require.NoError(t, err)
		requireEqual(t, &want, got)
	})

	t.Run("unknown patient", func(t *testing.T) {
		_, err := e.s.UpdatePatient(t.Context(), p.OrgID, p.UserID, "unknown", mustNotRun[storage.Patient](t))
		require.ErrorIs(t, err, storage.ErrNotFound)
	})
}

func testPrescriptions(t *testing.T, e *env) {
	ctx := t.Context()
	a := createTenant(t, e.s, "a")
	second := createPatient(t, e.s, a.user, "")
	b := createTenant(t, e.s, "b")

	err := e.s.CreatePrescription(ctx, &storage.Prescription{OrgID: a.org.ID, UserID: a.user.ID, PatientID: "unknown"})
	require.ErrorIs(t, err, storage.ErrNotFound)

	rx := &storage.Prescription{
		OrgID:            a.org.ID,
		UserID:           a.user.ID,
		PatientID:        a.patient.ID,
		PrescriptionItem: storage.PrescriptionItem{ItemName: "Amoxicillin 500 mg capsule", Quantity: "20"},
		Status:           storage.StatusCeased,
		Error:            &storage.PrescriptionError{Description: "set by the caller"},
		Prescriber:       storage.Prescriber{GivenName: "Set by the caller"},
	}
	require.NoError(t, e.s.CreatePrescription(ctx, rx))
	require.Len(t, rx.SCID, 18)
	for _, c := range rx.SCID {
		require.Contains(t, crockford, string(c), "scid %q", rx.SCID)
	}
	require.False(t, rx.CreatedAt.IsZero())
	require.Equal(t, time.UTC, rx.CreatedAt.Location())
	require.Equal(t, rx.CreatedAt.Format(createdDateLayout), rx.CreatedDate)
	require.Equal(t, storage.StatusActive, rx.Status)
	require.Nil(t, rx.Error)
	require.Equal(t, "ELECTRONIC", rx.PrescriptionType)
	require.Equal(t, storage.Prescriber{
		Title: a.user.Title, GivenName: a.user.GivenName, FamilyName: a.user.FamilyName, UserID: a.user.ID,
	}, rx.Prescriber)

	more := createPrescriptions(t, e.s, a.patient, 3)
	created := append([]storage.Prescription{*rx}, more...)
	otherRx := createPrescriptions(t, e.s, second, 1)[0]

	patient, items, info, err := listPrescriptions(t, e.s, a.org.ID, a.user.ID, a.patient.ID, storage.PageRequest{Limit: 10})
	require.NoError(t, err)
	requireEqual(t, a.patient, patient, "the patient is returned with its prescriptions")
	newestFirst := slices.Clone(created)
	slices.Reverse(newestFirst)
	requireEqual(t, newestFirst, items, "newest first")
	require.Equal(t, storage.PageInfo{Count: 4, Limit: 10}, info)
	for i := 1; i < len(items); i++ {
		require.True(t, items[i-1].CreatedAt.After(items[i].CreatedAt))
	}

	_, items, info, err = listPrescriptions(t, e.s, a.org.ID, a.user.ID, second.ID, storage.PageRequest{Limit: 10})
	require.NoError(t, err)
	requireEqual(t, []storage.Prescription{otherRx}, items)
	require.Equal(t, storage.PageInfo{Count: 1, Limit: 10}, info)

	updated, err := e.s.UpdatePrescription(ctx, a.org.ID, a.user.ID, a.patient.ID, rx.SCID, func(p *storage.Prescription) error {
		requireEqual(t, rx, p, "the updater sees the stored prescription")
		p.Status = storage.StatusCeased
		return nil
	})
	require.NoError(t, err)
	want := *rx
	want.Status = storage.StatusCeased
	requireEqual(t, &want, updated)
	_, items, _, err = listPrescriptions(t, e.s, a.org.ID, a.user.ID, a.patient.ID, storage.PageRequest{Limit: 10})
	require.NoError(t, err)
	requireEqual(t, want, items[len(items)-1], "an update keeps the prescription's place")

	_, err = e.s.UpdatePrescription(ctx, a.org.ID, a.user.ID, a.patient.ID, rx.SCID, func(p *storage.Prescription) error {
		p.Status = storage.StatusError
		return errUpdater
	})
	require.ErrorIs(t, err, errUpdater)
	_, items, _, err = listPrescriptions(t, e.s, a.org.ID, a.user.ID, a.patient.ID, storage.PageRequest{Limit: 10})
	require.NoError(t, err)
	requireEqual(t, want, items[len(items)-1], "an updater error aborts without writing")

	tests := []struct {
		name                     string
		orgID, userID, patientID string
		scid                     string
	}{
		{name: "scid of another patient of the user", orgID: a.org.ID, userID: a.user.ID, patientID: a.patient.ID, scid: otherRx.SCID},
		{name: "scid through another patient", orgID: a.org.ID, userID: a.user.ID, patientID: second.ID, scid: rx.SCID},
		{name: "scid through another organization", orgID: b.org.ID, userID: b.user.ID, patientID: b.patient.ID, scid: rx.SCID},
		{name: "unknown scid", orgID: a.org.ID, userID: a.user.ID, patientID: a.patient.ID, scid: "0000000000000000ZZ"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.s.UpdatePrescription(t.Context(), tt.orgID, tt.userID, tt.patientID, tt.scid, mustNotRun[storage.Prescription](t))
			require.ErrorIs(t, err, storage.ErrNotFound)
		})
	}
	_, items, _, err = listPrescriptions(t, e.s, a.org.ID, a.user.ID, second.ID, storage.PageRequest{Limit: 10})
	require.NoError(t, err)
	requireEqual(t, []storage.Prescription{otherRx}, items, "refused updates must not write")

	err = e.s.CreatePrescription(ctx, &storage.Prescription{OrgID: a.org.ID, UserID: a.user.ID, PatientID: second.ID, SCID: rx.SCID})
	require.ErrorIs(t, err, storage.ErrAlreadyExists, "a scid is unique in its organization")
}

func testListPrescriptionsPages(t *testing.T, e *env) {
	a := createTenant(t, e.s, "a")
	created := createPrescriptions(t, e.s, a.patient, e.cfg.prescriptions)
	slices.Reverse(created)
	want := scids(created)
	// Another patient's prescriptions must not show up in the walk.
	createPrescriptions(t, e.s, createPatient(t, e.s, a.user, ""), 3)

	for _, limit := range []int{1, 7, 20, 50} {
		t.Run(fmt.Sprintf("limit=%d", limit), func(t *testing.T) {
			t.Parallel() // every walk only reads
			got := walk(t, limit, prescriptionPages(t, e.s, a.patient), nil)
			require.Equal(t, want, scids(got), "newest first, each prescription once")
			requireEqual(t, created, got)
		})
	}
}

func testListPrescriptionsPagesWhileCreating(t *testing.T, e *env) {
	a := createTenant(t, e.s, "a")
	for _, limit := range []int{1, 7, 20, 50} {
		t.Run(fmt.Sprintf("limit=%d", limit), func(t *testing.T) {
			p := createPatient(t, e.s, a.user, "")
			created := createPrescriptions(t, e.s, p, e.cfg.prescriptions)
			slices.Reverse(created)
			added := 0
			got := walk(t, limit, prescriptionPages(t, e.s, p), func() {
				createPrescriptions(t, e.s, p, 1)
				added++
			})
			require.Equal(t, scids(created), scids(got), "every prescription that existed at the start, once, newest first")
			require.Equal(t, (len(created)-1)/limit, added, "one prescription created after each page but the last")

			all := walk(t, 100, prescriptionPages(t, e.s, p), nil)
			require.Len(t, all, len(created)+added, "a new walk sees the prescriptions created during the last")
		})
	}
}

func testCursors(t *testing.T, e *env) {
	ctx := t.Context()
	a := createTenant(t, e.s, "a")
	b := createTenant(t, e.s, "b")
	sibling := createPatient(t, e.s, a.user, "")
	colleague := createPatient(t, e.s, createUser(t, e.s, a.org.ID, "colleague@a.example"), "")
	for _, p := range []*storage.Patient{a.patient, b.patient, sibling, colleague} {
		createPrescriptions(t, e.s, p, 5)
	}
	createUser(t, e.s, a.org.ID, "third@a.example")

	list := func(p *storage.Patient, cursor string) error {
		_, _, _, err := listPrescriptions(t, e.s, p.OrgID, p.UserID, p.ID, storage.PageRequest{Limit: 2, Cursor: cursor})
		return err
	}
	_, _, info, err := listPrescriptions(t, e.s, a.org.ID, a.user.ID, a.patient.ID, storage.PageRequest{Limit: 2})
	require.NoError(t, err)
	cursor := info.LastKey
	require.NotEmpty(t, cursor)
	require.NoError(t, list(a.patient, cursor))

	_, userInfo, err := e.s.ListUsers(ctx, a.org.ID, storage.PageRequest{Limit: 1})
	require.NoError(t, err)
	require.NotEmpty(t, userInfo.LastKey)

	foreign, _ := e.open(t, e.clock.Now)
	fa := createTenant(t, foreign, "a")
	createPrescriptions(t, foreign, fa.patient, 3)
	_, _, foreignInfo, err := listPrescriptions(t, foreign, fa.patient.OrgID, fa.patient.UserID, fa.patient.ID, storage.PageRequest{Limit: 2})
	require.NoError(t, err)

	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	require.NoError(t, err)

	type cursorCase struct {
		name    string
		patient *storage.Patient
		cursor  string
	}
	tests := []cursorCase{
		{name: "another patient of the user", patient: sibling, cursor: cursor},
		{name: "a patient of another user", patient: colleague, cursor: cursor},
		{name: "a patient of another organization", patient: b.patient, cursor: cursor},
		{name: "a users cursor", patient: a.patient, cursor: userInfo.LastKey},
		{name: "a cursor of another store", patient: a.patient, cursor: foreignInfo.LastKey},
		{name: "not base64", patient: a.patient, cursor: "not a cursor!"},
		{name: "one character", patient: a.patient, cursor: "A"},
		{name: "standard base64 padding", patient: a.patient, cursor: cursor + "=="},
		{name: "a character appended", patient: a.patient, cursor: cursor + "A"},
		{name: "line break appended", patient: a.patient, cursor: cursor + "\n"},
		{name: "line break inserted", patient: a.patient, cursor: cursor[:10] + "\r\n" + cursor[10:]},
		{name: "last character dropped", patient: a.patient, cursor: cursor[:len(cursor)-1]},
		{name: "long garbage", patient: a.patient, cursor: strings.Repeat("QUFB", 1_000)},
		{name: "a uuid", patient: a.patient, cursor: storage.NewID()},
		{name: "empty payload", patient: a.patient, cursor: base64.RawURLEncoding.EncodeToString(make([]byte, 20))},
		{name: "truncated", patient: a.patient, cursor: base64.RawURLEncoding.EncodeToString(raw[:len(raw)-1])},
		{name: "a byte appended", patient: a.patient, cursor: base64.RawURLEncoding.EncodeToString(append(slices.Clone(raw), 0))},
		{name: "a byte prepended", patient: a.patient, cursor: base64.RawURLEncoding.EncodeToString(append([]byte{raw[0]}, raw...))},
	}
	if len(raw)%3 != 0 {
		// The last character carries bits beyond the payload's end;
		// setting one spells the same bytes with another string.
		const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
		last := strings.IndexByte(alphabet, cursor[len(cursor)-1])
		tests = append(tests, cursorCase{
			name: "unused trailing bits set", patient: a.patient, cursor: cursor[:len(cursor)-1] + string(alphabet[last^1]),
		})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel() // every call only reads
			require.ErrorIs(t, list(tt.patient, tt.cursor), storage.ErrBadCursor)
		})
	}

	t.Run("every byte changed", func(t *testing.T) {
		t.Parallel() // every call only reads
		for i := range raw {
			for _, mask := range []byte{0x01, 0x80, 0xff} {
				changed := slices.Clone(raw)
				changed[i] ^= mask
				err := list(a.patient, base64.RawURLEncoding.EncodeToString(changed))
				require.ErrorIs(t, err, storage.ErrBadCursor, "byte %d xor %#x", i, mask)
			}
		}
	})

	t.Run("a prescription cursor on a users list", func(t *testing.T) {
		t.Parallel() // every call only reads
		_, _, err := e.s.ListUsers(t.Context(), a.org.ID, storage.PageRequest{Limit: 1, Cursor: cursor})
		require.ErrorIs(t, err, storage.ErrBadCursor)
	})
}

func testCustomDrugs(t *testing.T, e *env) {
	ctx := t.Context()
	a := createTenant(t, e.s, "a")
	b := createTenant(t, e.s, "b")
	colleague := createUser(t, e.s, a.org.ID, "colleague@a.example")

	drug := func(userID, name string) storage.CustomDrug {
		return storage.CustomDrug{
			OrgID:                 a.org.ID,
			UserID:                userID,
			ItemGenericName:       name,
			ItemStrength:          "10 mg",
			ItemForm:              "tablet",
			RouteOfAdministration: "oral",
			Quantity:              "30",
			MaxRepeats:            "5",
			PoisonClass:           "S4",
		}
	}
	orgDrug := drug("", "Org drug")
	mine1, mine2 := drug(a.user.ID, "Mine 1"), drug(a.user.ID, "Mine 2")
	mine2.BrandName, mine2.Description = "Brand", "with optional members"
	theirs := drug(colleague.ID, "Theirs")
	for _, d := range []*storage.CustomDrug{&orgDrug, &mine1, &mine2, &theirs} {
		require.NoError(t, createDrug(t, e.s, d))
		require.NotEmpty(t, d.ID)
	}

	got, err := listCustomDrugs(t, e.s, a.org.ID, a.user.ID)
	require.NoError(t, err)
	requireEqual(t, listed(orgDrug, mine1, mine2), got, "organization-level drugs, then the user's own")
	got, err = listCustomDrugs(t, e.s, a.org.ID, colleague.ID)
	require.NoError(t, err)
	requireEqual(t, listed(orgDrug, theirs), got)
	got, err = listCustomDrugs(t, e.s, b.org.ID, b.user.ID)
	require.NoError(t, err)
	require.Empty(t, got, "another organization's drugs")

	missing := []struct {
		name string
		d    storage.CustomDrug
	}{
		{name: "unknown organization", d: storage.CustomDrug{OrgID: "unknown", ItemGenericName: "x"}},
		{name: "unknown user", d: storage.CustomDrug{OrgID: a.org.ID, UserID: "unknown", ItemGenericName: "x"}},
		{name: "user of another organization", d: storage.CustomDrug{OrgID: b.org.ID, UserID: a.user.ID, ItemGenericName: "x"}},
	}
	for _, tt := range missing {
		t.Run("create for "+tt.name, func(t *testing.T) {
			require.ErrorIs(t, createDrug(t, e.s, &tt.d), storage.ErrNotFound)
		})
	}

	updated, err := e.s.UpdateCustomDrug(ctx, a.org.ID, a.user.ID, mine1.ID, func(d *storage.CustomDrug) error {
		requireEqual(t, &mine1, d, "the updater sees the stored drug")
		d.Quantity = "60"
		d.UserID = colleague.ID // ignored: the ids come from the call
		return nil
	})
	require.NoError(t, err)
	mine1.Quantity = "60"
	requireEqual(t, &mine1, updated)

	_, err = e.s.UpdateCustomDrug(ctx, a.org.ID, a.user.ID, mine1.ID, func(d *storage.CustomDrug) error {
		d.Quantity = "90"
		return errUpdater
	})
	require.ErrorIs(t, err, errUpdater)

	tests := []struct {
		name, orgID, userID, drugID string
	}{
		{name: "an organization-level drug", orgID: a.org.ID, userID: a.user.ID, drugID: orgDrug.ID},
		{name: "another user's drug", orgID: a.org.ID, userID: a.user.ID, drugID: theirs.ID},
		{name: "a drug through another organization", orgID: b.org.ID, userID: b.user.ID, drugID: mine1.ID},
		{name: "unknown drug", orgID: a.org.ID, userID: a.user.ID, drugID: "unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.s.UpdateCustomDrug(t.Context(), tt.orgID, tt.userID, tt.drugID, mustNotRun[storage.CustomDrug](t))
			require.ErrorIs(t, err, storage.ErrNotFound, "update")
			require.ErrorIs(t, e.s.DeleteCustomDrug(t.Context(), tt.orgID, tt.userID, tt.drugID), storage.ErrNotFound, "delete")
		})
	}

	got, err = listCustomDrugs(t, e.s, a.org.ID, colleague.ID)
	require.NoError(t, err)
	requireEqual(t, listed(orgDrug, theirs), got, "refused updates and deletes must not write")

	require.NoError(t, e.s.DeleteCustomDrug(ctx, a.org.ID, a.user.ID, mine2.ID))
	require.ErrorIs(t, e.s.DeleteCustomDrug(ctx, a.org.ID, a.user.ID, mine2.ID), storage.ErrNotFound, "deleting twice")
	got, err = listCustomDrugs(t, e.s, a.org.ID, a.user.ID)
	require.NoError(t, err)
	requireEqual(t, listed(orgDrug, mine1), got, "an updater error aborts without writing")
}

func testCreateCustomDrugsBulk(t *testing.T, e *env) {
	ctx := t.Context()
	a := createTenant(t, e.s, "a")
	orgDrug := storage.CustomDrug{OrgID: a.org.ID, ItemGenericName: "Org drug"}
	require.NoError(t, createDrug(t, e.s, &orgDrug))

	drugs := make([]storage.CustomDrug, e.cfg.drugs)
	for i := range drugs {
		drugs[i] = storage.CustomDrug{
			OrgID:           a.org.ID,
			UserID:          a.user.ID,
			ItemGenericName: fmt.Sprintf("Drug %04d", i),
			Quantity:        "1",
		}
	}
	require.NoError(t, e.s.CreateCustomDrugs(ctx, drugs))
	ids := drugIDs(drugs)
	require.NotContains(t, ids, "", "every drug gets an id")

	got, err := listCustomDrugs(t, e.s, a.org.ID, a.user.ID)
	require.NoError(t, err)
	require.Len(t, got, len(drugs)+1)
	requireEqual(t, listed(orgDrug), got[:1])
	requireEqual(t, listed(drugs...), got[1:], "every drug stored, in creation order")

	colleague := createUser(t, e.s, a.org.ID, "colleague@a.example")
	got, err = listCustomDrugs(t, e.s, a.org.ID, colleague.ID)
	require.NoError(t, err)
	requireEqual(t, listed(orgDrug), got, "another user's drugs are not listed")
}

func testInvalidIDs(t *testing.T, e *env) {
	a := createTenant(t, e.s, "a")
	rx := createPrescriptions(t, e.s, a.patient, 1)[0]
	d := storage.CustomDrug{OrgID: a.org.ID, UserID: a.user.ID, ItemGenericName: "Mine"}
	require.NoError(t, createDrug(t, e.s, &d))
	org, user, patient := a.org.ID, a.user.ID, a.patient.ID
	hash := storage.HashSecret("secret")
	page := storage.PageRequest{Limit: 10}

	// Every call gets one bad id, the others naming records that exist.
	// emptyValid marks an id that may be empty: the store generates one, or
	// (a custom drug's user) the drug is organization-level.
	calls := []struct {
		name       string
		emptyValid bool
		call       func(t *testing.T, bad string) error
	}{
		{name: "CreatePartner id", emptyValid: true, call: func(t *testing.T, bad string) error {
			return e.s.CreatePartner(t.Context(), &storage.Partner{ID: bad})
		}},
		{name: "GetPartner", call: func(t *testing.T, bad string) error { _, err := e.s.GetPartner(t.Context(), bad); return err }},
		{name: "SetPartnerSecret", call: func(t *testing.T, bad string) error {
			_, err := e.s.SetPartnerSecret(t.Context(), bad, hash)
			return err
		}},
		{name: "CreateOrganization id", emptyValid: true, call: func(t *testing.T, bad string) error {
			return e.s.CreateOrganization(t.Context(), &storage.Organization{ID: bad, PartnerID: a.partner.ID})
		}},
		{name: "CreateOrganization partner", call: func(t *testing.T, bad string) error {
			return e.s.CreateOrganization(t.Context(), &storage.Organization{PartnerID: bad})
		}},
		{name: "GetOrganization", call: func(t *testing.T, bad string) error { _, err := e.s.GetOrganization(t.Context(), bad); return err }},
		{name: "SetOrganizationSecret", call: func(t *testing.T, bad string) error {
			_, err := e.s.SetOrganizationSecret(t.Context(), bad, hash)
			return err
		}},
		{name: "ValidateOrganization", call: func(t *testing.T, bad string) error {
			_, err := e.s.ValidateOrganization(t.Context(), bad)
			return err
		}},
		{name: "CreateUser id", emptyValid: true, call: func(t *testing.T, bad string) error {
			return e.s.CreateUser(t.Context(), &storage.User{OrgID: org, ID: bad, Email: "new@a.example"})
		}},
		{name: "CreateUser organization", call: func(t *testing.T, bad string) error {
			return e.s.CreateUser(t.Context(), &storage.User{OrgID: bad, Email: "new@a.example"})
		}},
		{name: "GetUser organization", call: func(t *testing.T, bad string) error { _, err := e.s.GetUser(t.Context(), bad, user); return err }},
		{name: "GetUser user", call: func(t *testing.T, bad string) error { _, err := e.s.GetUser(t.Context(), org, bad); return err }},
		{name: "GetMember organization", call: func(t *testing.T, bad string) error {
			_, _, err := e.s.GetMember(t.Context(), bad, user)
			return err
		}},
		{name: "GetMember user", call: func(t *testing.T, bad string) error { _, _, err := e.s.GetMember(t.Context(), org, bad); return err }},
		{name: "ListUsers", call: func(t *testing.T, bad string) error { _, _, err := e.s.ListUsers(t.Context(), bad, page); return err }},
		{name: "SetUserDisabled organization", call: func(t *testing.T, bad string) error {
			_, _, err := e.s.SetUserDisabled(t.Context(), bad, user, true)
			return err
		}},
		{name: "SetUserDisabled user", call: func(t *testing.T, bad string) error {
			_, _, err := e.s.SetUserDisabled(t.Context(), org, bad, true)
			return err
		}},
		{name: "CreatePatient id", emptyValid: true, call: func(t *testing.T, bad string) error {
			return e.s.CreatePatient(t.Context(), &storage.Patient{OrgID: org, UserID: user, ID: bad})
		}},
		{name: "CreatePatient organization", call: func(t *testing.T, bad string) error {
			return e.s.CreatePatient(t.Context(), &storage.Patient{OrgID: bad, UserID: user})
		}},
		{name: "CreatePatient user", call: func(t *testing.T, bad string) error {
			return e.s.CreatePatient(t.Context(), &storage.Patient{OrgID: org, UserID: bad})
		}},
		{name: "GetPatient organization", call: func(t *testing.T, bad string) error {
			_, err := e.s.GetPatient(t.Context(), bad, user, patient)
			return err
		}},
		{name: "GetPatient user", call: func(t *testing.T, bad string) error {
			_, err := e.s.GetPatient(t.Context(), org, bad, patient)
			return err
		}},
		{name: "GetPatient patient", call: func(t *testing.T, bad string) error {
			_, err := e.s.GetPatient(t.Context(), org, user, bad)
			return err
		}},
		{name: "UpdatePatient organization", call: func(t *testing.T, bad string) error {
			_, err := e.s.UpdatePatient(t.Context(), bad, user, patient, mustNotRun[storage.Patient](t))
			return err
		}},
		{name: "UpdatePatient user", call: func(t *testing.T, bad string) error {
			_, err := e.s.UpdatePatient(t.Context(), org, bad, patient, mustNotRun[storage.Patient](t))
			return err
		}},
		{name: "UpdatePatient patient", call: func(t *testing.T, bad string) error {
			_, err := e.s.UpdatePatient(t.Context(), org, user, bad, mustNotRun[storage.Patient](t))
			return err
		}},
		{name: "CreatePrescription scid", emptyValid: true, call: func(t *testing.T, bad string) error {
			return e.s.CreatePrescription(t.Context(), &storage.Prescription{OrgID: org, UserID: user, PatientID: patient, SCID: bad})
		}},
		{name: "CreatePrescription organization", call: func(t *testing.T, bad string) error {
			return e.s.CreatePrescription(t.Context(), &storage.Prescription{OrgID: bad, UserID: user, PatientID: patient})
		}},
		{name: "CreatePrescription user", call: func(t *testing.T, bad string) error {
			return e.s.CreatePrescription(t.Context(), &storage.Prescription{OrgID: org, UserID: bad, PatientID: patient})
		}},
		{name: "CreatePrescription patient", call: func(t *testing.T, bad string) error {
			return e.s.CreatePrescription(t.Context(), &storage.Prescription{OrgID: org, UserID: user, PatientID: bad})
		}},
		{name: "ListPrescriptionsJSON organization", call: func(t *testing.T, bad string) error {
			_, _, _, err := listPrescriptions(t, e.s, bad, user, patient, page)
			return err
		}},
		{name: "ListPrescriptionsJSON user", call: func(t *testing.T, bad string) error {
			_, _, _, err := listPrescriptions(t, e.s, org, bad, patient, page)
			return err
		}},
		{name: "ListPrescriptionsJSON patient", call: func(t *testing.T, bad string) error {
			_, _, _, err := listPrescriptions(t, e.s, org, user, bad, page)
			return err
		}},
		{name: "UpdatePrescription organization", call: func(t *testing.T, bad string) error {
			_, err := e.s.UpdatePrescription(t.Context(), bad, user, patient, rx.SCID, mustNotRun[storage.Prescription](t))
			return err
		}},
		{name: "UpdatePrescription user", call: func(t *testing.T, bad string) error {
			_, err := e.s.UpdatePrescription(t.Context(), org, bad, patient, rx.SCID, mustNotRun[storage.Prescription](t))
			return err
		}},
		{name: "UpdatePrescription patient", call: func(t *testing.T, bad string) error {
			_, err := e.s.UpdatePrescription(t.Context(), org, user, bad, rx.SCID, mustNotRun[storage.Prescription](t))
			return err
		}},
		{name: "UpdatePrescription scid", call: func(t *testing.T, bad string) error {
			_, err := e.s.UpdatePrescription(t.Context(), org, user, patient, bad, mustNotRun[storage.Prescription](t))
			return err
		}},
		{name: "CreateCustomDrugs id", emptyValid: true, call: func(t *testing.T, bad string) error {
			return createDrug(t, e.s, &storage.CustomDrug{OrgID: org, UserID: user, ID: bad})
		}},
		{name: "CreateCustomDrugs organization", call: func(t *testing.T, bad string) error {
			return createDrug(t, e.s, &storage.CustomDrug{OrgID: bad, UserID: user})
		}},
		{name: "CreateCustomDrugs user", emptyValid: true, call: func(t *testing.T, bad string) error {
			return createDrug(t, e.s, &storage.CustomDrug{OrgID: org, UserID: bad})
		}},
		{name: "ListCustomDrugsJSON organization", call: func(t *testing.T, bad string) error {
			_, err := listCustomDrugs(t, e.s, bad, user)
			return err
		}},
		{name: "ListCustomDrugsJSON user", call: func(t *testing.T, bad string) error {
			_, err := listCustomDrugs(t, e.s, org, bad)
			return err
		}},
		{name: "UpdateCustomDrug organization", call: func(t *testing.T, bad string) error {
			_, err := e.s.UpdateCustomDrug(t.Context(), bad, user, d.ID, mustNotRun[storage.CustomDrug](t))
			return err
		}},
		{name: "UpdateCustomDrug user", call: func(t *testing.T, bad string) error {
			_, err := e.s.UpdateCustomDrug(t.Context(), org, bad, d.ID, mustNotRun[storage.CustomDrug](t))
			return err
		}},
		{name: "UpdateCustomDrug drug", call: func(t *testing.T, bad string) error {
			_, err := e.s.UpdateCustomDrug(t.Context(), org, user, bad, mustNotRun[storage.CustomDrug](t))
			return err
		}},
		{name: "DeleteCustomDrug organization", call: func(t *testing.T, bad string) error {
			return e.s.DeleteCustomDrug(t.Context(), bad, user, d.ID)
		}},
		{name: "DeleteCustomDrug user", call: func(t *testing.T, bad string) error {
			return e.s.DeleteCustomDrug(t.Context(), org, bad, d.ID)
		}},
		{name: "DeleteCustomDrug drug", call: func(t *testing.T, bad string) error {
			return e.s.DeleteCustomDrug(t.Context(), org, user, bad)
		}},
	}
	ids := []struct {
		name string
		id   string
	}{
		{name: "empty", id: ""},
		{name: "slash", id: "a/b"},
		{name: "only a slash", id: "/"},
		{name: "trailing slash", id: org + "/"},
		{name: "leading slash", id: "/" + org},
		{name: "parent and child", id: org + "/" + user},
		{name: "NUL", id: "a\x00b"},
		{name: "too long", id: strings.Repeat("x", 129)},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			for _, id := range ids {
				if c.emptyValid && id.id == "" {
					continue
				}
				require.NotPanics(t, func() {
					require.ErrorIs(t, c.call(t, id.id), storage.ErrNotFound, "id %s (%q)", id.name, id.id)
				})
			}
		})
	}

	// Nothing above may have written: the tenant's lists are as they were.
	_, items, _, err := listPrescriptions(t, e.s, org, user, patient, page)
	require.NoError(t, err)
	requireEqual(t, []storage.Prescription{rx}, items)
	drugs, err := listCustomDrugs(t, e.s, org, user)
	require.NoError(t, err)
	requireEqual(t, listed(d), drugs)
	users, _, err := e.s.ListUsers(t.Context(), org, page)
	require.NoError(t, err)
	requireEqual(t, []storage.User{*a.user}, users)
	partners, err := e.s.ListPartners(t.Context())
	require.NoError(t, err)
	requireEqual(t, []storage.Partner{*a.partner}, partners)
	orgs, err := e.s.ListOrganizations(t.Context())
	require.NoError(t, err)
	requireEqual(t, []storage.Organization{*a.org}, orgs)
}

// testUpdatePatientConcurrently checks that concurrent updates of one
// patient, each changing its own member, all survive: an updater runs on a
// fresh read after a conflict.
func testUpdatePatientConcurrently(t *testing.T, e *env) {
	ctx := t.Context()
	a := createTenant(t, e.s, "a")
	p := a.patient
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
	const rounds = 10
	var wg sync.WaitGroup
	for i, field := range fields {
		wg.Go(func() {
			for round := range rounds {
				_, err := e.s.UpdatePatient(ctx, p.OrgID, p.UserID, p.ID, func(p *storage.Patient) error {
					*field(p) = ptr(fmt.Sprintf("field %d round %d", i, round))
					return nil
				})
				if err != nil {
					t.Errorf("field %d round %d: %v", i, round, err)
					return
				}
			}
		})
	}
	wg.Wait()

	got, err := e.s.GetPatient(ctx, p.OrgID, p.UserID, p.ID)
	require.NoError(t, err)
	for i, field := range fields {
		v := *field(got)
		require.NotNil(t, v, "field %d", i)
		require.Equal(t, fmt.Sprintf("field %d round %d", i, rounds-1), *v, "field %d lost an update", i)
	}
}

func testWebhookEndpoints(t *testing.T, e *env) {
	ctx := t.Context()
	p1 := createPartner(t, e.s, "One")
	p2 := createPartner(t, e.s, "Two")

	a := storage.WebhookEndpoint{PartnerID: p1.ID, URL: "https://one.example/hooks", Secret: "secret-a"}
	require.NoError(t, e.s.CreateWebhookEndpoint(ctx, &a))
	require.NotEmpty(t, a.ID)
	require.False(t, a.CreatedAt.IsZero())
	b := storage.WebhookEndpoint{PartnerID: p1.ID, URL: "https://two.example/hooks", Secret: "secret-b"}
	require.NoError(t, e.s.CreateWebhookEndpoint(ctx, &b))
	c := storage.WebhookEndpoint{PartnerID: p2.ID, URL: "https://one.example/hooks", Secret: "secret-c"}
	require.NoError(t, e.s.CreateWebhookEndpoint(ctx, &c), "another partner may use the same url")

	dup := storage.WebhookEndpoint{PartnerID: p1.ID, URL: a.URL, Secret: "x"}
	require.ErrorIs(t, e.s.CreateWebhookEndpoint(ctx, &dup), storage.ErrAlreadyExists, "one url twice for one partner")
	taken := storage.WebhookEndpoint{ID: a.ID, PartnerID: p2.ID, URL: "https://three.example", Secret: "x"}
	require.ErrorIs(t, e.s.CreateWebhookEndpoint(ctx, &taken), storage.ErrAlreadyExists, "a taken id")
	orphan := storage.WebhookEndpoint{PartnerID: storage.NewID(), URL: "https://x.example", Secret: "x"}
	require.ErrorIs(t, e.s.CreateWebhookEndpoint(ctx, &orphan), storage.ErrNotFound)
	bad := storage.WebhookEndpoint{PartnerID: "a/b", URL: "https://x.example", Secret: "x"}
	require.ErrorIs(t, e.s.CreateWebhookEndpoint(ctx, &bad), storage.ErrNotFound)

	got, err := e.s.GetWebhookEndpoint(ctx, a.ID)
	require.NoError(t, err)
	requireEqual(t, &a, got, "the secret is stored as it is: signing needs it")

	all, err := e.s.ListWebhookEndpoints(ctx, "")
	require.NoError(t, err)
	requireEqual(t, []storage.WebhookEndpoint{a, b, c}, all, "every partner's, in id order")
	mine, err := e.s.ListWebhookEndpoints(ctx, p1.ID)
	require.NoError(t, err)
	requireEqual(t, []storage.WebhookEndpoint{a, b}, mine)
	for _, partner := range []string{"a/b", storage.NewID()} {
		none, err := e.s.ListWebhookEndpoints(ctx, partner)
		require.NoError(t, err)
		require.NotNil(t, none, "an empty list, not nil")
		require.Empty(t, none)
	}

	require.NoError(t, e.s.DeleteWebhookEndpoint(ctx, b.ID))
	require.ErrorIs(t, e.s.DeleteWebhookEndpoint(ctx, b.ID), storage.ErrNotFound)
	_, err = e.s.GetWebhookEndpoint(ctx, b.ID)
	require.ErrorIs(t, err, storage.ErrNotFound)
	mine, err = e.s.ListWebhookEndpoints(ctx, p1.ID)
	require.NoError(t, err)
	requireEqual(t, []storage.WebhookEndpoint{a}, mine)
	again := storage.WebhookEndpoint{PartnerID: p1.ID, URL: b.URL, Secret: "y"}
	require.NoError(t, e.s.CreateWebhookEndpoint(ctx, &again), "a deleted endpoint's url is free again")
}

func testWebhookSignatureScheme(t *testing.T, e *env) {
	ctx := t.Context()
	p := createPartner(t, e.s, "P")
	def := storage.WebhookEndpoint{PartnerID: p.ID, URL: "https://d.example", Secret: "s"}
	require.NoError(t, e.s.CreateWebhookEndpoint(ctx, &def))
	require.Equal(t, storage.SchemeRxgate, def.SignatureScheme, "the spec's scheme is the default")
	std := storage.WebhookEndpoint{PartnerID: p.ID, URL: "https://s.example", Secret: "s", SignatureScheme: storage.SchemeStandard}
	require.NoError(t, e.s.CreateWebhookEndpoint(ctx, &std))
	got, err := e.s.GetWebhookEndpoint(ctx, std.ID)
	require.NoError(t, err)
	requireEqual(t, &std, got)
	bad := storage.WebhookEndpoint{PartnerID: p.ID, URL: "https://b.example", Secret: "s", SignatureScheme: "svix"}
	require.Error(t, e.s.CreateWebhookEndpoint(ctx, &bad), "an unknown scheme")

	r, err := e.s.SetWebhookSignatureScheme(ctx, def.ID, storage.SchemeStandard)
	require.NoError(t, err)
	require.Equal(t, storage.SchemeStandard, r.SignatureScheme)
	require.Equal(t, def.Secret, r.Secret, "the secret stays")
	got, err = e.s.GetWebhookEndpoint(ctx, def.ID)
	require.NoError(t, err)
	requireEqual(t, r, got)
	all, err := e.s.ListWebhookEndpoints(ctx, p.ID)
	require.NoError(t, err)
	require.Len(t, all, 2)
	for _, ep := range all {
		require.Equal(t, storage.SchemeStandard, ep.SignatureScheme)
	}
	r, err = e.s.SetWebhookSignatureScheme(ctx, def.ID, "")
	require.NoError(t, err)
	require.Equal(t, storage.SchemeRxgate, r.SignatureScheme, "\"\" is the default")
	_, err = e.s.SetWebhookSignatureScheme(ctx, def.ID, "svix")
	require.Error(t, err)
	require.NotErrorIs(t, err, storage.ErrNotFound)
	for _, id := range []string{storage.NewID(), "a/b"} {
		_, err = e.s.SetWebhookSignatureScheme(ctx, id, storage.SchemeStandard)
		require.ErrorIs(t, err, storage.ErrNotFound)
	}
}

func testRotateWebhookSecret(t *testing.T, e *env) {
	ctx := t.Context()
	p := createPartner(t, e.s, "P")
	ep := storage.WebhookEndpoint{PartnerID: p.ID, URL: "https://p.example", Secret: "first"}
	require.NoError(t, e.s.CreateWebhookEndpoint(ctx, &ep))
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	require.Equal(t, []string{"first"}, ep.SigningSecrets(now))

	r, err := e.s.RotateWebhookSecret(ctx, ep.ID, "second", now.Add(24*time.Hour))
	require.NoError(t, err)
	require.NotNil(t, r.RotatedAt)
	require.Equal(t, []string{"first", "second"}, r.SigningSecrets(now), "old first, new second during the grace period")
	require.Equal(t, []string{"first", "second"}, r.SigningSecrets(now.Add(24*time.Hour-time.Nanosecond)))
	require.Equal(t, []string{"second"}, r.SigningSecrets(now.Add(24*time.Hour)), "the old secret stops when the grace period ends")

	r, err = e.s.RotateWebhookSecret(ctx, ep.ID, "third", now.Add(24*time.Hour))
	require.NoError(t, err)
	require.Equal(t, []string{"second", "third"}, r.SigningSecrets(now), "at most two: the oldest stops at once")
	got, err := e.s.GetWebhookEndpoint(ctx, ep.ID)
	require.NoError(t, err)
	requireEqual(t, r, got)

	r, err = e.s.RotateWebhookSecret(ctx, ep.ID, "fourth", now)
	require.NoError(t, err)
	require.Equal(t, []string{"fourth"}, r.SigningSecrets(now), "no grace period")

	_, err = e.s.RotateWebhookSecret(ctx, storage.NewID(), "x", now)
	require.ErrorIs(t, err, storage.ErrNotFound)
	_, err = e.s.RotateWebhookSecret(ctx, "a/b", "x", now)
	require.ErrorIs(t, err, storage.ErrNotFound)
}

// testMeta checks LoadOrCreateMeta: the value is created once, and every
// caller, concurrent ones too, gets the value stored first.
func testMeta(t *testing.T, e *env) {
	ctx := t.Context()
	_, err := e.s.LoadOrCreateMeta(ctx, "refused", func() ([]byte, error) { return nil, errUpdater })
	require.ErrorIs(t, err, errUpdater, "the create function's error is returned")

	var wg sync.WaitGroup
	got := make([][]byte, 8)
	for i := range got {
		wg.Go(func() {
			v, err := e.s.LoadOrCreateMeta(ctx, "key", func() ([]byte, error) { return []byte(fmt.Sprintf("value %d", i)), nil })
			if err != nil {
				t.Errorf("caller %d: %v", i, err)
			}
			got[i] = v
		})
	}
	wg.Wait()
	for i := range got {
		require.Equal(t, got[0], got[i], "caller %d got another value", i)
	}
	v, err := e.s.LoadOrCreateMeta(ctx, "key", func() ([]byte, error) {
		t.Error("the value was created again")
		return nil, nil
	})
	require.NoError(t, err)
	require.Equal(t, got[0], v)
	v, err = e.s.LoadOrCreateMeta(ctx, "refused", func() ([]byte, error) { return []byte("now"), nil })
	require.NoError(t, err)
	require.Equal(t, []byte("now"), v, "a refused create stored nothing")
}
