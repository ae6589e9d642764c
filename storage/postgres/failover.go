package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
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

// Following the primary through a failover (issue 29). The connection
// string names every node (postgres://h1:5432,h2:5432/rxgate?
// target_session_attrs=read-write): pgx tries them in turn and keeps the
// first that accepts writes, so a new connection never lands on a standby.
// What must not outlive a switch is the connections made before it: the
// pool's and the LISTEN connection, opened on the old primary, which is
// now dead, shutting down, or back as a standby. So an answer that says
// the server is no longer a primary that serves (switchCause) closes the
// connection it came on and drops every pooled one (poolReset): the next
// calls connect afresh, to whichever node is the primary then. Until one
// is, they fail fast with ErrUnavailable (503, the queue backs off and
// tries again), and a statement refused by a read-only server, which
// wrote nothing, is retried once on a fresh connection (tx).

// switchCause says why err shows the server is no longer a serving
// primary, or "" when it does not: a standby's read-only refusal (25006)
// or pgx's check of target_session_attrs, the server shutting down or
// restarting (57P01 admin, 57P02 crash, 57P03 starting), a connection
// exception (class 08), and a connection lost or refused. A statement or
// lock timeout, a caller that gave up, and a statement's own error are
// not: they say nothing about the other connections.
func switchCause(err error) string {
	if err == nil {
		return ""
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return switchCode(pgErr.Code)
	}
	if errors.Is(err, pgconn.ErrReadOnlyConnection) {
		return "read-only server"
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return ""
	}
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) {
		return "cannot connect"
	}
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		return "" // a slow server is not a switched one
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.As(err, &netErr) {
		return "connection lost"
	}
	return ""
}

// switchCode is switchCause for a SQLSTATE.
func switchCode(code string) string {
	switch {
	case code == "25006":
		return "read-only server (SQLSTATE 25006)"
	case code == "57P01", code == "57P02", code == "57P03":
		return "server shutting down or starting (SQLSTATE " + code + ")"
	case len(code) == 5 && code[:2] == "08":
		return "connection exception (SQLSTATE " + code + ")"
	}
	return ""
}

// readOnlyRefusal reports a statement refused by a read-only server: it
// wrote nothing, so the transaction may run again elsewhere.
func readOnlyRefusal(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "25006"
}

// resetEvery bounds how often a pool is reset: a switch makes every
// connection in use fail at about the same time, and one reset is enough
// for all of them.
const resetEvery = time.Second

// poolReset drops every connection of a pool when a connection shows
// that the primary switched, at most once per resetEvery, and only when
// the pool made a connection since the last reset: until it has, every
// connection it holds was dropped already. So a switch is one reset, not
// one a second while no primary accepts connections.
type poolReset struct {
	pool atomic.Pointer[pgxpool.Pool] // nil until Open has the pool
	log  *slog.Logger
	// resets counts them; unconfirmedCommits counts the commits answered
	// errUnconfirmed (Store.FailoverCounts, the operator's metrics).
	resets             atomic.Int64
	unconfirmedCommits atomic.Int64

	// unconfirmed holds the connections (*pgconn.PgConn) whose commit
	// the synchronous standby did not confirm (onNotice).
	unconfirmed sync.Map

	// opened counts the connections the pool made (afterConnect).
	opened atomic.Int64

	mu         sync.Mutex
	last       time.Time
	lastOpened int64 // opened at the last reset
}

// after is called with the error of a call: when it shows a switch,
// the pool is reset.
func (r *poolReset) after(err error) {
	if cause := switchCause(err); cause != "" {
		r.reset(cause)
	}
}

// reset drops every idle connection now and every connection in use when
// it is released (pgxpool.Pool.Reset), unless a reset came within
// resetEvery.
func (r *poolReset) reset(cause string) {
	pool := r.pool.Load()
	if pool == nil {
		return
	}
	r.mu.Lock()
	now, opened := time.Now(), r.opened.Load()
	if now.Sub(r.last) < resetEvery || opened == r.lastOpened {
		r.mu.Unlock()
		return
	}
	r.last, r.lastOpened = now, opened
	r.mu.Unlock()
	pool.Reset()
	r.resets.Add(1)
	r.log.Warn("postgres: the server is no longer a primary that serves; dropping every pooled connection, the next ones go to the primary",
		"cause", cause)
}

// afterConnect is the pool's AfterConnect: next, and the connection
// counted.
func (r *poolReset) afterConnect(next func(context.Context, *pgx.Conn) error) func(context.Context, *pgx.Conn) error {
	return func(ctx context.Context, c *pgx.Conn) error {
		if next != nil {
			if err := next(ctx, c); err != nil {
				return err
			}
		}
		r.opened.Add(1)
		return nil
	}
}

