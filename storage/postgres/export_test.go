package postgres

import (
	"context"
	"io/fs"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Pool is the store's connection pool, for tests that look at a pooled
// session.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// ListenConn opens a connection as the listener does, LISTENing.
func (s *Store) ListenConn(ctx context.Context) (*pgx.Conn, error) { return s.listenConn(ctx) }

// HeldSlots counts the claim slots (claim_slots) some other transaction
// holds locked: those a claim would skip now.
func (s *Store) HeldSlots(ctx context.Context) (int, error) {
	var held int
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, `SELECT (SELECT count(*) FROM claim_slots) -
			(SELECT count(*) FROM (SELECT endpoint_id FROM claim_slots FOR UPDATE SKIP LOCKED) f)`).Scan(&held)
	})
	return held, err
}

// SkewClock makes the process clock of a store on the database's clock
// (opened without Options.Now) run skew ahead of the real one, as a
// replica's clock that disagrees with the others would.
func (s *Store) SkewClock(skew time.Duration) {
	if !s.dbClock {
		panic("postgres: SkewClock on a store with an injected clock")
	}
	s.now = func() time.Time { return time.Now().Add(skew) }
}

// Crash ends the store as a killed process would: its goroutines stop and
// its sessions end, the replica's among them, but nothing is written on
// the way out (the replica's row and its leases stay). Close does nothing
// after it.
func (s *Store) Crash() {
	s.closed.Do(func() {
		s.stop()
		s.wg.Wait()
		if s.replica != nil && s.replica.conn != nil {
			_ = s.replica.conn.Close(context.Background())
		}
		s.pool.Close()
	})
}

// Schema is the schema the store was opened in.
func (s *Store) Schema() string { return s.schema }

// PurgeBatchSQL is one batch of PurgeEvents, and PurgeBound its primary
// key bound for a cutoff: for the test that explains the batch's plan.
const PurgeBatchSQL = purgeBatchSQL

// PurgeBatch is how many events one purge batch looks at.
const PurgeBatch = purgeBatch

func PurgeBound(cutoff time.Time) string { return purgeBound(cutoff) }

// WithMigrations opens with another build's migrations (files, at their
// root) and compatibility level instead of this build's.
func WithMigrations(opts Options, files fs.FS, compat int) Options {
	opts.migrations = &migrationSet{files: files, compat: compat}
	return opts
}

// BuiltMigrations are this build's migration files.
func BuiltMigrations() fs.FS { return builtMigrations().files }

// Channel is the wake-up channel the store NOTIFYs and LISTENs on.
func (s *Store) Channel() string { return s.channel }

// SetCountCap lowers the exact counts' bound, so that a test reaches it.
func (s *Store) SetCountCap(n int) { s.countCap = n }

// WithTracer is opts with tracer on the pooled connections.
func WithTracer(opts Options, tracer pgx.QueryTracer) Options {
	opts.tracer = tracer
	return opts
}
