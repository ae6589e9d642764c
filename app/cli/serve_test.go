package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestServeSubprocessSurvivesKill builds the real binary, writes data
// through it, kills it with SIGKILL, restarts it on the same data
// directory and reads everything back; then SIGTERM stops it with exit 0.
func TestServeSubprocessSurvivesKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary; skipped with -short")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "rxgate")
	build := exec.Command("go", "build", "-o", bin, "github.com/rxgate/rxgate")
	build.Stderr = os.Stderr
	require.NoError(t, build.Run())

	cfgPath := filepath.Join(dir, "rxgate.yaml")
	key := "subprocess-test-key-0123456789"
	require.NoError(t, os.WriteFile(cfgPath, []byte(`
http:
  listen: 127.0.0.1:0
admin:
  listen: 127.0.0.1:0
  api_key: `+key+`
storage:
  dir: `+filepath.Join(dir, "data")+`
auth:
  builtin_issuer: true
`), 0o600))

	proc, _, admin := startServe(t, bin, cfgPath)
	adminHdr := map[string]string{"Authorization": "Bearer " + key, "Content-Type": "application/json"}
	status, body := do(t, http.MethodPost, admin+"/admin/v1/partners", adminHdr, `{"name":"Kill Test Partner"}`)
	require.Equal(t, http.StatusCreated, status, body)
	partnerID := jsonPath(t, body, "data", "partner_id")
	status, body = do(t, http.MethodPost, admin+"/admin/v1/organizations", adminHdr, `{"name":"Kill Test Clinic","partner_id":"`+partnerID+`"}`)
	require.Equal(t, http.StatusCreated, status, body)
	orgID, orgSecret := jsonPath(t, body, "data", "organization_id"), jsonPath(t, body, "data", "organization_secret")
	status, body = do(t, http.MethodPost, admin+"/admin/v1/organizations/"+orgID+"/users", adminHdr,
		`{"email":"gp@clinic.example","given_name":"Ada","family_name":"Lovelace","title":"Dr","role":"prescriber"}`)
	require.Equal(t, http.StatusCreated, status, body)
	userID := jsonPath(t, body, "data", "user_id")
	status, body = do(t, http.MethodPost, admin+"/admin/v1/organizations/"+orgID+"/users/"+userID+"/patients", adminHdr,
		`{"given_name":"Noah","family_name":"Smith","date_of_birth":"1990-04-01","sex":"M"}`)
	require.Equal(t, http.StatusCreated, status, body)
	patientID := jsonPath(t, body, "data", "patient_id")
	status, body = do(t, http.MethodPost, admin+"/admin/v1/tokens", adminHdr, `{"organization_id":"`+orgID+`","user_id":"`+userID+`","ttl_seconds":3600}`)
	require.Equal(t, http.StatusCreated, status, body)
	token := jsonPath(t, body, "data", "access_token")

	require.NoError(t, proc.Process.Signal(syscall.SIGKILL))
	_ = proc.Wait()

	proc, base, admin := startServe(t, bin, cfgPath)
	status, body = do(t, http.MethodGet, admin+"/admin/v1/organizations/"+orgID+"/users/"+userID+"/patients/"+patientID, adminHdr, "")
	require.Equal(t, http.StatusOK, status, body)
	assert.Equal(t, "Noah", jsonPath(t, body, "data", "given_name"))
	// The signing key survived too: a token minted before the crash works.
	status, body = do(t, http.MethodGet, base+"/v1/organizations/"+orgID+"/validate",
		map[string]string{"Authorization": "Bearer " + token, "x-organization-secret": orgSecret}, "")
	assert.Equal(t, http.StatusOK, status, body)

	require.NoError(t, proc.Process.Signal(syscall.SIGTERM))
	err := proc.Wait()
	assert.NoError(t, err, "SIGTERM drains and exits 0")
}

// startServe starts the binary and reads the partner and operator URLs from
// its start-up log line.
func startServe(t testing.TB, bin, cfgPath string) (*exec.Cmd, string, string) {
	t.Helper()
	cmd := exec.Command(bin, "serve", "--config", cfgPath)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		var line struct {
			Msg      string `json:"msg"`
			BaseURL  string `json:"base_url"`
			AdminURL string `json:"admin_url"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "rxgate serving" {
			go func() { _, _ = io.Copy(io.Discard, stderr) }()
			return cmd, line.BaseURL, line.AdminURL
		}
	}
	t.Fatalf("rxgate serve exited before serving: %v", sc.Err())
	return nil, "", ""
}

// TestDatabaseDownAtStart: serve with no database answering waits
// storage.postgres.connect_timeout, then exits non-zero with one clear
// line that does not quote the URL's password.
func TestDatabaseDownAtStart(t *testing.T) {
	t.Setenv("RXGATE_STORAGE__DRIVER", "postgres")
	t.Setenv("RXGATE_STORAGE__POSTGRES__URL", "postgres://rxgate:hunter2-secret@127.0.0.1:1/rxgate")
	t.Setenv("RXGATE_STORAGE__POSTGRES__CONNECT_TIMEOUT", "1s")
	t.Setenv("RXGATE_ADMIN__API_KEY", "test-"+strings.Repeat("k", 32))
	t.Setenv("RXGATE_AUTH__BUILTIN_ISSUER", "true")
	t.Setenv("RXGATE_HTTP__LISTEN", "127.0.0.1:0")
	t.Setenv("RXGATE_ADMIN__LISTEN", "127.0.0.1:0")
	var stdout, stderr bytes.Buffer
	start := time.Now()
	code := run(context.Background(), Serve, nil, &stdout, &stderr)
	assert.Equal(t, 1, code)
	assert.Less(t, time.Since(start), time.Minute, "the wait is bounded")
	assert.Contains(t, stderr.String(), "no database answered within 1s")
	assert.NotContains(t, stderr.String(), "hunter2-secret")
}
