package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage"
)

// TestSwitchCause: the answers that show the primary switched (the pool
// is dropped) against those that do not, and each maps to the contract's
// ErrUnavailable (503) or is passed on, never a 500 for a switch.
func TestSwitchCause(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, refused := pgx.Connect(ctx, "postgres://rxgate@127.0.0.1:1/rxgate?connect_timeout=2")
	require.Error(t, refused)
	timeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	reset := &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	tests := []struct {
		name        string
		err         error
		switched    bool // the pool is reset
		unavailable bool // 503
		retry       bool // the transaction runs again on a fresh connection
	}{
		{name: "standby refuses a write", err: &pgconn.PgError{Code: "25006"}, switched: true, unavailable: true, retry: true},
		{name: "connected to a standby", err: fmt.Errorf("acquire: %w", pgconn.ErrReadOnlyConnection), switched: true, unavailable: true},
		{name: "admin shutdown", err: &pgconn.PgError{Severity: "FATAL", Code: "57P01"}, switched: true, unavailable: true},
		{name: "crash shutdown", err: &pgconn.PgError{Severity: "FATAL", Code: "57P02"}, switched: true, unavailable: true},
		{name: "starting up", err: &pgconn.PgError{Severity: "FATAL", Code: "57P03"}, switched: true, unavailable: true},
		{name: "connection failure", err: &pgconn.PgError{Code: "08006"}, switched: true, unavailable: true},
		{name: "connection refused", err: refused, switched: true, unavailable: true},
		{name: "connection lost", err: fmt.Errorf("read: %w", io.ErrUnexpectedEOF), switched: true, unavailable: true},
		{name: "connection closed", err: fmt.Errorf("write: %w", net.ErrClosed), switched: true, unavailable: true},
		{name: "connection reset", err: reset, switched: true, unavailable: true},
		{name: "statement timeout", err: &pgconn.PgError{Code: "57014"}, unavailable: true},
		{name: "lock timeout", err: &pgconn.PgError{Code: "55P03"}, unavailable: true},
		{name: "too many connections", err: &pgconn.PgError{Code: "53300"}, unavailable: true},
		{name: "network timeout", err: timeout, unavailable: true},
		{name: "call deadline", err: fmt.Errorf("query: %w", context.DeadlineExceeded), unavailable: true},
		{name: "the caller gave up", err: fmt.Errorf("query: %w", context.Canceled)},
		{name: "serialization failure", err: &pgconn.PgError{Code: "40001"}},
		{name: "unique violation", err: &pgconn.PgError{Code: "23505"}},
		{name: "a bug of ours", err: &pgconn.PgError{Code: "42P01"}},
		{name: "no row", err: pgx.ErrNoRows},
		{name: "nil", err: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.switched, switchCause(tt.err) != "", "switchCause = %q", switchCause(tt.err))
			assert.Equal(t, tt.unavailable, errors.Is(mapErr(tt.err), storage.ErrUnavailable), "mapErr = %v", mapErr(tt.err))
			assert.Equal(t, tt.retry, readOnlyRefusal(tt.err))
			var pgErr *pgconn.PgError
			if errors.As(tt.err, &pgErr) {
				// On the connection: closed when it shows a switch or
				// is FATAL (pgconn's default), kept otherwise.
				var r poolReset
				r.log = slog.New(slog.DiscardHandler)
				keep := r.onPgError(func(_ *pgconn.PgConn, e *pgconn.PgError) bool { return e.Severity != "FATAL" })(nil, pgErr)
				assert.Equal(t, !tt.switched && pgErr.Severity != "FATAL", keep)
			}
		})
	}
}

// TestPoolReset: a switch drops the pool's connections once, however many
// calls fail with it at the same time; a reset before the pool exists
// does nothing, and so does one when the pool made no connection since
// the last (a database that refuses every connect while it switches).
func TestPoolReset(t *testing.T) {
	t.Parallel()
	r := &poolReset{log: slog.New(slog.DiscardHandler)}
	r.after(&pgconn.PgError{Code: "25006"}) // no pool yet
	assert.Zero(t, r.resets.Load())
	cfg, err := pgxpool.ParseConfig("postgres://rxgate@127.0.0.1:1/rxgate")
	require.NoError(t, err)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg) // connects lazily
	require.NoError(t, err)
	defer pool.Close()
	r.pool.Store(pool)
	connected := r.afterConnect(nil)
	r.after(&pgconn.PgError{Code: "57P01"})
	assert.Zero(t, r.resets.Load(), "no connection yet: nothing to drop")
	require.NoError(t, connected(context.Background(), nil))
	for range 10 {
		r.after(&pgconn.PgError{Code: "57P01"})
		r.after(&pgconn.PgError{Code: "57014"}) // a timeout: no reset
	}
	assert.EqualValues(t, 1, r.resets.Load(), "one reset for a burst")
	backdate := func() {
		r.mu.Lock()
		r.last = time.Now().Add(-resetEvery)
		r.mu.Unlock()
	}
	backdate()
	require.NoError(t, connected(context.Background(), nil))
	r.after(fmt.Errorf("read: %w", io.EOF))
	assert.EqualValues(t, 2, r.resets.Load(), "another after resetEvery")
	for range 3 {
		backdate()
		r.after(&pgconn.ConnectError{})
	}
	assert.EqualValues(t, 2, r.resets.Load(), "no connection made since the last: no reset, however long it lasts")
	backdate()
	require.NoError(t, connected(context.Background(), nil))
	r.after(&pgconn.PgError{Code: "25006"})
	assert.EqualValues(t, 3, r.resets.Load(), "a connection made since, to a node that is now a standby")
}

