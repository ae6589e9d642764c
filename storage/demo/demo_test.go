package demo_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage"
	"github.com/rxgate/rxgate/storage/badger"
	"github.com/rxgate/rxgate/storage/demo"
)

// TestSeed: the first Seed writes the demo data and returns its ids and
// secrets, which the store's hashes match; a second keeps the data and
// rotates both secrets.
func TestSeed(t *testing.T) {
	t.Parallel()
	store, err := badger.Open(badger.Options{InMemory: true})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, store.Close()) })
	opts := demo.Options{Scopes: []string{"read:patient"}, BaseURL: "http://127.0.0.1:1/external",
		Now: func() time.Time { return time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC) }}

	first, err := demo.Seed(t.Context(), store, opts)
	require.NoError(t, err)
	require.Equal(t, demo.PartnerID, first.PartnerID)
	require.Equal(t, demo.OrganizationID, first.OrganizationID)
	require.Len(t, first.Users, 5)
	require.Len(t, first.Patients, 6)
	require.Equal(t, first.Patients[0].ID, first.RxPatientID)
	require.Equal(t, demo.Prescriptions, first.Patients[0].Prescriptions)
	for _, p := range first.Patients {
		require.Equal(t, first.PrescriberID, p.UserID)
		_, err := store.GetPatient(t.Context(), first.OrganizationID, p.UserID, p.ID)
		require.NoError(t, err, p.Name)
	}
	org, err := store.GetOrganization(t.Context(), first.OrganizationID)
	require.NoError(t, err)
	require.Equal(t, opts.Scopes, org.AllowedScopes)
	require.True(t, storage.SecretMatches(org.SecretHash, first.OrganizationSecret))
	_, _, page, err := store.ListPrescriptionsJSON(t.Context(), first.OrganizationID, first.PrescriberID, first.RxPatientID,
		storage.PageRequest{Limit: 100}, nil)
	require.NoError(t, err)
	require.Equal(t, demo.Prescriptions, page.Count)

	second, err := demo.Seed(t.Context(), store, opts)
	require.NoError(t, err)
	require.NotEqual(t, first.PartnerSecret, second.PartnerSecret)
	require.NotEqual(t, first.OrganizationSecret, second.OrganizationSecret)
	partner, err := store.GetPartner(t.Context(), demo.PartnerID)
	require.NoError(t, err)
	require.True(t, storage.SecretMatches(partner.SecretHash, second.PartnerSecret))
	org, err = store.GetOrganization(t.Context(), demo.OrganizationID)
	require.NoError(t, err)
	require.True(t, storage.SecretMatches(org.SecretHash, second.OrganizationSecret))
	require.False(t, storage.SecretMatches(org.SecretHash, first.OrganizationSecret))
}
