package testsuite_test

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage/backup"
	"github.com/rxgate/rxgate/testsuite"
)

// TestBackupEndpoint: GET /admin/v1/backup needs the operator key and
// answers a whole backup file that verifies.
func TestBackupEndpoint(t *testing.T) {
	t.Parallel()
	env := testsuite.Start(t)
	r := env.Do(t, testsuite.Request{URL: env.AdminPath("/admin/v1/backup")})
	require.Equal(t, http.StatusUnauthorized, r.Status)

	tn := env.NewTenant(t)
	r = env.Do(t, testsuite.Request{URL: env.AdminPath("/admin/v1/backup"), Token: env.AdminKey})
	if testsuite.OnPostgres() {
		require.Equal(t, http.StatusNotImplemented, r.Status, "%s", r.Body)
		require.Contains(t, r.String(t, "error.detail"), "pg_dump")
		return
	}
	require.Equal(t, http.StatusOK, r.Status)
	require.Equal(t, "application/octet-stream", r.Header.Get("Content-Type"))
	h, err := backup.Verify(bytes.NewReader(r.Body))
	require.NoError(t, err)
	require.Positive(t, h.Entries)
	require.True(t, bytes.Contains(r.Body, []byte(tn.OrgID)), "the backup holds what was written (the in-process store is not encrypted)")
}
