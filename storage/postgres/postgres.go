// Package postgres is rxgate's PostgreSQL backend: storage.Store and
// storage.JobStore over one database that several rxgate processes share.
// SQL is written by hand; the schema lives in migrations/, embedded and
// applied at Open under an advisory lock.
//
// Every write that reads a business rule before it writes is ordered
// against the writes that change the rule, so the storage contract's
// guarantees hold across processes: a create under a parent by the
// foreign key; a prescription, whose event depends on the organization's
// validation and the partner's endpoints, by share locks on those rows
// (validation and endpoint changes lock them for update); a replay by a
// serializable transaction, retried on a serialization failure. The webhook outbox is the jobs table: a claim takes due jobs
// with FOR UPDATE SKIP LOCKED under a transaction-scoped advisory lock that
// makes the per-endpoint limit hold across every replica; a lease carries
// its owner, a lease id and an expiry, and only an expired lease is taken
// back. After a commit that makes jobs pending, the store NOTIFYs the other
// processes, which LISTEN; the queue still polls, so a lost notification
// only delays. The lock keys and the channel are the schema's own, so
// deployments in other schemas of one database do not meet. Lease expiry
// is judged by the replicas' clocks: keep them synchronized (NTP); the
// default lease (twice webhooks.timeout plus a minute) leaves a wide
// margin.
//
// The SQL avoids what PostgreSQL-compatible distributed engines lack:
// no triggers, no stored procedures, no jsonb, no sequences; advisory locks
// and LISTEN/NOTIFY are the two PostgreSQL features it relies on. It is
// tested on PostgreSQL only.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rxgate/rxgate/storage"
)

// Options configure Open.
type Options struct {
	// URL is the libpq connection string or URL.
	URL string
	// MaxConns bounds the pool; 0 means pgxpool's default (4, or the CPU
	// count when larger).
	MaxConns int32
	// MaxRecordBytes bounds one stored record (storage.max_record_bytes);
	// 0 means storage.MaxRecordBytes.
	MaxRecordBytes int
	// Schema, when set, is the schema every table lives in (it is created
	// when missing); "" keeps the connection's search_path. Tests give each
	// store a schema of its own.
	Schema string
	// ConnectTimeout bounds the wait for the database at Open; 0 means
	// 30 seconds.
	ConnectTimeout time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger receives the backend's warnings; nil discards them.
	Logger *slog.Logger
}

// Store is the PostgreSQL backend.
type Store struct {
	pool      *pgxpool.Pool
	listenCfg *pgx.ConnConfig // the LISTEN connection's, outside the pool
	now       func() time.Time
	log       *slog.Logger
	cursors   storage.Cursors
	schema    string
	maxRecord int

	// The names that keep deployments in other schemas of one database
	// apart: the claim lock's key and the wake-up channel.
	claimLock int64
	channel   string

	watch  storage.Signal
	wake   chan struct{} // asks the notifier to NOTIFY the other processes
	stop   context.CancelFunc
	wg     sync.WaitGroup
	closed sync.Once
}

var (
	_ storage.Store    = (*Store)(nil)
	_ storage.JobStore = (*Store)(nil)
)

