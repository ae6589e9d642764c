// Package postgres is rxgate's PostgreSQL backend: storage.Store and
// storage.JobStore over one database that several rxgate processes share.
// SQL is written by hand; the schema lives in migrations/, embedded and
// applied at Open under an advisory lock.
//
// Every write that reads a business rule before it writes is ordered
// against the writes that change the rule, so the storage contract's
// guarantees hold across processes: a create under a parent by the
// foreign key; a prescription, whose event depends on the organization's
// validation and the partner's endpoints, by a key-share lock on the
// organization's row, which validation and endpoint changes lock for
// update (CreatePrescription tells why that is enough); a replay by a
// serializable transaction, retried on a serialization failure. The
// webhook outbox is the jobs table: a claim locks the claim slots of the
// endpoints it serves (claim_slots, FOR UPDATE SKIP LOCKED), which makes
// the per-endpoint limit hold across every replica without a lock that
// all claims share, and leases the due jobs it takes; a lease carries
// its owner, a lease id and an expiry, and only an expired lease is taken
// back. After a commit that makes jobs pending, the store NOTIFYs the other
// processes, which LISTEN; the queue still polls, so a lost notification
// only delays. The migration lock's key and the channel are the schema's own, so
// deployments in other schemas of one database do not meet. Lease expiry
// is judged by the database's clock, so replicas whose clocks disagree
// still agree on which lease has lapsed (leaseAt). A process opened with a
// replica id records it on its leases, is the id's only live holder
// (refused at Open otherwise), and takes back at Open the leases its
// crashed predecessor under the id left, instead of waiting for them to
// expire (replica.go).
//
// Nothing waits for ever: every call has a deadline (bound), every
// connection carries statement, lock and idle-in-transaction timeouts, and
// keepalives at both ends notice a peer that went silent (Options). A
// replica cut off in the middle of a claim holds the slots it locked until
// the server ends its session: at most IdleInTransactionTimeout, or
// NetworkTimeout when the network itself is gone.
//
// It is written for, and tested on, PostgreSQL 15 only: it has no
// triggers, stored procedures or jsonb, but relies on much that the
// PostgreSQL-compatible distributed engines lack or do otherwise (the
// list is in docs/scaling.md).
package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
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
	// StatementTimeout, LockTimeout and IdleInTransactionTimeout are set
	// on every connection, pooled and LISTEN alike, as PostgreSQL's
	// statement_timeout, lock_timeout and
	// idle_in_transaction_session_timeout; 0 leaves the server's setting
	// (off unless the role or the database sets one). The last one is what
	// frees the claim slots of a replica that stopped talking in the
	// middle of a claim.
	StatementTimeout, LockTimeout, IdleInTransactionTimeout time.Duration
	// NetworkTimeout is how long a connection whose peer stopped answering
	// (a network cut, a host gone) lasts before either end drops it: the
	// TCP keepalives of rxgate's dialer and the server's keepalives and
	// tcp_user_timeout, set per connection, are derived from it
	// (keepalives). 0 leaves the systems' defaults (about two hours).
	NetworkTimeout time.Duration
	// CallTimeout bounds every call to the store that has no earlier
	// deadline of its own; 0 means twice StatementTimeout, or
	// defaultCallTimeout without one. Import is bounded per batch only.
	CallTimeout time.Duration
	// ClaimTimeout bounds one ClaimJobs; 0 means LockTimeout plus
	// claimWork, or CallTimeout without a LockTimeout, and never more than
	// CallTimeout.
	ClaimTimeout time.Duration
	// Now is the clock of what the store records (creation times, due
	// times) and, when set, of leases too: tests drive leases with a fake
	// clock through the times they pass. Nil means time.Now for records
	// and the database's clock for leases (see leaseAt).
	Now func() time.Time
	// Logger receives the backend's warnings; nil discards them.
	Logger *slog.Logger
	// ReplicaID names this process among those sharing the database
	// (storage.postgres.replica_id; see replica.go). With one, Open
	// refuses with ErrReplicaInUse while another live process holds the
	// id, and takes back at once the leases the id's previous, dead
	// process held; its leases carry the id. "" opens an anonymous store,
	// as tools and tests do: its leases are taken back only when they
	// expire, and any number of anonymous stores share a database.
	ReplicaID string
	// Heartbeat is how often a store with a ReplicaID writes that it is
	// alive; one that missed staleBeats heartbeats is presumed dead. 0
	// means defaultHeartbeat.
	Heartbeat time.Duration

	// NoListen turns the LISTEN connection off (storage.postgres.listen:
	// false), for a database reached through a pooler in transaction
	// mode, where a LISTEN stays with a server connection other clients
	// get next. The queue then learns of the other processes' jobs by
	// polling only (within its idle poll); this process's own commits
	// still wake its queue at once, and it still NOTIFYs, so replicas
	// connected directly hear of its jobs.
	NoListen bool

	// migrations, when set, stand in for this build's (tests: another
	// build's migrations and compatibility level).
	migrations *migrationSet

	// tracer traces the pooled connections' statements (tests: WithTracer).
	tracer pgx.QueryTracer
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
	// countCap bounds the exact counts (counts.go).
	countCap int

	// dbClock says that leases are judged by the database's clock (Now
	// was nil): see leaseAt.
	dbClock bool
	// callTimeout and claimTimeout bound the calls (bound).
	callTimeout, claimTimeout time.Duration

	// channel is the wake-up channel: the schema's own, so deployments in
	// other schemas of one database do not wake each other.
	channel string

	// replica is the hold on Options.ReplicaID; nil for an anonymous
	// store.
	replica *replica
	// switched drops the pool's connections after a primary switch
	// (failover.go).
	switched poolReset

	// bases are the one-round-trip create's (prescriptions.go).
	bases createBases
	// pages are the prescription pages read last (pages.go).
	pages pageCache

	watch storage.Signal
	wake  chan struct{} // asks the notifier to NOTIFY the other processes
	// senders are the backends the notifier sent from, whose NOTIFYs
	// this process's listener skips.
	senders senderPIDs
	// onWake, when set (tests), sees the payload of every NOTIFY the
	// listener passes on to the queues.
	onWake atomic.Pointer[func(payload string)]
	stop   context.CancelFunc
	wg     sync.WaitGroup
	closed sync.Once
}

