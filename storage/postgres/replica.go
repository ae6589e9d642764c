package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rxgate/rxgate/storage"
)

// Replica identity (Options.ReplicaID). A lease records the replica id of
// the process that took it (jobs.replica_id), beside its owner, which is
// random per queue. A process restarted under the same id takes those
// leases back at Open: only its dead predecessor can hold them, so the
// deliveries they were for start again at once instead of after the
// leases expire. That rests on one live process per id, which Open
// enforces with a row per id in replicas.
//
// Why a row and not a session advisory lock held for the process's life:
// under PgBouncer's transaction pooling (issue 28, item 6) a session lock
// stays with whichever server connection took it, so a second process
// could take it again on that connection, and a dead process's lock would
// outlive it for as long as the pooler keeps the connection. The row works
// through any pooler: it names the holder (a random process id), carries
// its heartbeat on the database's clock (last_seen, written every
// Options.Heartbeat), and names the database session the holder keeps
// open for its life (backend_pid, backend_start). A start takes the row
// over when
//   - no row is there (the holder closed its store and deleted it), or
//   - the holder's session is gone from pg_stat_activity: its process
//     died and the kernel closed its socket, so on a direct connection a
//     crash-restart takes over at once, or
//   - last_seen is staleBeats heartbeats old: the fallback behind a
//     pooler, where the recorded session is a pooled server connection
//     that outlives the process, and after a host died without closing
//     its sockets.
//
// Otherwise the start waits, watching last_seen: a live holder moves it
// within a heartbeat, and the start is then refused with one line; a dead
// one lets it go stale, and the start takes over. So a start is refused
// within a heartbeat, or goes ahead within staleBeats heartbeats, and
// never on a clock but the database's.

// defaultHeartbeat is how often a replica writes its heartbeat when
// Options.Heartbeat is 0.
const defaultHeartbeat = 5 * time.Second

// staleBeats is how many heartbeats a holder may miss before a process
// starting under its id presumes it dead.
const staleBeats = 3

// replica is this process's hold on its replica id.
type replica struct {
	id      string
	process string // random per process: whose row it is
	beat    time.Duration
	cfg     *pgx.ConnConfig
	// conn is the session the process keeps open for its life: a crash
	// closes it, which tells a restart the holder is gone. Only register,
	// then the heartbeat goroutine, then unregister use it.
	conn *pgx.Conn
}

// ErrReplicaInUse is the error of an Open refused because another live
// process holds its replica id.
var ErrReplicaInUse = errors.New("storage: postgres: replica id in use")

// register takes the replica id for this process, waiting while its row
// belongs to another process whose liveness is not settled yet (see
// above), and refuses with ErrReplicaInUse when it is alive, or still
// unsettled when ctx ends.
func (r *replica) register(ctx context.Context) error {
	conn, err := pgx.ConnectConfig(ctx, r.cfg)
	if err != nil {
		return fmt.Errorf("storage: postgres: replica %s: %w", r.id, safeErr(err))
	}
	r.conn = conn
	// The row is read often while a start waits: a start takes over as
	// soon as the holder's session is gone, whatever the heartbeat.
	poll := min(max(r.beat/4, 10*time.Millisecond), 200*time.Millisecond)
	var first *time.Time
	for {
		taken, err := r.take(ctx)
		if err != nil {
			return fmt.Errorf("storage: postgres: replica %s: %w", r.id, safeErr(err))
		}
		if taken {
			return nil
		}
		var seen time.Time
		var age time.Duration
		err = conn.QueryRow(ctx, `SELECT last_seen, now() - last_seen FROM replicas WHERE replica_id = $1`, r.id).Scan(&seen, &age)
		if errors.Is(err, pgx.ErrNoRows) {
			continue // deleted in between: the holder closed; take it
		}
		if err != nil {
			return fmt.Errorf("storage: postgres: replica %s: %w", r.id, safeErr(err))
		}
		if first == nil {
			first = &seen
		} else if !seen.Equal(*first) {
			return r.inUse(age)
		}
		select {
		case <-ctx.Done():
			return r.inUse(age)
		case <-time.After(poll):
		}
	}
}

// inUse is register's refusal.
func (r *replica) inUse(age time.Duration) error {
	return fmt.Errorf("%w: another rxgate process runs as replica %q (its heartbeat is %s old); give each replica its own storage.postgres.replica_id",
		ErrReplicaInUse, r.id, age.Round(time.Millisecond))
}

