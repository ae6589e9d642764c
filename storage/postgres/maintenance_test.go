package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage"
	"github.com/rxgate/rxgate/storage/postgres"
	"github.com/rxgate/rxgate/testsuite"
	"github.com/rxgate/rxgate/testsuite/fake"
	"github.com/rxgate/rxgate/testsuite/storagetest"
)

// TestPurgeAtTheCutoff: the purge's bound, taken from the cutoff's id,
// is exact to the millisecond on either side: an event created a
// millisecond before the cutoff goes, one created at the cutoff or a
// millisecond after stays, and so does one a microsecond before the
// cutoff's millisecond ends when the cutoff falls inside it.
func TestPurgeAtTheCutoff(t *testing.T) {
	testsuite.PostgresURL(t)
	t.Parallel()
	cutoff := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		cutoff time.Time
		at     []time.Duration // creation times, from cutoff
		gone   []bool
	}{
		{name: "whole millisecond", cutoff: cutoff,
			at:   []time.Duration{-time.Millisecond, 0, time.Millisecond},
			gone: []bool{true, false, false}},
		{name: "inside a millisecond", cutoff: cutoff.Add(500 * time.Microsecond),
			at:   []time.Duration{-time.Millisecond, -time.Microsecond, 0, time.Microsecond, time.Millisecond},
			gone: []bool{true, true, false, false, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			clock := fake.NewClock(tt.cutoff.Add(-time.Hour))
			s := openPostgres(t, postgres.Options{Now: clock.Now})
			w := storagetest.NewWorld(t, s) // no endpoint: each event is skipped, purgeable
			ids := make([]string, len(tt.at))
			for i, d := range tt.at {
				clock.Advance(tt.cutoff.Add(d).Sub(clock.Now()))
				rx := w.Prescription()
				rx.PrescriptionItem = storage.PrescriptionItem{ItemName: fmt.Sprint("Item ", i), Quantity: "1"}
				require.NoError(t, s.CreatePrescription(t.Context(), &rx))
				evs, _, err := s.ListEvents(t.Context(), storage.EventFilter{}, storage.PageRequest{Limit: 100})
				require.NoError(t, err)
				ids[i] = evs[len(evs)-1].ID
				require.Equal(t, tt.cutoff.Add(d), evs[len(evs)-1].CreatedAt)
			}
			want := 0
			for _, g := range tt.gone {
				if g {
					want++
				}
			}
			n, err := s.PurgeEvents(t.Context(), tt.cutoff)
			require.NoError(t, err)
			require.Equal(t, want, n)
			for i, id := range ids {
				_, err := s.GetEvent(t.Context(), id)
				if tt.gone[i] {
					require.ErrorIs(t, err, storage.ErrNotFound, "the event at cutoff%+v is purged", tt.at[i])
				} else {
					require.NoError(t, err, "the event at cutoff%+v is kept", tt.at[i])
				}
			}
		})
	}
}

// TestPurgeInBatches: a purge of more events than one batch looks at
// takes batch after batch until the cutoff, each starting after the last
// id the one before it read (three batches for two and a bit batches'
// worth), and purges every old event but the pending one among them, and
// none of the newer ones.
func TestPurgeInBatches(t *testing.T) {
	testsuite.PostgresURL(t)
	t.Parallel()
	cutoff := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	clock := fake.NewClock(cutoff.Add(-time.Hour))
	batches := &purgeBatches{}
	s := openPostgres(t, postgres.WithTracer(postgres.Options{Now: clock.Now}, batches))
	ctx := t.Context()
	w := storagetest.NewWorld(t, s)
	create := func(n int) {
		for i := range n {
			clock.Advance(time.Millisecond)
			rx := w.Prescription()
			rx.PrescriptionItem = storage.PrescriptionItem{ItemName: fmt.Sprint("Item ", i), Quantity: "1"}
			require.NoError(t, s.CreatePrescription(ctx, &rx))
		}
	}
	old := 2*postgres.PurgeBatch + 10
	create(old / 2) // skipped: no endpoint yet
	e := w.Endpoint(t, s, "https://a.example/hook")
	create(1) // pending: its delivery is due
	require.NoError(t, s.DeleteWebhookEndpoint(ctx, e.ID))
	create(old - old/2 - 1)
	clock.Advance(cutoff.Sub(clock.Now()))
	create(3)

	n, err := s.PurgeEvents(ctx, cutoff)
	require.NoError(t, err)
	require.Equal(t, old-1, n)
	require.Equal(t, int32(3), batches.n.Load(), "batches of the purge")
	evs, _, err := s.ListEvents(ctx, storage.EventFilter{}, storage.PageRequest{Limit: 100})
	require.NoError(t, err)
	var left []string
	for _, ev := range evs {
		left = append(left, ev.Status)
	}
	require.Equal(t, []string{storage.EventPending, storage.EventSkipped, storage.EventSkipped, storage.EventSkipped}, left)
}

