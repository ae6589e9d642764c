package cli

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOperatorKeyCommand creates a partner key with the command, uses it,
// lists it without its secret, revokes it and sees it refused.
func TestOperatorKeyCommand(t *testing.T) {
	facts, _, stop := startSandbox(t)
	defer stop()
	t.Setenv("RXGATE_ADMIN__API_KEY", facts.AdminAPIKey)
	cmd := func(t *testing.T, args ...string) (string, string, int) {
		t.Helper()
		var out, errOut bytes.Buffer
		code := run(context.Background(), OperatorKey, append(args[:1:1], append([]string{"--admin-url", facts.AdminURL}, args[1:]...)...), &out, &errOut)
		return out.String(), errOut.String(), code
	}

	out, errOut, code := cmd(t, "create", "--name", "acme desk", "--role", "partner:"+facts.PartnerID)
	require.Equal(t, 0, code, errOut)
	key := strings.TrimSpace(out)
	require.True(t, strings.HasPrefix(key, "rxk_"), out)
	assert.Contains(t, errOut, "shown this once")
	id := strings.SplitN(strings.TrimPrefix(key, "rxk_"), "_", 2)[0]

	status, body := do(t, http.MethodGet, facts.AdminURL+"/admin/v1/organizations", map[string]string{"Authorization": "Bearer " + key}, "")
	assert.Equal(t, http.StatusOK, status, body)
	assert.Contains(t, body, facts.OrganizationID)
	status, _ = do(t, http.MethodGet, facts.AdminURL+"/admin/v1/backup", map[string]string{"Authorization": "Bearer " + key}, "")
	assert.Equal(t, http.StatusForbidden, status, "a partner key may not download backups")

	out, errOut, code = cmd(t, "list")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, id)
	assert.Contains(t, out, "acme desk")
	assert.NotContains(t, out, key[len(key)-20:], "list shows no key")

	_, errOut, code = cmd(t, "create", "--name", "acme desk", "--role", "viewer")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "HTTP 409")
	_, errOut, code = cmd(t, "create", "--name", "x")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "--role")

	out, errOut, code = cmd(t, "revoke", id)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "revoked "+id)
	status, _ = do(t, http.MethodGet, facts.AdminURL+"/admin/v1/organizations", map[string]string{"Authorization": "Bearer " + key}, "")
	assert.Equal(t, http.StatusUnauthorized, status, "a revoked key is refused")

	_, errOut, code = cmd(t, "rename")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "usage")
}
