package queue_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rxgate/rxgate/queue"
	"github.com/rxgate/rxgate/queue/signature"
	"github.com/rxgate/rxgate/storage"
	"github.com/rxgate/rxgate/storage/badger"
)

// benchEvents is how many events one benchmark run delivers.
const benchEvents = 10_000

// BenchmarkDelivery delivers 10,000 prescription.created events to a local
// receiver answering 200 and reports events per second end to end (first
// commit to last receipt) and the p50 and p99 of the time from a
// prescription's commit to its event's receipt. Every commit and every
// recorded attempt is synced to disk, as in production.
//
// Burst creates all prescriptions as fast as 8 writers can, so its
// latencies include the time an event waits behind the backlog; Paced
// creates them at a steady 400 per second, below the queue's capacity, so
// its latencies are the queue's own delay.
func BenchmarkDelivery(b *testing.B) {
	for _, bc := range []struct {
		name    string
		workers int
		rate    int // prescriptions per second; 0 = as fast as possible
	}{
		{name: "Burst/Workers4", workers: 4},
		{name: "Burst/Workers16", workers: 16},
		{name: "Paced400/Workers4", workers: 4, rate: 400},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				runDeliveryBench(b, bc.workers, bc.rate)
			}
		})
	}
}

func runDeliveryBench(b *testing.B, workers, rate int) {
	s, err := badger.Open(badger.Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	partner, org, user, patient := benchTenant(b, s)

	commits := make([]time.Time, benchEvents)
	receipts := make([]time.Time, benchEvents)
	var received atomic.Int64
	var bad atomic.Int64
	done := make(chan struct{})
	var secret atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		body, _ := io.ReadAll(r.Body)
		if signature.Verify([]string{secret.Load().(string)}, r.Header.Get(signature.HeaderName), body, at) != nil {
			bad.Add(1)
		}
		var p struct {
			Data struct {
				SCID string `json:"scid"`
			} `json:"data"`
		}
		_ = json.Unmarshal(body, &p)
		i, err := strconv.Atoi(strings.TrimPrefix(p.Data.SCID, "BN"))
		if err == nil && i >= 0 && i < benchEvents && receipts[i].IsZero() {
			receipts[i] = at
			if received.Add(1) == benchEvents {
				close(done)
			}
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	e := storage.WebhookEndpoint{PartnerID: partner.ID, URL: srv.URL, Secret: storage.NewSecret()}
	secret.Store(e.Secret)
	must(b, s.CreateWebhookEndpoint(ctx, &e))

	q, err := queue.New(s, queue.Options{
		Workers: workers, Timeout: 10 * time.Second, MaxAttempts: 3, BackoffBase: time.Second, BackoffMax: time.Minute,
		AllowInsecureLoopback: true,
	})
	must(b, err)
	must(b, q.Start(ctx))

	var wg sync.WaitGroup
	next := make(chan int)
	var errs atomic.Int64
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				rx := storage.Prescription{OrgID: org.ID, UserID: user.ID, PatientID: patient.ID, SCID: fmt.Sprintf("BN%016d", i),
					PrescriptionItem: storage.PrescriptionItem{ItemName: "x", Quantity: "1"}}
				if err := s.CreatePrescription(ctx, &rx); err != nil {
					errs.Add(1)
					continue
				}
				commits[i] = time.Now()
			}
		}()
	}
	var tick *time.Ticker
	if rate > 0 {
		tick = time.NewTicker(time.Second / time.Duration(rate))
	}
	for i := range benchEvents {
		if tick != nil {
			<-tick.C
		}
		next <- i
	}
	close(next)
	wg.Wait()
	if tick != nil {
		tick.Stop()
	}
	if errs.Load() > 0 {
		b.Fatalf("%d prescriptions failed", errs.Load())
	}
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		b.Fatalf("only %d of %d events arrived", received.Load(), benchEvents)
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	must(b, q.Stop(sctx))
	if bad.Load() > 0 {
		b.Fatalf("%d deliveries did not verify", bad.Load())
	}

	first, last := slices.MinFunc(commits, time.Time.Compare), slices.MaxFunc(receipts, time.Time.Compare)
	lat := make([]time.Duration, benchEvents)
	for i := range lat {
		lat[i] = max(receipts[i].Sub(commits[i]), 0)
	}
	slices.Sort(lat)
	b.ReportMetric(float64(benchEvents)/last.Sub(first).Seconds(), "events/s")
	b.ReportMetric(float64(lat[benchEvents/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[benchEvents*99/100].Microseconds())/1000, "p99-ms")
}