// purgeBatches is a pgx tracer that counts the purge's batches.
type purgeBatches struct {
	quietTracer
	n atomic.Int32
}

func (p *purgeBatches) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if d.SQL == postgres.PurgeBatchSQL {
		p.n.Add(1)
	}
	return ctx
}

// TestPurgeReadsNoNewerEvents: with a few events older than the cutoff
// and thousands newer, the purge's batch, explained with ANALYZE, reads
// from the events table no more rows than the old ones (and the cutoff's
// millisecond): the newer events a retention keeps are never scanned.
func TestPurgeReadsNoNewerEvents(t *testing.T) {
	testsuite.PostgresURL(t)
	t.Parallel()
	ctx := t.Context()
	s := openPostgres(t, postgres.Options{})
	w := storagetest.NewWorld(t, s)
	cutoff := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	const old, newer = 10, 5000
	var ids []string
	var created []time.Time
	for i := range old + newer {
		at := cutoff.Add(time.Duration(i-old) * time.Second)
		ids, created = append(ids, storage.NewIDAt(at)), append(created, at)
	}
	_, err := s.Pool().Exec(ctx, `INSERT INTO events (id, type, org_id, partner_id, created_at, payload, status, skip_reason, round, targets, attempts)
		SELECT id, 'prescription.created', $3, $4, created_at, '\x7b7d', 'delivered', '', 1, 'null', 'null'
		FROM unnest($1::text[], $2::timestamptz[]) AS t (id, created_at)`,
		ids, created, w.Organization.ID, w.Partner.ID)
	require.NoError(t, err)
	_, err = s.Pool().Exec(ctx, `ANALYZE events`)
	require.NoError(t, err)

	var plan []byte
	err = pgx.BeginFunc(ctx, s.Pool(), func(tx pgx.Tx) error {
		defer func() { _ = tx.Rollback(ctx) }() // EXPLAIN ANALYZE deletes: undo it
		return tx.QueryRow(ctx, `EXPLAIN (ANALYZE, FORMAT JSON) `+postgres.PurgeBatchSQL,
			cutoff, storage.EventPending, 256, "", postgres.PurgeBound(cutoff)).Scan(&plan)
	})
	require.ErrorIs(t, err, pgx.ErrTxClosed) // rolled back, as meant
	var doc []struct{ Plan planNode }
	require.NoError(t, json.Unmarshal(plan, &doc), "%s", plan)
	read := doc[0].Plan.readFrom("events")
	require.Positive(t, read, "the plan reads the events table: %s", plan)
	require.LessOrEqual(t, read, 2*old+2, "rows read from events, of %d old and %d newer: %s", old, newer, plan)

	n, err := s.PurgeEvents(ctx, cutoff)
	require.NoError(t, err)
	require.Equal(t, old, n)
}

// planNode is a node of EXPLAIN (ANALYZE, FORMAT JSON)'s plan.
type planNode struct {
	NodeType      string     `json:"Node Type"`
	Relation      string     `json:"Relation Name"`
	ActualRows    float64    `json:"Actual Rows"`
	ActualLoops   float64    `json:"Actual Loops"`
	FilterRemoved float64    `json:"Rows Removed by Filter"`
	IndexRemoved  float64    `json:"Rows Removed by Index Recheck"`
	Plans         []planNode `json:"Plans"`
}

// readFrom sums the rows the plan's scans of table produced or filtered
// out, over all their loops.
func (p planNode) readFrom(table string) int {
	n := 0
	if p.Relation == table && p.NodeType != "ModifyTable" {
		n += int((p.ActualRows + p.FilterRemoved + p.IndexRemoved) * max(p.ActualLoops, 1))
	}
	for _, c := range p.Plans {
		n += c.readFrom(table)
	}
	return n
}
