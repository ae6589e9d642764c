package postgres_test

import (
	"fmt"
	"io/fs"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage"
	"github.com/rxgate/rxgate/storage/postgres"
	"github.com/rxgate/rxgate/testsuite"
	"github.com/rxgate/rxgate/testsuite/storagetest"
)

// buildMigrations is a build's migration files: this build's, without
// the numbers in drop, with extra added.
func buildMigrations(t testing.TB, drop []int, extra map[string]string) fs.FS {
	t.Helper()
	out := fstest.MapFS{}
	built := postgres.BuiltMigrations()
	names, err := fs.Glob(built, "*.sql")
	require.NoError(t, err)
	skip := map[string]bool{}
	for _, n := range drop {
		skip[fmt.Sprintf("%04d_", n)] = true
	}
	for _, name := range names {
		if skip[name[:5]] {
			continue
		}
		b, err := fs.ReadFile(built, name)
		require.NoError(t, err)
		out[name] = &fstest.MapFile{Data: b}
	}
	for name, sql := range extra {
		out[name] = &fstest.MapFile{Data: []byte(sql)}
	}
	return out
}

// prescribe creates a prescription in w: a store serving.
func prescribe(t testing.TB, s storage.Store, w storagetest.World) {
	t.Helper()
	rx := w.Prescription()
	rx.PrescriptionItem = storage.PrescriptionItem{ItemName: "Item " + storage.NewID(), Quantity: "1"}
	require.NoError(t, s.CreatePrescription(t.Context(), &rx))
}

// TestRollingUpgrade plays a rolling upgrade with two builds: release N-1
// (this build's migrations, level 1) serves; release N (level 2) adds an
// expand migration and starts beside it; N-1 keeps serving against the
// newer schema, and a process of N-1 restarted meanwhile is let in; a
// later release's contract migration asks for level 2, and from then on
// N-1 is refused with a message that says why, while N runs on.
func TestRollingUpgrade(t *testing.T) {
	testsuite.PostgresURL(t)
	t.Parallel()
	schema := testsuite.NewSchema()
	expand := map[string]string{"0900_partner_tier.sql": "ALTER TABLE partners ADD COLUMN tier text NOT NULL DEFAULT '';"}
	contract := map[string]string{
		"0900_partner_tier.sql":    expand["0900_partner_tier.sql"],
		"0901_drop_old_column.sql": "-- rxgate:min-compat 2\nCOMMENT ON TABLE partners IS 'contracted';",
	}
	oldBuild := postgres.WithMigrations(postgres.Options{Schema: schema}, buildMigrations(t, nil, nil), 1)
	newBuild := postgres.WithMigrations(postgres.Options{Schema: schema}, buildMigrations(t, nil, expand), 2)
	contractBuild := postgres.WithMigrations(postgres.Options{Schema: schema}, buildMigrations(t, nil, contract), 2)

	old := openPostgres(t, oldBuild)
	w := storagetest.NewWorld(t, old)
	prescribe(t, old, w)

	upgraded := openPostgres(t, newBuild) // applies the expand step
	prescribe(t, upgraded, w)
	prescribe(t, old, w) // N-1 keeps serving against schema N
	w2 := storagetest.NewWorld(t, old)
	prescribe(t, old, w2)
	restarted := openPostgres(t, oldBuild) // an N-1 process restarted during the rollout
	prescribe(t, restarted, w)
	evs, _, err := restarted.ListEvents(t.Context(), storage.EventFilter{}, storage.PageRequest{Limit: 10})
	require.NoError(t, err)
	require.Len(t, evs, 5)

	openPostgres(t, contractBuild) // the contract step, once N-1 is gone
	_, err = postgres.Open(t.Context(), func() postgres.Options {
		o := oldBuild
		o.URL = testsuite.PostgresURL(t)
		return o
	}())
	require.ErrorIs(t, err, postgres.ErrSchemaIncompatible)
	require.EqualError(t, err, "storage: postgres: the database's schema needs a newer rxgate: its migration 0901_drop_old_column.sql asks for compatibility level 2 or later, and this build is level 1: run a newer rxgate")
	again := openPostgres(t, newBuild) // release N runs on
	prescribe(t, again, w)

	var recorded map[string]int
	require.NoError(t, again.Pool().QueryRow(t.Context(),
		`SELECT jsonb_object_agg(name, min_compat) FROM schema_migrations WHERE version >= 900`).Scan(&recorded))
	require.Equal(t, map[string]int{"0900_partner_tier.sql": 0, "0901_drop_old_column.sql": 2}, recorded)
}

// TestMigrateAppliesEveryMissingVersion: a database that applied a newer
// migration first (0900, of another branch) still gets the older one it
// lacks (0006) from a build that has both.
func TestMigrateAppliesEveryMissingVersion(t *testing.T) {
	testsuite.PostgresURL(t)
	t.Parallel()
	schema := testsuite.NewSchema()
	other := map[string]string{"0900_other_branch.sql": "CREATE TABLE other_branch (id int);"}
	first := openPostgres(t, postgres.WithMigrations(postgres.Options{Schema: schema}, buildMigrations(t, []int{6}, other), postgres.Compat))
	applied := func() []int {
		var vs []int
		require.NoError(t, first.Pool().QueryRow(t.Context(), `SELECT array_agg(version ORDER BY version) FROM schema_migrations`).Scan(&vs))
		return vs
	}
	require.NotContains(t, applied(), 6)
	require.Contains(t, applied(), 900)

	openPostgres(t, postgres.WithMigrations(postgres.Options{Schema: schema}, buildMigrations(t, nil, other), postgres.Compat))
	require.Equal(t, append(postgres.MigrationVersions(), 900), applied())
	var opts []string
	require.NoError(t, first.Pool().QueryRow(t.Context(), `SELECT reloptions FROM pg_class WHERE oid = 'jobs'::regclass`).Scan(&opts))
	require.Contains(t, opts, "fillfactor=70", "0006 ran")
}
