package postgres

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The migrations are numbered SQL files, applied in order, each in a
// transaction of its own with its row in schema_migrations. A small
// migrator rather than a library: the schema moves forward only, the files
// are embedded, and what is needed beyond a loop is the lock below, which
// no library would spare us from understanding.

//go:embed migrations/*.sql
var migrationFiles embed.FS

type migration struct {
	version int
	name    string
	sql     string
}

func migrations() ([]migration, error) {
	names, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, name := range names {
		base := strings.TrimPrefix(name, "migrations/")
		n, err := strconv.Atoi(strings.SplitN(base, "_", 2)[0])
		if err != nil {
			return nil, fmt.Errorf("storage: postgres: migration %s: not numbered", base)
		}
		b, err := migrationFiles.ReadFile(name)
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: n, name: base, sql: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	return out, nil
}

// SchemaVersion is the newest migration this build has.
func SchemaVersion() int {
	ms, err := migrations()
	if err != nil || len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].version
}

// MigrationVersions are the numbers of this build's migrations, in order.
// They need not be consecutive: a number may be left to a migration of
// another branch.
func MigrationVersions() []int {
	ms, err := migrations()
	if err != nil {
		return nil
	}
	vs := make([]int, len(ms))
	for i, m := range ms {
		vs[i] = m.version
	}
	return vs
}

// migrate applies the migrations not applied yet. It holds a session
// advisory lock while it works, so replicas that start together apply each
// migration once: the second waits, then finds nothing to do. A database
// whose schema is newer than this build is refused.
func migrate(ctx context.Context, pool *pgxpool.Pool, lock int64) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("storage: postgres: migrate: %w", safeErr(err))
	}
	defer conn.Release()
	// A migration takes as long as it takes, and a replica starting
	// beside one that migrates waits for its lock: the session's timeouts
	// are lifted while this connection migrates and restored (RESET
	// returns to the values the connection started with) before it goes
	// back to the pool.
	if _, err := conn.Exec(ctx, `SET statement_timeout = 0; SET lock_timeout = 0`); err != nil {
		return fmt.Errorf("storage: postgres: migrate: %w", safeErr(err))
	}
	defer func() {
		if _, err := conn.Exec(context.Background(), `RESET statement_timeout; RESET lock_timeout`); err != nil {
			_ = conn.Conn().Close(context.Background()) // the pool drops a closed connection
		}
	}()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, lock); err != nil {
		return fmt.Errorf("storage: postgres: migrate: lock: %w", safeErr(err))
	}
	defer func() { _, _ = conn.Exec(context.Background(), `SELECT pg_advisory_unlock($1)`, lock) }()
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return fmt.Errorf("storage: postgres: migrate: %w", safeErr(err))
	}
	var current int
	if err := conn.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
		return fmt.Errorf("storage: postgres: migrate: %w", safeErr(err))
	}
	if newest := ms[len(ms)-1].version; current > newest {
		return fmt.Errorf("storage: postgres: the database's schema is version %d, newer than this build's %d: run a newer rxgate", current, newest)
	}
	for _, m := range ms {
		if m.version <= current {
			continue
		}
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.version, m.name)
			return err
		})
		if err != nil {
			return fmt.Errorf("storage: postgres: migration %s: %w", m.name, safeErr(err))
		}
	}
	return nil
}