// onPgError is the connections' pgconn.Config.OnPgError: next (the
// default closes a connection on a FATAL error) and, for an error that
// shows a switch, the connection closed and the pool reset. A
// connection to a read-only server is of no use to rxgate.
func (r *poolReset) onPgError(next pgconn.PgErrorHandler) pgconn.PgErrorHandler {
	return func(c *pgconn.PgConn, pgErr *pgconn.PgError) bool {
		keep := next == nil || next(c, pgErr)
		if cause := switchCode(pgErr.Code); cause != "" {
			r.reset(cause)
			return false
		}
		return keep
	}
}

// followPrimary makes a connection string that names several hosts and
// no target_session_attrs keep only a read-write server, as
// target_session_attrs=read-write would: pgx's default for several hosts
// takes the first that answers, which may be a standby, and rxgate can do
// nothing on a read-only session. An explicit target_session_attrs stays.
func followPrimary(cfg *pgx.ConnConfig, url string) {
	if cfg.ValidateConnect != nil || strings.Contains(url, "target_session_attrs") {
		return
	}
	// A fallback to the same host is sslmode's (prefer tries TLS, then
	// not): one host is not a failover pair.
	for _, fb := range cfg.Fallbacks {
		if fb.Host != cfg.Host || fb.Port != cfg.Port {
			cfg.ValidateConnect = pgconn.ValidateConnectTargetSessionAttrsReadWrite
			return
		}
	}
}

// A commit on a primary with a synchronous standby waits for the standby;
// cancelled (a statement timeout, the caller gone), PostgreSQL ends the
// wait with a warning and reports the commit done, although only the
// primary has it. On a primary that lost its standby in a switch, such a
// commit is gone once the node rejoins as a standby (pg_rewind). So a
// commit answered with that warning is not acknowledged: the call fails
// with errUnconfirmed (503, the client tries again), and its connection
// is dropped when released.

// errUnconfirmed is the error of a commit the synchronous standby did not
// confirm.
var errUnconfirmed = fmt.Errorf("%w: the synchronous standby did not confirm the commit; it may or may not have taken effect", storage.ErrUnavailable)

// syncRepCancelled reports PostgreSQL's warning that a commit stopped
// waiting for the synchronous standby.
func syncRepCancelled(n *pgconn.Notice) bool {
	return strings.HasPrefix(n.Message, "canceling wait for synchronous replication") ||
		strings.HasPrefix(n.Message, "canceling the wait for synchronous replication")
}

// onNotice is the connections' pgconn.Config.OnNotice: next, and a
// commit the synchronous standby did not confirm marked on its
// connection, and the pool reset.
func (r *poolReset) onNotice(next pgconn.NoticeHandler) pgconn.NoticeHandler {
	return func(c *pgconn.PgConn, n *pgconn.Notice) {
		if next != nil {
			next(c, n)
		}
		if syncRepCancelled(n) {
			r.unconfirmed.Store(c, struct{}{})
			r.reset("a commit the synchronous standby did not confirm")
		}
	}
}

// confirmed reports whether no commit on c went unconfirmed since forget.
func (r *poolReset) confirmed(c *pgconn.PgConn) bool {
	_, bad := r.unconfirmed.Load(c)
	return !bad
}

// forget clears c's mark; it reports whether there was one.
func (r *poolReset) forget(c *pgconn.PgConn) bool {
	_, bad := r.unconfirmed.LoadAndDelete(c)
	return bad
}

// afterRelease is the pool's AfterRelease: next, and a connection with an
// unconfirmed commit destroyed.
func (r *poolReset) afterRelease(next func(*pgx.Conn) bool) func(*pgx.Conn) bool {
	return func(c *pgx.Conn) bool {
		if r.forget(c.PgConn()) {
			return false
		}
		return next == nil || next(c)
	}
}

// txOnce runs fn in one transaction on a connection of its own and
// commits; a commit the synchronous standby did not confirm is
// errUnconfirmed.
func (s *Store) txOnce(ctx context.Context, opts pgx.TxOptions, fn func(pgx.Tx) error) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	pc := conn.Conn().PgConn()
	s.switched.forget(pc)
	if err := pgx.BeginTxFunc(ctx, conn, opts, fn); err != nil {
		return err
	}
	return s.switched.commitErr(pc, nil)
}

// commitErr is err, or errUnconfirmed (counted) when err is nil and a
// commit on c went unconfirmed since forget.
func (r *poolReset) commitErr(c *pgconn.PgConn, err error) error {
	if err == nil && !r.confirmed(c) {
		r.unconfirmedCommits.Add(1)
		return errUnconfirmed
	}
	return err
}

// FailoverCounts returns the store's pool resets and unconfirmed commits
// since it opened (storage.FailoverCounter).
func (s *Store) FailoverCounts() storage.FailoverCounts {
	return storage.FailoverCounts{PoolResets: s.switched.resets.Load(), UnconfirmedCommits: s.switched.unconfirmedCommits.Load()}
}
