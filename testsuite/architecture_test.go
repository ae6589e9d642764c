package testsuite_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestImportsRunOneWay keeps the packages' imports running one way (the
// architecture in docs/architecture.md): main dispatches to the commands
// in app/cli, which wire app, queue and a storage backend; app and queue
// see storage's interfaces only; storage knows no other rxgate package but
// the backup format; the packages under storage know no HTTP layer, queue
// or configuration; config and the Badger store's journal know none at
// all. The test kits (testsuite and its subpackages) are imported by
// tests only, and the fakes, which app/auth's own tests import, know no
// rxgate package but config.
func TestImportsRunOneWay(t *testing.T) {
	t.Parallel()
	badgerPassOnly(t)
	const module = "github.com/rxgate/rxgate"
	tests := []struct {
		name      string
		pkgs      []string
		forbidden []string // import path prefixes none of pkgs may depend on
		allowed   []string // with forbidden module, the rxgate packages still allowed
	}{
		{name: "app and queue know no backend", pkgs: []string{"./app", "./app/auth", "./app/openapi", "./queue"},
			forbidden: []string{module + "/storage/", "github.com/dgraph-io/badger", "github.com/jackc/pgx"},
			// The backup file's format, which every backend writes.
			allowed: []string{module + "/storage/backup"}},
		{name: "the backup format knows no rxgate package", pkgs: []string{"./storage/backup"},
			forbidden: []string{module + "/"}, allowed: []string{module + "/storage/backup"}},
		{name: "queue knows no configuration and no HTTP layer", pkgs: []string{"./queue"},
			forbidden: []string{module + "/config", module + "/app"}},
		{name: "storage is the bottom: no other rxgate package, no backend", pkgs: []string{"./storage"},
			forbidden: []string{module + "/", "github.com/dgraph-io/badger", "github.com/jackc/pgx"}, allowed: []string{module + "/storage"}},
		{name: "storage knows none of its subpackages but the backup format", pkgs: []string{"./storage"},
			// The optional capabilities (storage.Backuper) name backup.Header.
			forbidden: []string{module + "/storage/"}, allowed: []string{module + "/storage/backup"}},
		{name: "storage's packages know no HTTP layer, queue, configuration or command", pkgs: []string{"./storage/..."},
			forbidden: []string{module + "/app", module + "/queue", module + "/config"}},
		{name: "housekeeping and demo data know no backend", pkgs: []string{"./storage/retention", "./storage/demo"},
			forbidden: []string{module + "/storage/badger", module + "/storage/postgres", "github.com/dgraph-io/badger", "github.com/jackc/pgx"}},
		{name: "a backend knows storage only", pkgs: []string{"./storage/badger", "./storage/postgres"},
			forbidden: []string{module + "/"}, allowed: []string{module + "/storage"}},
		{name: "the Badger journal knows no rxgate package, not even Badger", pkgs: []string{"./storage/badger/journal"},
			forbidden: []string{module + "/", "github.com/dgraph-io/badger"}, allowed: []string{module + "/storage/badger/journal"}},
		{name: "badger knows nothing of postgres", pkgs: []string{"./storage/badger"},
			forbidden: []string{module + "/storage/postgres", "github.com/jackc/pgx"}},
		{name: "postgres knows nothing of badger", pkgs: []string{"./storage/postgres"},
			forbidden: []string{module + "/storage/badger", "github.com/dgraph-io/badger"}},
		{name: "config knows no rxgate package", pkgs: []string{"./config"},
			forbidden: []string{module + "/"}, allowed: []string{module + "/config"}},
		{name: "the shared fakes know no rxgate package but config", pkgs: []string{"./testsuite/fake"},
			forbidden: []string{module + "/"}, allowed: []string{module + "/config", module + "/testsuite/fake"}},
		{name: "only tests import the test kits", pkgs: []string{".", "./app/...", "./queue/...", "./storage/...", "./config/..."},
			forbidden: []string{module + "/testsuite"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command("go", append([]string{"list", "-deps"}, tt.pkgs...)...)
			cmd.Dir = ".."
			out, err := cmd.Output()
			require.NoError(t, err, "go list -deps %v", tt.pkgs)
			deps := strings.Fields(string(out))
			require.NotEmpty(t, deps)
		next:
			for _, dep := range deps {
				for _, ok := range tt.allowed {
					if dep == ok || strings.HasPrefix(dep, ok+"/") {
						continue next
					}
				}
				for _, bad := range tt.forbidden {
					require.False(t, strings.HasPrefix(dep, bad), "%v depends on %s", tt.pkgs, dep)
				}
			}
		})
	}
}

// TestOnlyTheWiringPicksABackend: of the product's packages, only the
// command wiring (app/cli) imports a storage backend, and only the
// backends import their databases' drivers. The testsuite, which only
// tests import, runs on either backend.
func TestOnlyTheWiringPicksABackend(t *testing.T) {
	t.Parallel()
	badgerPassOnly(t)
	const module = "github.com/rxgate/rxgate"
	backends := map[string]bool{module + "/storage/badger": true, module + "/storage/postgres": true}
	drivers := []string{"github.com/dgraph-io/badger", "github.com/jackc/pgx"}
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./...")
	cmd.Dir = ".."
	out, err := cmd.Output()
	require.NoError(t, err, "go list ./...")
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	require.NotEmpty(t, lines)
	for _, line := range lines {
		fields := strings.Fields(line)
		pkg, imports := fields[0], fields[1:]
		if pkg == module+"/testsuite" || strings.HasPrefix(pkg, module+"/testsuite/") {
			continue
		}
		for _, imp := range imports {
			if backends[imp] {
				require.Equal(t, module+"/app/cli", pkg, "%s imports the backend %s: only the command wiring picks one", pkg, imp)
			}
			for _, d := range drivers {
				if strings.HasPrefix(imp, d) {
					require.True(t, backends[pkg], "%s imports the driver %s: only a backend may", pkg, imp)
				}
			}
		}
	}
}
