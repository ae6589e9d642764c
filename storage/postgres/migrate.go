package postgres

import (
	"bufio"
	"context"
	"embed"
	"errors"
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
// are embedded, and what is needed beyond a loop is the lock and the
// compatibility rule below, which no library would spare us from
// understanding.
//
// Rolling upgrades: expand, then contract. A release's migrations only
// add (columns with defaults, tables, indexes) what its code needs, so
// the previous release's processes, still serving beside the new ones,
// keep working against the new schema (expand). What the old code needs
// and the new no longer does is removed by a migration of a later
// release (contract), once no process of the old code is left; that
// migration says so with a header line
//
//	-- rxgate:min-compat N
//
// naming the lowest compatibility level (Compat) of the builds that may
// still run against the schema once it is applied. A build refuses a
// schema only when a migration applied to it asks for a level above its
// own: a schema with migrations a build does not know is not refused for
// that alone. A migration without the line asks for nothing (level 0).

// Compat is this build's compatibility level: raised by a release whose
// code stops using something of the schema that earlier releases need,
// so that the later release that removes it (its contract migration,
// min-compat set to this level) refuses the builds that still use it.
const Compat = 1

// minCompatLine is a migration's header line that sets its min-compat.
const minCompatLine = "-- rxgate:min-compat "

//go:embed migrations/*.sql
var migrationFiles embed.FS

type migration struct {
	version   int
	name      string
	sql       string
	minCompat int
}

// migrationSet is a build's migrations and compatibility level: this
// build's (builtMigrations), or, in tests, another build's.
type migrationSet struct {
	files  fs.FS // the numbered .sql files, at its root
	compat int
}

// builtMigrations is this build's migration set.
func builtMigrations() migrationSet {
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		panic(err) // the embedded directory is there
	}
	return migrationSet{files: sub, compat: Compat}
}

func migrations() ([]migration, error) { return builtMigrations().load() }

// load reads the set's migrations, in order of their numbers.
func (set migrationSet) load() ([]migration, error) {
	names, err := fs.Glob(set.files, "*.sql")
	if err != nil {
		return nil, err
	}
	var out []migration
	seen := map[int]string{}
	for _, name := range names {
		n, err := strconv.Atoi(strings.SplitN(name, "_", 2)[0])
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("storage: postgres: migration %s: not numbered", name)
		}
		if other, ok := seen[n]; ok {
			return nil, fmt.Errorf("storage: postgres: migrations %s and %s share a number", other, name)
		}
		seen[n] = name
		b, err := fs.ReadFile(set.files, name)
		if err != nil {
			return nil, err
		}
		minCompat, err := parseMinCompat(string(b))
		if err != nil {
			return nil, fmt.Errorf("storage: postgres: migration %s: %w", name, err)
		}
		out = append(out, migration{version: n, name: name, sql: string(b), minCompat: minCompat})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	return out, nil
}

// parseMinCompat reads a migration's min-compat line; 0 without one.
func parseMinCompat(sql string) (int, error) {
	sc := bufio.NewScanner(strings.NewReader(sql))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if v, ok := strings.CutPrefix(line, minCompatLine); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil || n < 0 {
				return 0, fmt.Errorf("%q is not a compatibility level", line)
			}
			return n, nil
		}
	}
	return 0, sc.Err()
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

// ErrSchemaIncompatible is the error of an Open refused because the
// database's schema was migrated past what this build can run against
// (a contract migration asks for a higher Compat).
var ErrSchemaIncompatible = errors.New("storage: postgres: the database's schema needs a newer rxgate")

// migrate applies the set's migrations that the database has not applied,
// every one of them, whatever its number: numbers need not be
// consecutive, and a database may have applied a newer one first. Each
// migration runs in a transaction of its own that first takes a
// transaction-level advisory lock, so replicas that start together apply
// each once (the second waits, then finds it applied), and the lock is
// never left behind on a pooled connection (PgBouncer's transaction
// pooling hands a session to another client between transactions). The
// schema is refused (ErrSchemaIncompatible) when a migration applied to it
// asks for a compatibility level above the set's.
func migrate(ctx context.Context, pool *pgxpool.Pool, lock int64, set migrationSet) error {
	ms, err := set.load()
	if err != nil {
		return err
	}
	if len(ms) == 0 {
		return errors.New("storage: postgres: no migrations")
	}
	for {
		done, err := migrateStep(ctx, pool, lock, set.compat, ms)
		if err != nil || done {
			return err
		}
	}
}

// migrateStep applies, under the lock, the first of ms the database has
// not applied; done when there is none.
func migrateStep(ctx context.Context, pool *pgxpool.Pool, lock int64, compat int, ms []migration) (done bool, err error) {
	var applying *migration
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		// A migration takes as long as it takes, and a replica starting
		// beside one that migrates waits for the lock: the connection's
		// timeouts are lifted for this transaction only (SET LOCAL).
		if _, err := tx.Exec(ctx, `SET LOCAL statement_timeout = 0; SET LOCAL lock_timeout = 0`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lock); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
				version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now());
			ALTER TABLE schema_migrations ADD COLUMN IF NOT EXISTS min_compat integer NOT NULL DEFAULT 0`); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT version, name, min_compat FROM schema_migrations ORDER BY version`)
		if err != nil {
			return err
		}
		applied := map[int]bool{}
		var need int
		var needName string
		for rows.Next() {
			var v, mc int
			var name string
			if err := rows.Scan(&v, &name, &mc); err != nil {
				rows.Close()
				return err
			}
			applied[v] = true
			if mc > need {
				need, needName = mc, name
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if need > compat {
			return fmt.Errorf("%w: its migration %s asks for compatibility level %d or later, and this build is level %d: run a newer rxgate",
				ErrSchemaIncompatible, needName, need, compat)
		}
		for i := range ms {
			if !applied[ms[i].version] {
				applying = &ms[i]
				break
			}
		}
		if applying == nil {
			done = true
			return nil
		}
		if _, err := tx.Exec(ctx, applying.sql); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO schema_migrations (version, name, min_compat) VALUES ($1, $2, $3)`,
			applying.version, applying.name, applying.minCompat)
		return err
	})
	switch {
	case errors.Is(err, ErrSchemaIncompatible):
		return false, err
	case err != nil && applying != nil:
		return false, fmt.Errorf("storage: postgres: migration %s: %w", applying.name, safeErr(err))
	case err != nil:
		return false, fmt.Errorf("storage: postgres: migrate: %w", safeErr(err))
	}
	return done, nil
}