// take writes this process into the replica's row, when the row is free
// (see above), in one statement: two processes starting together are
// ordered by the row's lock, and the second finds the first alive.
func (r *replica) take(ctx context.Context) (bool, error) {
	rows, err := r.conn.Query(ctx, `
		INSERT INTO replicas AS r (replica_id, process_id, backend_pid, backend_start, started_at, last_seen)
		SELECT $1, $2, pg_backend_pid(), (SELECT backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()), now(), now()
		ON CONFLICT (replica_id) DO UPDATE SET process_id = excluded.process_id, backend_pid = excluded.backend_pid,
			backend_start = excluded.backend_start, started_at = excluded.started_at, last_seen = excluded.last_seen
		WHERE r.process_id = excluded.process_id
			OR r.last_seen < now() - $3::interval
			OR NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = r.backend_pid
				-- backend_start is hidden from other roles: then the pid alone.
				AND (a.backend_start IS NULL OR r.backend_start IS NULL OR a.backend_start = r.backend_start))
		RETURNING true`, r.id, r.process, staleBeats*r.beat)
	if err != nil {
		return false, err
	}
	taken, err := pgx.CollectRows(rows, pgx.RowTo[bool])
	return len(taken) > 0, err
}

// heartbeat writes last_seen every beat until ctx ends, reconnecting the
// holder's session when it broke (and recording the new one). When the
// row names another process, which took the id over after this one
// looked dead, it logs that once and stops: the other's leases are not
// this process's to keep alive.
func (s *Store) heartbeat(ctx context.Context) {
	r := s.replica
	t := time.NewTicker(r.beat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		owned, err := r.beat1(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			s.log.Warn("postgres: the replica's heartbeat failed; retrying", "replica", r.id, "error", fmt.Sprint(safeErr(err)))
		case !owned:
			s.log.Error("postgres: another process took over this replica id after missing heartbeats; give each replica its own storage.postgres.replica_id", "replica", r.id)
			return
		}
	}
}

// beat1 writes one heartbeat within one beat, reconnecting first when the
// holder's session is gone; owned is false when the row names another
// process.
func (r *replica) beat1(ctx context.Context) (owned bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, r.beat)
	defer cancel()
	if r.conn == nil || r.conn.IsClosed() {
		if r.conn != nil {
			_ = r.conn.Close(ctx)
		}
		r.conn = nil
		conn, err := pgx.ConnectConfig(ctx, r.cfg)
		if err != nil {
			return true, err
		}
		r.conn = conn
	}
	tag, err := r.conn.Exec(ctx, `UPDATE replicas SET last_seen = now(), backend_pid = pg_backend_pid(),
			backend_start = (SELECT backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid())
		WHERE replica_id = $1 AND process_id = $2`, r.id, r.process)
	if err != nil {
		return true, err
	}
	return tag.RowsAffected() > 0, nil
}

// unregister deletes the replica's row, so that the next process under the
// id starts at once, and closes the holder's session.
func (r *replica) unregister() {
	if r.conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = r.conn.Exec(ctx, `DELETE FROM replicas WHERE replica_id = $1 AND process_id = $2`, r.id, r.process)
	_ = r.conn.Close(ctx)
	r.conn = nil
}

// takeBack makes the jobs leased under this replica id pending again, due
// when they were, without counting an attempt: register has made this
// process the id's only live holder, so those leases are its dead
// predecessor's, and their attempts are made again (at least once), now
// rather than when the leases would expire. It returns how many it took.
func (s *Store) takeBack(ctx context.Context) (int, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	tag, err := s.pool.Exec(ctx, `UPDATE jobs SET owner = '', lease_id = NULL, leased_until = NULL, replica_id = NULL
		WHERE replica_id = $1 AND lease_id IS NOT NULL`, s.replica.id)
	if err != nil {
		return 0, wrap("take back the replica's leases", err)
	}
	return int(tag.RowsAffected()), nil
}

// replicaID is the value of jobs.replica_id for this store's leases: NULL
// for a store opened without one.
func (s *Store) replicaID() *string {
	if s.replica == nil {
		return nil
	}
	return &s.replica.id
}

// newReplica prepares the hold on id for Open; nil for an anonymous store.
func newReplica(id string, beat time.Duration, cfg *pgx.ConnConfig) *replica {
	if id == "" {
		return nil
	}
	if beat <= 0 {
		beat = defaultHeartbeat
	}
	return &replica{id: id, process: storage.NewID(), beat: beat, cfg: cfg}
}
