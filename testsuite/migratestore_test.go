package testsuite_test

import (
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/config"
	"github.com/rxgate/rxgate/testsuite"
)

// TestMigrateStore: `rxgate migrate-store` copies a stopped Badger store
// into PostgreSQL, and a server on PostgreSQL then goes on where the
// Badger one stopped: the same secrets and tokens work, a cursor issued
// before the copy pages on after it, and a delivery that was pending is
// delivered.
func TestMigrateStore(t *testing.T) {
	testsuite.PostgresURL(t)
	if testsuite.OnPostgres() {
		t.Skip("moves a Badger store; runs in the badger pass")
	}
	bin := rxgateBinary(t)
	dir := filepath.Join(t.TempDir(), "data")
	var answer atomic.Int32
	answer.Store(http.StatusServiceUnavailable)
	hooks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(int(answer.Load())) }))
	t.Cleanup(hooks.Close)
	webhooks := func(c *config.Config) {
		c.Webhooks.AllowInsecureLoopback = true
		c.Webhooks.MaxAttempts = 10
		c.Webhooks.BackoffBase, c.Webhooks.BackoffMax = 2*time.Second, 2*time.Second
	}

	var (
		tn        *testsuite.Tenant
		token     string
		opKey     string // an operator key made on Badger
		revoked   string // and one revoked there
		cursor    string
		wantPage2 []string
		pending   string
	)
	listPage := func(t *testing.T, env *testsuite.Env, lastKey string) ([]string, string) {
		t.Helper()
		return prescriptionsAt(t, env, tn, token, 2, lastKey)
	}

	t.Run("on badger", func(t *testing.T) {
		env := testsuite.Start(t, testsuite.WithConfig(func(c *config.Config) {
			c.Storage.InMemory, c.Storage.Dir = false, dir
			webhooks(c)
		}))
		tn = env.NewTenant(t)
		validate(t, env, tn)
		registerEndpoint(t, env, tn.PartnerID, hooks.URL+"/hooks")
		for range 5 {
			prescribe(t, env, tn)
		}
		pending = eventOf(t, env, tn, prescribe(t, env, tn))["event_id"].(string)
		waitFor(t, env, pending, func(r *testsuite.Response) bool {
			attempts, _ := r.Get("data.attempts")
			list, _ := attempts.([]any)
			return len(list) > 0
		})
		token = tn.Token(t, testsuite.RolePrescriber)
		_, cursor = listPage(t, env, "")
		require.NotEmpty(t, cursor)
		wantPage2, _ = listPage(t, env, cursor)
		_, opKey = operatorKey(t, env, "partner:"+tn.PartnerID)
		var revokedID string
		revokedID, revoked = operatorKey(t, env, "viewer")
		env.MustAdmin(t, http.MethodPost, operatorKeysPath+"/"+revokedID+"/revoke", nil, http.StatusOK)
	}) // the Badger server stops here

	dbURL := testsuite.PostgresSchema(t)
	migrate := func() (string, error) {
		cmd := exec.Command(bin, "migrate-store", "--from-data-dir", dir, "--to-url", dbURL)
		cmd.Env = serveCommand(bin, "").Env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := migrate()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, out, "copied")
	assert.NotContains(t, out, dbURL, "the URL is not echoed")
	out, err = migrate()
	require.Error(t, err, "a second copy into the same database is refused")
	assert.Contains(t, out, "holds data already")
	cmd := exec.Command(bin, "migrate-store", "--from-data-dir", filepath.Join(t.TempDir(), "typo"), "--to-url", dbURL)
	cmd.Env = serveCommand(bin, "").Env
	typo, err := cmd.CombinedOutput()
	require.Error(t, err, "a directory without a store is refused, not copied as an empty one")
	assert.Contains(t, string(typo), "holds no rxgate store")

	env := testsuite.Start(t, testsuite.WithPostgres(dbURL), testsuite.WithConfig(webhooks))
	page2, _ := listPage(t, env, cursor)
	assert.Equal(t, wantPage2, page2, "a cursor issued by the Badger server pages on, with the token it issued and the same secrets")
	r := env.Do(t, testsuite.Request{URL: tn.ValidatePath(), Token: token, Headers: tn.Headers()})
	assert.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	r = env.Do(t, testsuite.Request{URL: env.AdminPath(tn.OrgPath()), Token: opKey})
	assert.Equal(t, http.StatusOK, r.Status, "an operator key made on Badger works on PostgreSQL: %s", r.Body)
	r = env.Do(t, testsuite.Request{URL: env.AdminPath("/admin/v1/overview"), Token: opKey})
	assert.Equal(t, http.StatusForbidden, r.Status, "with its role")
	r = env.Do(t, testsuite.Request{URL: env.AdminPath("/admin/v1/overview"), Token: revoked})
	assert.Equal(t, http.StatusUnauthorized, r.Status, "and a key revoked there stays revoked")
	answer.Store(http.StatusOK)
	waitFor(t, env, pending, hasStatus("delivered"))
}
