package testsuite_test

import (
	"context"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/queue/receiver"
	"github.com/rxgate/rxgate/testsuite"
)

// TestRollingUpgradeWithThePreviousBuild is a rolling upgrade with two
// real builds, as docs/scaling.md describes it: the previous build (the
// commit before the newest migration was added, built from git) serves a
// schema alone; the current build joins it behind the balancer and
// applies the newest migration; both then serve side by side, and
// prescriptions created through either are listed through either and
// delivered, signed, by whichever replica claims them. The previous
// build, restarted against the new schema during the rollout, starts and
// serves, and once it is gone the current build serves alone, with one
// audit chain of what both wrote. The
// newest migration must be expand-only for this (a contract migration,
// with a min-compat line, comes a release after its expand step).
func TestRollingUpgradeWithThePreviousBuild(t *testing.T) {
	testsuite.PostgresURL(t)
	if os.Getenv(testsuite.EnvBaseURL) != "" || testsuite.OnPostgres() {
		t.Skip("runs once, in the badger pass, on replicas of its own")
	}
	newest, file, expandOnly := newestMigration(t)
	if !expandOnly {
		t.Skipf("the newest migration, %s, is a contract step, which the previous build is refused by design (TestRollingUpgrade covers that)", file)
	}
	previous := previousBuild(t, file)

	rs := startReplicas(t, 0, "\n  backoff_base: 10ms\n  backoff_max: 50ms")
	rs.addBinary(t, previous)
	env := rs.env(t)
	tn := env.NewTenant(t)
	validate(t, env, tn)
	var mu sync.Mutex
	delivered := map[string]int{}
	rcv := &receiver.Receiver{OnDelivery: func(d receiver.Delivery) {
		mu.Lock()
		delivered[d.EventID]++
		mu.Unlock()
	}}
	srv := httptest.NewServer(rcv)
	t.Cleanup(srv.Close)
	_, secret := registerEndpoint(t, env, tn.PartnerID, srv.URL+"/hooks")
	rcv.Secrets = []string{secret}

	var scids, events []string
	create := func(n int) {
		for range n {
			scid := prescribe(t, env, tn)
			scids = append(scids, scid)
			events = append(events, eventOf(t, env, tn, scid)["event_id"].(string))
		}
	}
	// Every prescription is listed, whichever replica the balancer sends
	// the read to (as many reads as replicas), and every event delivered.
	check := func(stage string) {
		t.Helper()
		token := tn.Token(t, testsuite.RolePrescriber)
		for range len(*rs.partners.Load()) {
			listed, _ := prescriptionsAt(t, env, tn, token, 50, "")
			require.ElementsMatch(t, scids, listed, "%s: the patient's prescriptions", stage)
		}
		for _, id := range events {
			waitFor(t, env, id, hasStatus("delivered"))
		}
		mu.Lock()
		defer mu.Unlock()
		for _, id := range events {
			require.Positive(t, delivered[id], "%s: event %s delivered", stage, id)
		}
	}

	create(4)
	check("the previous build alone")
	require.Less(t, schemaVersion(t, rs.dbURL), newest, "the previous build does not know the newest migration")

	rs.add(t) // the current build, which migrates
	require.Equal(t, newest, schemaVersion(t, rs.dbURL))
	create(8)
	check("both builds side by side")

	rs.kill(t, 0)
	rs.restart(t, 0) // the previous build, restarted during the rollout
	create(8)
	check("the previous build restarted on the new schema")

	rs.kill(t, 0)
	create(4)
	check("the current build alone")

	// What both builds audited is one chain: the previous build chained
	// its entries as it wrote them, the current one through its sealer.
	verify := exec.CommandContext(t.Context(), rs.bins[1], "audit", "verify", "--config", rs.cfgs[1], "--admin-url", rs.AdminURL)
	out, err := verify.CombinedOutput()
	require.NoError(t, err, "rxgate audit verify: %s", out)
	t.Logf("rxgate audit verify: %s", out)
}

// newestMigration returns the number and file name of this build's
// newest PostgreSQL migration, and whether it is expand-only (no
// min-compat line).
func newestMigration(t *testing.T) (int, string, bool) {
	t.Helper()
	names, err := filepath.Glob("../storage/postgres/migrations/*.sql")
	require.NoError(t, err)
	require.NotEmpty(t, names)
	last := slices.Max(names)
	n, err := strconv.Atoi(strings.SplitN(filepath.Base(last), "_", 2)[0])
	require.NoError(t, err)
	b, err := os.ReadFile(last)
	require.NoError(t, err)
	return n, filepath.Base(last), !strings.Contains(string(b), "-- rxgate:min-compat ")
}

// previousBuild builds rxgate as it was before its newest migration,
// file, was added: the parent of the commit that added it, or the last
// commit while it is not committed yet, taken from git into a directory
// of its own.
func previousBuild(t *testing.T, file string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the previous release; skipped with -short")
	}
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), "git", args...)
		cmd.Dir = ".."
		out, err := cmd.Output()
		if err != nil {
			t.Skipf("builds the previous release from git, which needs a git checkout with its history (git %s: %v)", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(out))
	}
	if git("rev-parse", "--is-shallow-repository") == "true" {
		t.Skip("builds the previous release from git, which needs the full history: run git fetch --unshallow")
	}
	commit := "HEAD"
	if added := git("log", "-1", "--format=%H", "--diff-filter=A", "--", "storage/postgres/migrations/"+file); added != "" {
		commit = added + "^"
	}
	commit = git("rev-parse", commit)
	dir := t.TempDir()
	archive := exec.CommandContext(t.Context(), "sh", "-c", `git archive "$1" | tar -x -C "$2"`, "sh", commit, dir)
	archive.Dir = ".."
	out, err := archive.CombinedOutput()
	require.NoError(t, err, "git archive %s: %s", commit, out)
	bin := filepath.Join(dir, "rxgate-previous")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, ".")
	build.Dir = dir
	out, err = build.CombinedOutput()
	require.NoError(t, err, "building %s: %s", commit, out)
	t.Logf("the previous build is %.12s, the last before %s", commit, file)
	return bin
}

// schemaVersion is the newest migration applied to dbURL's schema.
func schemaVersion(t *testing.T, dbURL string) int {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dbURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var v int
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT max(version) FROM schema_migrations`).Scan(&v))
	return v
}