// TestFollowPrimary: a connection string naming several hosts keeps only a
// read-write server unless it says otherwise; one host is left alone,
// whatever its sslmode's fallbacks.
func TestFollowPrimary(t *testing.T) {
	t.Parallel()
	tests := []struct {
		url       string
		readWrite bool
	}{
		{url: "postgres://u@h1:5432,h2:5433/db?sslmode=disable", readWrite: true},
		{url: "postgres://u@h1:5432,h2:5433/db?sslmode=disable&target_session_attrs=read-write", readWrite: true},
		{url: "postgres://u@h1:5432,h2:5433/db?sslmode=disable&target_session_attrs=any"},
		{url: "postgres://u@h1:5432/db?sslmode=prefer"},
		{url: "postgres://u@h1:5432/db?sslmode=disable"},
		{url: "host=h1,h2 port=5432,5433 dbname=db sslmode=disable", readWrite: true},
	}
	for _, tt := range tests {
		cfg, err := pgx.ParseConfig(tt.url)
		require.NoError(t, err, tt.url)
		followPrimary(cfg, tt.url)
		assert.Equal(t, tt.readWrite, cfg.ValidateConnect != nil, tt.url)
	}
}

// TestUnconfirmedCommit: PostgreSQL's warning that a commit stopped
// waiting for the synchronous standby marks the connection; the commit is
// then not acknowledged (errUnconfirmed is a 503) and the connection is
// dropped when released. Other notices change nothing.
func TestUnconfirmedCommit(t *testing.T) {
	t.Parallel()
	r := &poolReset{log: slog.New(slog.DiscardHandler)}
	c, other := new(pgconn.PgConn), new(pgconn.PgConn)
	var passed int
	notice := r.onNotice(func(*pgconn.PgConn, *pgconn.Notice) { passed++ })
	notice(other, &pgconn.Notice{Severity: "NOTICE", Message: `relation "jobs" already exists, skipping`})
	notice(c, &pgconn.Notice{Severity: "WARNING", Message: "canceling wait for synchronous replication due to user request",
		Detail: "The transaction has already committed locally, but might not have been replicated to the standby."})
	assert.Equal(t, 2, passed, "the next handler sees every notice")
	assert.False(t, r.confirmed(c))
	assert.True(t, r.confirmed(other))
	assert.ErrorIs(t, mapErr(fmt.Errorf("storage: create prescription: %w", errUnconfirmed)), storage.ErrUnavailable)
	assert.True(t, r.forget(c), "released: dropped")
	assert.True(t, r.confirmed(c), "forgotten")
	assert.False(t, r.forget(other))
	notice(c, &pgconn.Notice{Severity: "WARNING", Message: "canceling the wait for synchronous replication and terminating connection due to administrator command"})
	assert.False(t, r.confirmed(c))
}

// TestFailoverCounts: the store's counts, which the operator's metrics
// expose, follow its pool resets (one for a burst, as the reset) and its
// commits answered errUnconfirmed; a confirmed commit and a failed one
// count nothing.
func TestFailoverCounts(t *testing.T) {
	t.Parallel()
	s := &Store{}
	s.switched.log = slog.New(slog.DiscardHandler)
	cfg, err := pgxpool.ParseConfig("postgres://rxgate@127.0.0.1:1/rxgate")
	require.NoError(t, err)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg) // connects lazily
	require.NoError(t, err)
	defer pool.Close()
	s.switched.pool.Store(pool)
	require.NoError(t, s.switched.afterConnect(nil)(context.Background(), nil))
	assert.Equal(t, storage.FailoverCounts{}, s.FailoverCounts())
	var _ storage.FailoverCounter = storage.CapabilitiesOf(s).Failover

	for range 3 {
		s.switched.after(&pgconn.PgError{Code: "57P01"})
	}
	assert.Equal(t, storage.FailoverCounts{PoolResets: 1}, s.FailoverCounts(), "a reset counted once for a burst")

	c := new(pgconn.PgConn)
	require.NoError(t, s.switched.commitErr(c, nil), "confirmed")
	failed := errors.New("a statement's own error")
	s.switched.unconfirmed.Store(c, struct{}{})
	require.ErrorIs(t, s.switched.commitErr(c, failed), failed, "not committed: nothing to confirm")
	require.ErrorIs(t, s.switched.commitErr(c, nil), errUnconfirmed)
	assert.Equal(t, storage.FailoverCounts{PoolResets: 1, UnconfirmedCommits: 1}, s.FailoverCounts())
}
