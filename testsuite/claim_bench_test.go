package testsuite_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage"
	"github.com/rxgate/rxgate/storage/badger"
	"github.com/rxgate/rxgate/testsuite"
)

// BenchmarkClaimJobs measures one claim on each backend: 64 jobs taken in
// turns from 16 endpoints with a backlog of 100 jobs each, at most 8 per
// endpoint, the leases released after each claim (not timed) so that
// every claim finds the same backlog. The PostgreSQL case runs when
// RXGATE_TEST_POSTGRES_URL is set.
func BenchmarkClaimJobs(b *testing.B) {
	b.Run("badger", func(b *testing.B) {
		s, err := badger.Open(badger.Options{InMemory: true})
		require.NoError(b, err)
		b.Cleanup(func() { _ = s.Close() })
		benchmarkClaim(b, s, s)
	})
	b.Run("postgres", func(b *testing.B) {
		testsuite.PostgresURL(b)
		s := testsuite.OpenPostgres(b, time.Now)
		benchmarkClaim(b, s, s)
	})
}

func benchmarkClaim(b *testing.B, s storage.Store, q storage.JobStore) {
	const endpoints, backlog = 16, 100
	ctx := b.Context()
	p := storage.Partner{Name: "P"}
	require.NoError(b, s.CreatePartner(ctx, &p))
	o := storage.Organization{Name: "O", PartnerID: p.ID}
	require.NoError(b, s.CreateOrganization(ctx, &o))
	_, err := s.ValidateOrganization(ctx, o.ID)
	require.NoError(b, err)
	u := storage.User{OrgID: o.ID, Email: "u@example.com"}
	require.NoError(b, s.CreateUser(ctx, &u))
	pt := storage.Patient{OrgID: o.ID, UserID: u.ID}
	require.NoError(b, s.CreatePatient(ctx, &pt))
	for i := range endpoints {
		e := storage.WebhookEndpoint{PartnerID: p.ID, URL: fmt.Sprintf("https://%d.example", i)}
		require.NoError(b, s.CreateWebhookEndpoint(ctx, &e))
	}
	for range backlog {
		rx := storage.Prescription{OrgID: o.ID, UserID: u.ID, PatientID: pt.ID}
		require.NoError(b, s.CreatePrescription(ctx, &rx))
	}
	req := storage.ClaimRequest{Owner: "bench", Now: time.Now().Add(time.Minute), LeaseFor: time.Minute, Max: 64, PerEndpoint: 8}
	jobs := make([]storage.Job, 0, req.Max)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		res, err := q.ClaimJobs(ctx, req)
		if err != nil || len(res.Jobs) != req.Max {
			b.Fatalf("claimed %d jobs: %v", len(res.Jobs), err)
		}
		jobs = jobs[:0]
		for _, c := range res.Jobs {
			jobs = append(jobs, c.Job)
		}
		req.After = jobs[len(jobs)-1].EndpointID
		b.StopTimer()
		if err := q.ReleaseJobs(ctx, jobs); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}