func must(b *testing.B, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
}

// slowOutcomes delays every RecordOutcomes by delay: a slow sync, or the
// commit during which Badger swaps its memtable.
type slowOutcomes struct {
	storage.Backend
	delay time.Duration
}

func (s *slowOutcomes) RecordOutcomes(ctx context.Context, o []storage.Outcome) ([]storage.Recorded, error) {
	time.Sleep(s.delay)
	return s.Backend.RecordOutcomes(ctx, o)
}

// BenchmarkDrainSlowOutcomes drains a backlog of 2,000 events to one
// endpoint while every outcome write takes 20 ms, and reports deliveries
// per second. A finished attempt must not hold its endpoint's place in the
// claim limit until its outcome is written (ClaimRequest.Finished): if it
// does, the backlog drains one limit per write (make bench-load's p99 at
// 300/s after Badger swaps its memtable).
func BenchmarkDrainSlowOutcomes(b *testing.B) {
	const events = 2_000
	for b.Loop() {
		s, err := badger.Open(badger.Options{InMemory: true})
		must(b, err)
		ctx := context.Background()
		partner, org, user, patient := benchTenant(b, s)
		var received atomic.Int64
		done := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			if received.Add(1) == events {
				close(done)
			}
			w.WriteHeader(http.StatusOK)
		}))
		e := storage.WebhookEndpoint{PartnerID: partner.ID, URL: srv.URL, Secret: storage.NewSecret()}
		must(b, s.CreateWebhookEndpoint(ctx, &e))
		for i := range events {
			rx := storage.Prescription{OrgID: org.ID, UserID: user.ID, PatientID: patient.ID, SCID: fmt.Sprintf("DS%016d", i),
				PrescriptionItem: storage.PrescriptionItem{ItemName: "x", Quantity: "1"}}
			must(b, s.CreatePrescription(ctx, &rx))
		}
		q, err := queue.New(&slowOutcomes{Backend: s, delay: 20 * time.Millisecond}, queue.Options{
			Workers: 16, Timeout: 10 * time.Second, MaxAttempts: 3, BackoffBase: time.Second, BackoffMax: time.Minute,
			AllowInsecureLoopback: true,
		})
		must(b, err)
		start := time.Now()
		must(b, q.Start(ctx))
		select {
		case <-done:
		case <-time.After(5 * time.Minute):
			b.Fatalf("only %d of %d events arrived", received.Load(), events)
		}
		took := time.Since(start)
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		must(b, q.Stop(sctx))
		cancel()
		srv.Close()
		must(b, s.Close())
		b.ReportMetric(float64(events)/took.Seconds(), "deliveries/s")
	}
}

// benchTenant creates a validated organization of a partner, with a
// prescriber and a patient, for the benchmarks' prescriptions.
func benchTenant(b *testing.B, s *badger.Store) (storage.Partner, storage.Organization, storage.User, storage.Patient) {
	ctx := context.Background()
	partner := storage.Partner{Name: "Bench"}
	must(b, s.CreatePartner(ctx, &partner))
	org := storage.Organization{Name: "Bench clinic", PartnerID: partner.ID}
	must(b, s.CreateOrganization(ctx, &org))
	_, err := s.ValidateOrganization(ctx, org.ID)
	must(b, err)
	user := storage.User{OrgID: org.ID, Email: "bench@example.com", GivenName: "B", FamilyName: "B", Role: storage.RolePrescriber}
	must(b, s.CreateUser(ctx, &user))
	patient := storage.Patient{OrgID: org.ID, UserID: user.ID}
	must(b, s.CreatePatient(ctx, &patient))
	return partner, org, user, patient
}