// Open connects, waiting up to ConnectTimeout for the database, applies the
// migrations and loads the cursor key. It starts two goroutines, which
// Close stops: the listener of the other processes' job wake-ups, on a
// connection of its own, and the notifier that wakes them after this
// process's commits.
func Open(ctx context.Context, opts Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(opts.URL)
	if err != nil {
		// pgx quotes the string, which may hold a password.
		return nil, errors.New("storage: postgres: the connection URL is not valid")
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	if opts.Schema != "" {
		cfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{opts.Schema}.Sanitize()
	}
	s := &Store{now: opts.Now, log: opts.Logger, schema: opts.Schema, maxRecord: opts.MaxRecordBytes, wake: make(chan struct{}, 1)}
	if s.maxRecord <= 0 {
		s.maxRecord = storage.MaxRecordBytes
	}
	s.listenCfg = cfg.ConnConfig.Copy()
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	timeout := opts.ConnectTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	if s.pool, err = connect(ctx, cfg, timeout, opts.Schema); err != nil {
		return nil, err
	}
	var schema string
	if err := s.pool.QueryRow(ctx, `SELECT coalesce(current_schema(), '')`).Scan(&schema); err != nil {
		s.pool.Close()
		return nil, fmt.Errorf("storage: postgres: %w", safeErr(err))
	}
	s.claimLock, s.channel = lockKey("claims", schema), fmt.Sprintf("rxgate_jobs_%016x", uint64(lockKey("jobs", schema)))
	if err := migrate(ctx, s.pool, lockKey("migrations", schema)); err != nil {
		s.pool.Close()
		return nil, err
	}
	key, err := s.LoadOrCreateMeta(ctx, storage.MetaCursorKey, storage.NewCursorKey)
	if err != nil {
		s.pool.Close()
		return nil, fmt.Errorf("storage: postgres: cursor key: %w", err)
	}
	s.cursors = storage.NewCursors(key)
	bg, stop := context.WithCancel(context.Background())
	s.stop = stop
	s.wg.Go(func() { s.listen(bg) })
	s.wg.Go(func() { s.notifier(bg) })
	return s, nil
}

// lockKey is the advisory lock key (or channel suffix) of what in schema:
// deployments in other schemas of one database do not share it.
func lockKey(what, schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("rxgate\x00" + what + "\x00" + schema))
	return int64(h.Sum64())
}

// connect opens the pool and waits for the database to answer, retrying
// with backoff until timeout.
func connect(ctx context.Context, cfg *pgxpool.Config, timeout time.Duration, schema string) (*pgxpool.Pool, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if schema != "" {
		// The schema must exist before a connection names it in its
		// search_path; create it on a plain connection first.
		if err := retry(ctx, func() error {
			conn, err := pgx.ConnectConfig(ctx, cfg.ConnConfig.Copy())
			if err != nil {
				return err
			}
			defer conn.Close(context.Background())
			_, err = conn.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{schema}.Sanitize())
			return err
		}); err != nil {
			return nil, fmt.Errorf("storage: postgres: no database answered within %s: %w", timeout, safeErr(err))
		}
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, fmt.Errorf("storage: postgres: %w", safeErr(err))
	}
	if err := retry(ctx, func() error { return pool.Ping(ctx) }); err != nil {
		pool.Close()
		return nil, fmt.Errorf("storage: postgres: no database answered within %s: %w", timeout, safeErr(err))
	}
	return pool, nil
}

// retry calls fn until it succeeds or ctx ends, with backoff.
func retry(ctx context.Context, fn func() error) error {
	wait := 100 * time.Millisecond
	for {
		err := fn()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// safeErr keeps a connection error's meaning without the parts that may
// quote the connection string.
func safeErr(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return fmt.Errorf("%s (SQLSTATE %s)", pgErr.Message, pgErr.Code)
	}
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) {
		return errors.New("cannot connect to the database server")
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return context.DeadlineExceeded
	}
	if errors.Is(err, context.Canceled) {
		return context.Canceled
	}
	return errors.New("cannot reach the database")
}

// Close stops the listener and closes the pool.
func (s *Store) Close() error {
	s.closed.Do(func() {
		s.stop()
		s.wg.Wait()
		s.pool.Close()
	})
	return nil
}

// DropSchema drops the store's schema with everything in it; tests call it
// when they are done. It refuses a store opened without Schema.
func (s *Store) DropSchema(ctx context.Context) error {
	if s.schema == "" {
		return errors.New("storage: postgres: no schema of its own to drop")
	}
	_, err := s.pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{s.schema}.Sanitize()+" CASCADE")
	return err
}

// Ping implements storage.Store.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("storage: postgres: ping: %w", safeErr(err))
	}
	return nil
}

// nowUTC is the store clock's time as stores keep it.
func (s *Store) nowUTC() time.Time { return storage.Timestamp(s.now()) }