var (
	_ storage.Store           = (*Store)(nil)
	_ storage.JobStore        = (*Store)(nil)
	_ storage.FailoverCounter = (*Store)(nil)
)

// Open connects, waiting up to ConnectTimeout for the database, applies the
// migrations and loads the cursor key. With a ReplicaID it takes the id
// for this process (or refuses: ErrReplicaInUse) and takes back the
// leases the id's previous process left. It starts goroutines, which
// Close stops: the listener of the other processes' job wake-ups, on a
// connection of its own (not with NoListen), and the notifier that wakes
// them after this process's commits; with a ReplicaID a third writes its
// heartbeat.
func Open(ctx context.Context, opts Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(opts.URL)
	if err != nil {
		// pgx quotes the string, which may hold a password.
		return nil, errors.New("storage: postgres: the connection URL is not valid")
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	followPrimary(cfg.ConnConfig, opts.URL)
	if opts.Schema != "" {
		cfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{opts.Schema}.Sanitize()
	}
	maps.Copy(cfg.ConnConfig.RuntimeParams, sessionParams(opts))
	cfg.ConnConfig.Tracer = opts.tracer
	cfg.ConnConfig.DialFunc = dialer(cfg.ConnConfig.ConnectTimeout, opts.NetworkTimeout).DialContext
	s := &Store{now: opts.Now, log: opts.Logger, schema: opts.Schema, maxRecord: opts.MaxRecordBytes, wake: make(chan struct{}, 1), countCap: defaultCountCap}
	cfg.ConnConfig.OnPgError = s.switched.onPgError(cfg.ConnConfig.OnPgError)
	cfg.ConnConfig.OnNotice = s.switched.onNotice(cfg.ConnConfig.OnNotice)
	cfg.AfterRelease = s.switched.afterRelease(cfg.AfterRelease)
	cfg.AfterConnect = s.switched.afterConnect(cfg.AfterConnect)
	if s.maxRecord <= 0 {
		s.maxRecord = storage.MaxRecordBytes
	}
	s.callTimeout, s.claimTimeout = callTimeouts(opts)
	// The LISTEN connection gets the same session settings and dialer.
	s.listenCfg = cfg.ConnConfig.Copy()
	if s.now == nil {
		s.now, s.dbClock = time.Now, true
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.switched.log = s.log
	timeout := opts.ConnectTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	if s.pool, err = connect(ctx, cfg, timeout, opts.Schema); err != nil {
		return nil, err
	}
	s.switched.pool.Store(s.pool)
	s.senders.max = int(s.pool.Config().MaxConns)
	var schema string
	if err := s.pool.QueryRow(ctx, `SELECT coalesce(current_schema(), '')`).Scan(&schema); err != nil {
		s.pool.Close()
		return nil, fmt.Errorf("storage: postgres: %w", safeErr(err))
	}
	s.channel = fmt.Sprintf("rxgate_jobs_%016x", uint64(lockKey("jobs", schema)))
	set := builtMigrations()
	if opts.migrations != nil {
		set = *opts.migrations
	}
	if err := migrate(ctx, s.pool, lockKey("migrations", schema), set); err != nil {
		s.pool.Close()
		return nil, err
	}
	key, err := s.LoadOrCreateMeta(ctx, storage.MetaCursorKey, storage.NewCursorKey)
	if err != nil {
		s.pool.Close()
		return nil, fmt.Errorf("storage: postgres: cursor key: %w", err)
	}
	s.cursors = storage.NewCursors(key)
	taken := 0
	if s.replica = newReplica(opts.ReplicaID, opts.Heartbeat, s.listenCfg.Copy()); s.replica != nil {
		// register settles within staleBeats heartbeats at most; the
		// bound is for a database that stops answering meanwhile.
		rctx, cancel := context.WithTimeout(ctx, timeout+staleBeats*s.replica.beat)
		err := s.replica.register(rctx)
		if err == nil {
			taken, err = s.takeBack(rctx)
		}
		cancel()
		if err != nil {
			s.replica.unregister()
			s.pool.Close()
			return nil, err
		}
	}
	bg, stop := context.WithCancel(context.Background())
	s.stop = stop
	if !opts.NoListen {
		s.wg.Go(func() { s.listen(bg) })
	}
	s.wg.Go(func() { s.notifier(bg) })
	if s.replica != nil {
		s.wg.Go(func() { s.heartbeat(bg) })
	}
	if taken > 0 {
		s.log.Info("postgres: the deliveries this replica's previous process had leased are due again", "replica", s.replica.id, "jobs", taken)
		s.queued()
	}
	return s, nil
}

// defaultCallTimeout bounds a call when there is no statement timeout to
// derive the bound from.
const defaultCallTimeout = 2 * time.Minute

// claimWork is what a claim takes beside a lock wait: a few short
// statements. (A claim skips the slots it finds held; a wait is a rare
// one, for a job row being changed.)
const claimWork = 5 * time.Second

// callTimeouts derives the calls' bounds from opts. A call runs a few
// statements, each under StatementTimeout; twice that leaves room for a
// lock wait and the retry of a transaction while a call on a connection
// that went silent still ends soon after its statement would have been
// cancelled. A claim is a lock wait, under LockTimeout, and claimWork.
func callTimeouts(opts Options) (call, claim time.Duration) {
	call = opts.CallTimeout
	if call <= 0 {
		call = defaultCallTimeout
		if opts.StatementTimeout > 0 {
			call = 2 * opts.StatementTimeout
		}
	}
	claim = opts.ClaimTimeout
	if claim <= 0 {
		claim = call
		if opts.LockTimeout > 0 {
			claim = opts.LockTimeout + claimWork
		}
	}
	return call, min(claim, call)
}

// sessionParams are the settings every connection starts with: the
// timeouts, and the server's side of the network timeout (its keepalives
// and tcp_user_timeout, which PostgreSQL ignores on a Unix socket). A
// setting that is 0 is not sent, so the server's own stays.
func sessionParams(opts Options) map[string]string {
	p := map[string]string{}
	ms := func(name string, d time.Duration) {
		if d > 0 {
			p[name] = fmt.Sprintf("%dms", max(d.Milliseconds(), 1))
		}
	}
	ms("statement_timeout", opts.StatementTimeout)
	ms("lock_timeout", opts.LockTimeout)
	ms("idle_in_transaction_session_timeout", opts.IdleInTransactionTimeout)
	if ka, ok := keepalives(opts.NetworkTimeout); ok {
		p["tcp_keepalives_idle"] = fmt.Sprint(int(ka.Idle.Seconds()))
		p["tcp_keepalives_interval"] = fmt.Sprint(int(ka.Interval.Seconds()))
		p["tcp_keepalives_count"] = fmt.Sprint(ka.Count)
		ms("tcp_user_timeout", opts.NetworkTimeout)
	}
	return p
}

// keepaliveProbes is how many unanswered probes end a connection.
const keepaliveProbes = 5

// keepalives derives the TCP keepalive settings from a network timeout
// d: half of it idle, then keepaliveProbes probes a tenth of it apart, so
// a silent peer is given up after about d. Both ends count in whole
// seconds. ok is false when d is 0 (the systems' defaults stay).
func keepalives(d time.Duration) (cfg net.KeepAliveConfig, ok bool) {
	if d <= 0 {
		return net.KeepAliveConfig{}, false
	}
	return net.KeepAliveConfig{
		Enable:   true,
		Idle:     max(time.Second, (d / 2).Truncate(time.Second)),
		Interval: max(time.Second, (d / keepaliveProbes / 2).Truncate(time.Second)),
		Count:    keepaliveProbes,
	}, true
}

// dialer is rxgate's end of the connections: the connect timeout the URL
// set (connect_timeout) and, with a network timeout, keepalives that
// notice a silent server in seconds, not hours. A silent server with a
// statement unanswered is noticed by the call's deadline (bound).
func dialer(connect, network time.Duration) *net.Dialer {
	d := &net.Dialer{Timeout: connect}
	if ka, ok := keepalives(network); ok {
		d.KeepAliveConfig = ka
	} else {
		// Keepalives on, timed as the system has them (Linux: two hours
		// idle), not Go's own defaults of 15 seconds: a network timeout
		// of 0 leaves the systems' settings, as its documentation says.
		d.KeepAliveConfig = net.KeepAliveConfig{Enable: true, Idle: -1, Interval: -1, Count: -1}
	}
	return d
}

// bound gives ctx the call's deadline, unless it has an earlier one: no
// call to the store waits on the database for ever.
func (s *Store) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return boundBy(ctx, s.callTimeout)
}

// boundBy gives ctx the deadline d from now, unless it has an earlier one.
func boundBy(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= d {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
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

// Close stops the listener and closes the pool. A replica's row is
// deleted, so that its next process starts at once; leases still held
// stay, for that process to take back.
func (s *Store) Close() error {
	s.closed.Do(func() {
		s.stop()
		s.wg.Wait()
		if s.replica != nil {
			s.replica.unregister()
		}
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
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if err := s.pool.Ping(ctx); err != nil {
		s.switched.after(err)
		if m := mapErr(err); errors.Is(m, storage.ErrUnavailable) {
			return fmt.Errorf("storage: postgres: ping: %w", m)
		}
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
// transaction on a serialization failure or a deadlock, and once on a
// fresh connection when a read-only server refused it (a primary switch:
// failover.go). fn may run more than once. A write transaction appends ctx's pending audit entry
// (storage.WithAudit) after fn's writes (withAudit).
func (s *Store) tx(ctx context.Context, opts pgx.TxOptions, fn func(pgx.Tx) error) error {
	fn, audit := withAudit(ctx, opts, fn)
	refused := false
	for attempt := 1; ; attempt++ {
		err := s.txOnce(ctx, opts, fn)
		if err == nil && audit != nil {
			audit.MarkWritten()
		}
		s.switched.after(err)
		again := retryable(err)
		if !refused && readOnlyRefusal(err) {
			refused, again = true, true // the pool is reset: a fresh connection
		}
		if err == nil || !again {
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
// a read-only standby after a failover (25006), a lock not granted within
// lock_timeout (55P03) and a session ended by
// idle_in_transaction_session_timeout (25P03). The timeouts are answered
// like the rest: 503, try again.
func unavailableCode(code string) bool {
	switch {
	case strings.HasPrefix(code, "08"), strings.HasPrefix(code, "53"), strings.HasPrefix(code, "57"), strings.HasPrefix(code, "58"):
		return true
	}
	return code == "25006" || code == "55P03" || code == "25P03"
}

// unreachable reports an error of the connection rather than of the
// statement: the database went away, or could not be reached in time.
func unreachable(err error) bool {
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) || errors.Is(err, pgconn.ErrReadOnlyConnection) {
		return true // also a connect that timed out, or found no primary
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
	ctx, cancel := s.bound(ctx)
	defer cancel()
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
