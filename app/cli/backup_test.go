package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBackupAndRestoreCommands: rxgate backup downloads a verified backup
// from a running server; rxgate restore loads it into an empty directory,
// refuses a directory that is not empty, and a server started on the
// restored directory serves what the first one held.
func TestBackupAndRestoreCommands(t *testing.T) {
	first, _, stop := startSandbox(t, "--data-dir", filepath.Join(t.TempDir(), "a"))
	admin := map[string]string{"Authorization": "Bearer " + first.AdminAPIKey, "Content-Type": "application/json"}
	status, body := do(t, http.MethodPost, first.AdminURL+"/admin/v1/partners", admin, `{"name":"Written before the backup"}`)
	require.Equal(t, http.StatusCreated, status, body)
	var created struct {
		Data struct {
			PartnerID string `json:"partner_id"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &created))
	out := filepath.Join(t.TempDir(), "rx.rxb")
	t.Setenv("RXGATE_ADMIN__API_KEY", first.AdminAPIKey)
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, run(context.Background(), Backup, []string{"--admin-url", first.AdminURL, "--out", out}, &stdout, &stderr), stderr.String())
	require.Contains(t, stdout.String(), "backup written to "+out)
	require.Equal(t, 0, stop())
	t.Setenv("RXGATE_ADMIN__API_KEY", "")

	restored := filepath.Join(t.TempDir(), "b")
	stdout.Reset()
	stderr.Reset()
	require.Equal(t, 0, run(context.Background(), Restore, []string{"--in", out, "--data-dir", restored}, &stdout, &stderr), stderr.String())
	stderr.Reset()
	require.Equal(t, 1, run(context.Background(), Restore, []string{"--in", out, "--data-dir", restored}, io.Discard, &stderr))
	require.Contains(t, stderr.String(), "not empty")

	second, _, stop := startSandbox(t, "--data-dir", restored)
	defer stop()
	status, body = do(t, http.MethodGet, second.AdminURL+"/admin/v1/partners?limit=100",
		map[string]string{"Authorization": "Bearer " + second.AdminAPIKey}, "")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, created.Data.PartnerID, "the restored store holds what was written before the backup")
	status, body = do(t, http.MethodGet, second.BaseURL+"/v1/organizations/"+second.OrganizationID+"/validate",
		map[string]string{"Authorization": "Bearer " + second.Users[0].Token, "x-organization-secret": second.OrganizationSecret}, "")
	require.Equal(t, http.StatusOK, status, body)
}
