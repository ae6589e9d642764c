package postgres_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage"
	"github.com/rxgate/rxgate/storage/postgres"
	"github.com/rxgate/rxgate/testsuite/storagetest"
)

// TestCreateBasisChecked: a process's creates take one round trip on the
// organization, patient and endpoints it read before (its basis), and
// when another process has changed them since (validated the
// organization, added or deleted an endpoint), the create's event is
// built on what the database holds at its commit, not on that basis: it
// falls back to two round trips, and the next create takes one again.
func TestCreateBasisChecked(t *testing.T) {
	t.Parallel()
	// An organization not yet validated, with one endpoint.
	a, b, tr, w := twoProcesses(t)
	ctx := t.Context()
	org := w.Organization
	e1 := w.Endpoint(t, b, "https://a.example/hook")

	n := 0
	// create makes a prescription on a and returns its event's targets
	// and the round trips it took.
	create := func() (*storage.Prescription, []string, int) {
		t.Helper()
		n++
		rx := w.Prescription()
		rx.PrescriptionItem = storage.PrescriptionItem{ItemName: fmt.Sprint("Item ", n), Quantity: "1"}
		sent := tr.measure(t, func(ctx context.Context) { require.NoError(t, a.CreatePrescription(ctx, &rx)) })
		evs, _, err := a.ListEvents(ctx, storage.EventFilter{OrganizationID: org.ID}, storage.PageRequest{Limit: 1000})
		require.NoError(t, err)
		require.Len(t, evs, n)
		var targets []string
		for _, tg := range evs[n-1].Targets {
			targets = append(targets, tg.EndpointID)
		}
		return &rx, targets, len(sent)
	}
	// Warm the statement cache and the basis (not validated: no target).
	for range 3 {
		rx, targets, _ := create()
		require.Empty(t, targets)
		require.Equal(t, storage.EventSkipped, rx.EventStatus)
	}
	rx, targets, trips := create()
	require.Empty(t, targets)
	require.Equal(t, storage.EventSkipped, rx.EventStatus)
	require.Equal(t, 1, trips, "a create on a known basis")

	_, err := b.ValidateOrganization(ctx, org.ID)
	require.NoError(t, err)
	rx, targets, trips = create()
	require.Equal(t, []string{e1.ID}, targets, "validated since the basis was read")
	require.Equal(t, storage.EventPending, rx.EventStatus)
	require.Equal(t, 3, trips, "the checked round trip, then the two")
	_, targets, trips = create()
	require.Equal(t, []string{e1.ID}, targets)
	require.Equal(t, 1, trips)

	e2 := w.Endpoint(t, b, "https://b.example/hook")
	_, targets, _ = create()
	require.ElementsMatch(t, []string{e1.ID, e2.ID}, targets, "an endpoint added since")
	_, targets, trips = create()
	require.ElementsMatch(t, []string{e1.ID, e2.ID}, targets)
	require.Equal(t, 1, trips)

	require.NoError(t, b.DeleteWebhookEndpoint(ctx, e1.ID))
	_, targets, _ = create()
	require.Equal(t, []string{e2.ID}, targets, "an endpoint deleted since")
	_, targets, _ = create()
	require.Equal(t, []string{e2.ID}, targets)

	// Every job the creates queued is one of the events' targets'.
	pending, _, err := a.ListJobs(ctx)
	require.NoError(t, err)
	require.Len(t, pending, 1+1+2+2+1+1)
}

// twoProcesses opens two stores on one schema, as two replicas: a, whose
// round trips tr counts (one connection), and b, which makes a partner,
// an organization, a user and a patient for them.
func twoProcesses(t *testing.T) (a, b *postgres.Store, tr *roundTrips, w storagetest.World) {
	t.Helper()
	tr = &roundTrips{}
	a = openPostgres(t, postgres.WithTracer(postgres.Options{MaxConns: 1}, tr))
	b = openPostgres(t, postgres.Options{Schema: a.Schema()})
	ctx := t.Context()
	partner := storage.Partner{Name: "P"}
	require.NoError(t, b.CreatePartner(ctx, &partner))
	org := storage.Organization{Name: "O", PartnerID: partner.ID}
	require.NoError(t, b.CreateOrganization(ctx, &org))
	user := storage.User{OrgID: org.ID, Email: "u@example.com", Role: storage.RolePrescriber}
	require.NoError(t, b.CreateUser(ctx, &user))
	patient := storage.Patient{OrgID: org.ID, UserID: user.ID}
	require.NoError(t, b.CreatePatient(ctx, &patient))
	return a, b, tr, storagetest.World{Partner: partner, Organization: org, User: user, Patient: patient}
}
