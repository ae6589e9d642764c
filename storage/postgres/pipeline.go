package postgres

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rxgate/rxgate/storage"
)

// pipeTx is a transaction whose BEGIN travels with its first batch and
// whose COMMIT with its last (Store.pipe): a transaction of two batches
// costs two round trips, where pgx.Tx costs two more (BEGIN and COMMIT
// on their own).
type pipeTx struct {
	conn  *pgx.Conn
	begin string
	open  bool // a batch was sent: the transaction may be open
	// audit is the ctx's pending audit entry, which commit appends; nil
	// for none, and in a read-only transaction.
	audit *storage.AuditPending
}

// batch starts a batch of the transaction; the first carries its BEGIN.
func (p *pipeTx) batch() *pgx.Batch {
	b := &pgx.Batch{}
	if !p.open {
		b.Queue(p.begin)
	}
	return b
}

// send sends b and reads every result, running the callbacks queued on
// it. After an error the statements after the failing one were skipped
// and the transaction is aborted: pipe rolls it back.
func (p *pipeTx) send(ctx context.Context, b *pgx.Batch) error {
	p.open = true
	return p.conn.SendBatch(ctx, b).Close()
}

// commit queues COMMIT on b (a batch of p's) and sends it. A pending
// audit entry goes with it, unsealed (audit.go): no round trip more, and
// no lock on the chain's head.
func (p *pipeTx) commit(ctx context.Context, b *pgx.Batch) error {
	if p.audit != nil {
		queueUnsealed(b, &p.audit.Entry)
	}
	b.Queue(`COMMIT`)
	if err := p.send(ctx, b); err != nil {
		return err
	}
	p.open = false
	return nil
}

// Transactions' BEGIN statements, for pipe.
const (
	beginReadCommitted = `BEGIN ISOLATION LEVEL READ COMMITTED`
	beginSnapshot      = `BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY`
)

// pipe runs fn in a pipelined transaction (pipeTx) on a pooled
// connection; fn sends its batches and commits with the last. A
// transaction fn leaves open, by an error or without committing, is rolled
// back (or its connection closed, which rolls it back). As tx does, pipe
// retries the whole transaction on a serialization failure or a deadlock
// (fn may run more than once) and, in a write transaction, appends ctx's
// pending audit entry (storage.WithAudit) as it commits (pipeTx.commit).
func (s *Store) pipe(ctx context.Context, begin string, fn func(*pipeTx) error) error {
	audit := storage.PendingAudit(ctx)
	if begin == beginSnapshot {
		audit = nil
	}
	refused := false
	for attempt := 1; ; attempt++ {
		err := s.pipeOnce(ctx, begin, audit, fn)
		if err == nil && audit != nil {
			audit.MarkWritten()
		}
		// As in tx: a switch of primaries resets the pool, and a
		// transaction a standby refused wrote nothing, so it runs once
		// more on a fresh connection.
		s.switched.after(err)
		again := retryable(err)
		if !refused && readOnlyRefusal(err) {
			refused, again = true, true
		}
		if err == nil || !again {
			return err
		}
		if attempt == maxTxAttempts {
			return fmt.Errorf("%w: %w", storage.ErrConflict, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(rand.IntN(attempt*2)+1) * time.Millisecond):
		}
	}
}

func (s *Store) pipeOnce(ctx context.Context, begin string, audit *storage.AuditPending, fn func(*pipeTx) error) error {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	pc := c.Conn().PgConn()
	s.switched.forget(pc)
	p := &pipeTx{conn: c.Conn(), begin: begin, audit: audit}
	err = fn(p)
	if p.open {
		rollback(c)
	}
	// A COMMIT the synchronous standby did not confirm (failover.go).
	return s.switched.commitErr(pc, err)
}

// rollback ends the connection's transaction; when it cannot, it closes
// the connection, so that the pool drops it and the server rolls back.
func rollback(c *pgxpool.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.Exec(ctx, `ROLLBACK`); err != nil {
		_ = c.Conn().Close(ctx)
	}
}
