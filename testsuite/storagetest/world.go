package storagetest

import (
	"crypto/ed25519"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage"
)

// World is a validated organization of a partner, with a prescriber and
// one of the prescriber's patients: what a backend's own tests need before
// they can prescribe and queue deliveries.
type World struct {
	Partner      storage.Partner
	Organization storage.Organization
	User         storage.User
	Patient      storage.Patient
}

// NewWorld makes a World in s.
func NewWorld(t testing.TB, s storage.Store) World {
	t.Helper()
	ctx := t.Context()
	var w World
	w.Partner = storage.Partner{Name: "P"}
	require.NoError(t, s.CreatePartner(ctx, &w.Partner))
	w.Organization = storage.Organization{Name: "O", PartnerID: w.Partner.ID}
	require.NoError(t, s.CreateOrganization(ctx, &w.Organization))
	_, err := s.ValidateOrganization(ctx, w.Organization.ID)
	require.NoError(t, err)
	w.User = storage.User{OrgID: w.Organization.ID, Email: "u@example.com", Role: storage.RolePrescriber}
	require.NoError(t, s.CreateUser(ctx, &w.User))
	w.Patient = storage.Patient{OrgID: w.Organization.ID, UserID: w.User.ID}
	require.NoError(t, s.CreatePatient(ctx, &w.Patient))
	return w
}

// Endpoint registers a webhook endpoint for the world's partner at url.
func (w World) Endpoint(t testing.TB, s storage.Store, url string) storage.WebhookEndpoint {
	t.Helper()
	e := storage.WebhookEndpoint{PartnerID: w.Partner.ID, URL: url, Secret: storage.NewSecret()}
	require.NoError(t, s.CreateWebhookEndpoint(t.Context(), &e))
	return e
}

// Prescription is a prescription for the world's patient, not yet created.
func (w World) Prescription() storage.Prescription {
	return storage.Prescription{OrgID: w.Organization.ID, UserID: w.User.ID, PatientID: w.Patient.ID}
}

// SeedAudit appends a chain of n audit entries to log, batch entries a
// transaction (each batch one stored value on Badger), and checkpoints
// signed at seq 2 and at the head: the fixture of the backends' tamper
// tests. It returns the checkpoints' public key.
func SeedAudit(t testing.TB, log storage.AuditLog, n, batch int) ed25519.PublicKey {
	t.Helper()
	pub, key, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	entries := make([]storage.AuditEntry, n)
	for i := range entries {
		entries[i] = storage.AuditEntry{Time: time.Date(2026, 3, 2, 9, 0, i, 0, time.UTC), ActorKind: storage.AuditActorPartner,
			PartnerID: "pa", OrgID: "or", UserID: "us", Operation: "prescriptions.list", PatientID: "pt", RequestID: "rq", Outcome: 200}
	}
	ctx := t.Context()
	for i := 0; i < n; i += batch {
		require.NoError(t, log.AppendAudit(ctx, entries[i:min(i+batch, n)]))
	}
	require.NoError(t, log.AddAuditCheckpoint(ctx, storage.SignAuditCheckpoint(key, 2, entries[1].Hash, false, time.Now())))
	require.NoError(t, log.AddAuditCheckpoint(ctx, storage.SignAuditCheckpoint(key, uint64(n), entries[n-1].Hash, false, time.Now())))
	return pub
}
