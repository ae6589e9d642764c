package testsuite_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestImportsRunOneWay keeps the packages' imports running one way (the
// README's Architecture section): main wires app, queue and a storage
// backend; app and queue see storage's interfaces only; storage knows no
// other rxgate package; config and the Badger store's journal know none at
// all.
func TestImportsRunOneWay(t *testing.T) {
	t.Parallel()
	const module = "github.com/rxgate/rxgate"
	tests := []struct {
		name      string
		pkgs      []string
		forbidden []string // import path prefixes none of pkgs may depend on
		allowed   []string // with forbidden module, the rxgate packages still allowed
	}{
		{name: "app and queue know no backend", pkgs: []string{"./app", "./queue"},
			forbidden: []string{module + "/storage/", "github.com/dgraph-io/badger", "github.com/jackc/pgx"},
			// The backup file's format, which every backend writes.
			allowed: []string{module + "/storage/backup"}},
		{name: "the backup format knows no rxgate package", pkgs: []string{"./storage/backup"},
			forbidden: []string{module + "/"}, allowed: []string{module + "/storage/backup"}},
		{name: "queue knows no configuration and no HTTP layer", pkgs: []string{"./queue"},
			forbidden: []string{module + "/config", module + "/app"}},
		{name: "storage is the bottom: no other rxgate package, no backend", pkgs: []string{"./storage"},
			forbidden: []string{module + "/", "github.com/dgraph-io/badger", "github.com/jackc/pgx"}, allowed: []string{module + "/storage"}},
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
