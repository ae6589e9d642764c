package testsuite_test

import (
	"crypto/ed25519"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/config"
	"github.com/rxgate/rxgate/storage"
	"github.com/rxgate/rxgate/storage/badger"
	"github.com/rxgate/rxgate/storage/postgres"
	"github.com/rxgate/rxgate/testsuite"
)

// TestMigrateStore: `rxgate migrate-store` copies a stopped Badger store
// into PostgreSQL, and a server on PostgreSQL then goes on where the
// Badger one stopped: the same secrets and tokens work, a cursor issued
// before the copy pages on after it, and a delivery that was pending is
// delivered; the audit trail (entries, checkpoints, the start marker a
// purge left, the head) is copied and verifies on PostgreSQL.
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
	auditKey := seedAuditTrail(t, dir)

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
	checkAuditCopied(t, dir, dbURL, auditKey)
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

// seedAuditTrail appends audit entries to the stopped Badger store in dir
// after whatever it holds, signs checkpoints with a new key, and purges
// the first entries behind a signed start marker, as retention does. It
// returns the key's public half.
func seedAuditTrail(t *testing.T, dir string) ed25519.PublicKey {
	t.Helper()
	ctx := t.Context()
	s, err := badger.Open(badger.Options{Dir: dir})
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	pub, key, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	at := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	var entries []storage.AuditEntry
	for i := range 7 {
		e := []storage.AuditEntry{{Time: at.Add(time.Duration(i) * time.Second), ActorKind: storage.AuditActorPartner,
			PartnerID: "pa", OrgID: "or", UserID: "us", Operation: "prescriptions.list", PatientID: "pt", RequestID: "rq", Outcome: 200}}
		require.NoError(t, s.AppendAudit(ctx, e))
		entries = append(entries, e...)
	}
	first := entries[0].Seq
	cut := entries[2]
	_, err = s.PurgeAudit(ctx, cut.Seq, storage.SignAuditCheckpoint(key, cut.Seq-1, cut.PrevHash, true, at))
	require.NoError(t, err)
	last := entries[len(entries)-1]
	require.NoError(t, s.AddAuditCheckpoint(ctx, storage.SignAuditCheckpoint(key, entries[4].Seq, entries[4].Hash, false, at)))
	require.NoError(t, s.AddAuditCheckpoint(ctx, storage.SignAuditCheckpoint(key, last.Seq, last.Hash, false, at)))
	got, _, err := s.ListAudit(ctx, storage.AuditFilter{}, storage.PageRequest{Limit: 1000})
	require.NoError(t, err)
	require.NotEmpty(t, got)
	require.Greater(t, got[0].Seq, first, "the purge removed the first entries")
	return pub
}

// checkAuditCopied compares the audit trail of the Badger store in dir
// with the one copied into PostgreSQL at dbURL: the same entries,
// checkpoints and head, and the copy verifies against pub.
func checkAuditCopied(t *testing.T, dir, dbURL string, pub ed25519.PublicKey) {
	t.Helper()
	ctx := t.Context()
	read := func(s storage.AuditLog) ([]storage.AuditEntry, []storage.AuditCheckpoint, uint64, []byte) {
		entries, _, err := s.ListAudit(ctx, storage.AuditFilter{}, storage.PageRequest{Limit: 1000})
		require.NoError(t, err)
		cps, err := s.ListAuditCheckpoints(ctx)
		require.NoError(t, err)
		seq, hash, err := s.AuditHead(ctx)
		require.NoError(t, err)
		return entries, cps, seq, hash
	}
	src, err := badger.Open(badger.Options{Dir: dir})
	require.NoError(t, err)
	wantEntries, wantCps, wantSeq, wantHash := read(src)
	require.NoError(t, src.Close())
	dst, err := postgres.Open(ctx, postgres.Options{URL: dbURL})
	require.NoError(t, err)
	defer dst.Close()
	entries, cps, seq, hash := read(dst)
	assert.Empty(t, storage.VerifyAudit(entries, cps, pub), "the copied trail verifies")
	require.Len(t, entries, len(wantEntries))
	for i := range entries {
		assert.Empty(t, cmp.Diff(wantEntries[i], entries[i], cmpopts.EquateEmpty()), "entry %d", i)
	}
	assert.Empty(t, cmp.Diff(wantCps, cps, cmpopts.EquateEmpty()), "checkpoints and the start marker")
	assert.Equal(t, wantSeq, seq, "the head")
	assert.Equal(t, wantHash, hash)
}