// Transaction isolation: serializable where a rule is read before a write,
// read committed with row locks for the outbox.
var (
	serializable  = pgx.TxOptions{IsoLevel: pgx.Serializable}
	readCommitted = pgx.TxOptions{IsoLevel: pgx.ReadCommitted}
	readOnly      = pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}
)

// maxTxAttempts bounds the retries of a transaction that keeps failing to
// serialize; then ErrConflict.
const maxTxAttempts = 10

// tx runs fn in a transaction with opts and commits, retrying the whole
// transaction on a serialization failure or a deadlock. fn may run more
// than once.
func (s *Store) tx(ctx context.Context, opts pgx.TxOptions, fn func(pgx.Tx) error) error {
	for attempt := 1; ; attempt++ {
		err := pgx.BeginTxFunc(ctx, s.pool, opts, fn)
		if err == nil || !retryable(err) {
			return err
		}
		if attempt == maxTxAttempts {
			return fmt.Errorf("%w: %w", storage.ErrConflict, err)
		}
		// Jitter keeps two conflicting writers from meeting again.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(rand.IntN(attempt*2)+1) * time.Millisecond):
		}
	}
}

func retryable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40001" || pgErr.Code == "40P01")
}

// mapErr turns the database's answers into the storage contract's
// sentinels: no row is ErrNotFound, a unique violation ErrAlreadyExists, a
// foreign key violation (a missing parent) ErrNotFound, and a database
// that cannot be reached, or is shutting down or starting,
// ErrUnavailable.
func mapErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return storage.ErrNotFound
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.Code == "23505":
			return fmt.Errorf("%s %w", pgErr.ConstraintName, storage.ErrAlreadyExists)
		case pgErr.Code == "23503":
			return fmt.Errorf("%s %w", pgErr.ConstraintName, storage.ErrNotFound)
		case unavailableCode(pgErr.Code):
			return fmt.Errorf("%w: %w", storage.ErrUnavailable, safeErr(err))
		}
		return err
	}
	if unreachable(err) {
		return fmt.Errorf("%w: %w", storage.ErrUnavailable, safeErr(err))
	}
	return err
}

// unavailableCodes are the SQLSTATE classes and codes of a database that
// cannot serve now: connection exceptions (08), insufficient resources
// (53: too many connections, disk full), operator intervention (57:
// shutdown, cannot connect now, a statement timeout), system errors (58),
// and a read-only standby after a failover (25006).
func unavailableCode(code string) bool {
	switch {
	case strings.HasPrefix(code, "08"), strings.HasPrefix(code, "53"), strings.HasPrefix(code, "57"), strings.HasPrefix(code, "58"):
		return true
	}
	return code == "25006"
}

// unreachable reports an error of the connection rather than of the
// statement: the database went away, or could not be reached in time.
func unreachable(err error) bool {
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) {
		return true // also a connect that timed out
	}
	if errors.Is(err, context.Canceled) {
		return false // the caller gave up; not the database's fault
	}
	var netErr net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &netErr) || pgconn.SafeToRetry(err) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		strings.Contains(err.Error(), "conn closed")
}

// wrap names the operation on a mapped error.
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("storage: %s: %w", op, mapErr(err))
}

// LoadOrCreateMeta implements storage.Store: the first value stored wins,
// across processes.
func (s *Store) LoadOrCreateMeta(ctx context.Context, name string, create func() ([]byte, error)) ([]byte, error) {
	var value []byte
	err := s.pool.QueryRow(ctx, `SELECT value FROM meta WHERE name = $1`, name).Scan(&value)
	if err == nil {
		return value, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, wrap("load meta", err)
	}
	fresh, err := create()
	if err != nil {
		return nil, err
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO meta (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING`, name, fresh); err != nil {
		return nil, wrap("store meta", err)
	}
	// The first value stored wins: ours, or a concurrent caller's.
	if err := s.pool.QueryRow(ctx, `SELECT value FROM meta WHERE name = $1`, name).Scan(&value); err != nil {
		return nil, wrap("load meta", err)
	}
	return value, nil
}
