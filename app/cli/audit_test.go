package cli

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAuditVerifyCommand runs a server with an audit key file (created at
// start, mode 0600), makes partner and operator requests, and verifies
// the trail with the command: whole with the key file or its public key;
// refused (exit 1) against another key. The command's tamper findings are
// storage.VerifyAudit's, tested on stored entries of both backends
// (storage/badger and storage/postgres audit tests).
func TestAuditVerifyCommand(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "audit.key")
	t.Setenv("RXGATE_AUDIT__KEY_FILE", keyFile)
	t.Setenv("RXGATE_AUDIT__CHECKPOINT_EVERY", "2")
	facts, _, stop := startSandbox(t)
	defer stop()
	t.Setenv("RXGATE_ADMIN__API_KEY", facts.AdminAPIKey)
	info, err := os.Stat(keyFile)
	require.NoError(t, err, "the key file is created at start")
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())

	for range 3 {
		status, body := do(t, http.MethodGet, facts.AdminURL+"/admin/v1/organizations", map[string]string{"Authorization": "Bearer " + facts.AdminAPIKey}, "")
		require.Equal(t, http.StatusOK, status, body)
	}
	verify := func(t *testing.T, args ...string) (string, string, int) {
		t.Helper()
		var out, errOut bytes.Buffer
		code := run(context.Background(), Audit, append([]string{"verify", "--admin-url", facts.AdminURL}, args...), &out, &errOut)
		return out.String(), errOut.String(), code
	}
	out, errOut, code := verify(t, "--key-file", keyFile)
	require.Equal(t, 0, code, out+errOut)
	assert.Contains(t, out, "audit trail whole")

	other, _, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	out, errOut, code = verify(t, "--public-key", base64.StdEncoding.EncodeToString(other))
	assert.Equal(t, 1, code, out+errOut)
	assert.Contains(t, out, "not signed by the audit key")

	out, errOut, code = verify(t)
	assert.Equal(t, 0, code, out+errOut)
	assert.Contains(t, errOut, "pin it", "the server's own key is used with a warning")

	_, errOut, code = verify(t, "--public-key", "nonsense")
	assert.Equal(t, 1, code)
	assert.True(t, strings.Contains(errOut, "public-key"), errOut)
}
