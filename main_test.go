package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/app"
	"github.com/rxgate/rxgate/config"
	"github.com/rxgate/rxgate/storage/postgres"
	"github.com/rxgate/rxgate/testsuite"
)

// signalWriter collects output and closes ready on the first write.
type signalWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	once  sync.Once
	ready chan struct{}
}

func newSignalWriter() *signalWriter { return &signalWriter{ready: make(chan struct{})} }

func (w *signalWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	n, err := w.buf.Write(p)
	w.mu.Unlock()
	w.once.Do(func() { close(w.ready) })
	return n, err
}

func (w *signalWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// startSandbox runs `rxgate sandbox` in-process and returns its facts; the
// returned stop function cancels it (as Ctrl-C does) and returns the exit
// code.
func startSandbox(t testing.TB, extra ...string) (*app.SandboxFacts, string, func() int) {
	t.Helper()
	jsonPath := filepath.Join(t.TempDir(), "facts.json")
	ctx, cancel := context.WithCancel(context.Background())
	stdout, stderr := newSignalWriter(), newSignalWriter()
	args := append([]string{"sandbox", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--print-json", jsonPath}, extra...)
	done := make(chan int, 1)
	go func() { done <- run(ctx, args, stdout, stderr) }()
	select {
	case <-stdout.ready:
	case code := <-done:
		cancel()
		t.Fatalf("sandbox exited with %d before printing: %s", code, stderr.String())
	}
	stop := sync.OnceValue(func() int { cancel(); return <-done })
	t.Cleanup(func() { stop() })
	b, err := os.ReadFile(jsonPath)
	require.NoError(t, err)
	var facts app.SandboxFacts
	require.NoError(t, json.Unmarshal(b, &facts))
	return &facts, stdout.String(), stop
}

func TestSandboxPrintsWorkingFacts(t *testing.T) {
	facts, out, stop := startSandbox(t)

	// Everything the issue asks to be printed is printed.
	for _, want := range []string{facts.BaseURL, facts.AdminURL, facts.AdminAPIKey, facts.PartnerID, facts.PartnerSecret,
		facts.OrganizationID, facts.OrganizationSecret} {
		assert.Contains(t, out, want)
	}
	require.Len(t, facts.Users, 5)
	roles := map[string]int{}
	for _, u := range facts.Users {
		roles[u.Role]++
		assert.Contains(t, out, u.UserID)
		assert.Contains(t, out, u.Token)
	}
	assert.Equal(t, map[string]int{"owner": 1, "admin": 1, "prescriber": 2, "member": 1}, roles)
	assert.True(t, strings.HasSuffix(facts.BaseURL, "/external"))

	// Every printed curl command works pasted alone: no shell variables,
	// and it succeeds.
	require.NotEmpty(t, facts.Curl)
	sawToken := false
	for _, c := range facts.Curl {
		t.Run(c.Title, func(t *testing.T) {
			assert.Contains(t, out, c.Command)
			assert.NotContains(t, c.Command, "$", "a pasted command must not depend on shell variables")
			status, body := runCurl(t, c.Command)
			assert.Less(t, status, 300, "%s\n%s", c.Command, body)
			assert.Contains(t, body, `"success":true`)
			if strings.Contains(c.Command, "/v1/token") {
				sawToken = true
			}
		})
	}
	assert.True(t, sawToken, "one command gets a token from /v1/token")

	// Each printed token carries every partner scope and works.
	for _, u := range facts.Users {
		status, body := do(t, http.MethodGet, facts.BaseURL+"/v1/organizations/"+facts.OrganizationID+"/validate",
			map[string]string{"Authorization": "Bearer " + u.Token, "x-organization-secret": facts.OrganizationSecret}, "")
		assert.Equal(t, http.StatusOK, status, body)
	}

	// The seeded patient has 60+ prescriptions across the three statuses.
	status, body := do(t, http.MethodGet, facts.AdminURL+"/admin/v1/organizations/"+facts.OrganizationID+"/users/"+facts.RxUserID+"/patients/"+facts.RxPatientID,
		map[string]string{"Authorization": "Bearer " + facts.AdminAPIKey}, "")
	assert.Equal(t, http.StatusOK, status, body)

	// Every seeded patient is printed and in the facts, and each one's
	// prescription count is what the partner list says.
	require.Len(t, facts.Patients, 6)
	require.Len(t, facts.PatientIDs, 6)
	prescriber := facts.Users[2].Token
	for i, p := range facts.Patients {
		assert.Equal(t, facts.PatientIDs[i], p.PatientID)
		assert.Contains(t, out, p.PatientID)
		assert.Contains(t, out, p.Name)
		status, body := do(t, http.MethodGet, facts.BaseURL+"/v1/organizations/"+facts.OrganizationID+"/users/"+p.UserID+"/patients/"+p.PatientID+"/prescriptions?limit=50",
			map[string]string{"Authorization": "Bearer " + prescriber, "x-organization-secret": facts.OrganizationSecret}, "")
		require.Equal(t, http.StatusOK, status, body)
		var page struct {
			Pagination struct {
				Count   int  `json:"count"`
				HasNext bool `json:"hasNext"`
			} `json:"pagination"`
		}
		require.NoError(t, json.Unmarshal([]byte(body), &page))
		if p.Prescriptions <= 50 {
			assert.Equal(t, p.Prescriptions, page.Pagination.Count, p.Name)
		} else {
			assert.True(t, page.Pagination.HasNext, p.Name)
		}
	}

	// The console link signs its first visitor in, once.
	assert.Contains(t, out, facts.ConsoleSignInURL)
	require.True(t, strings.HasPrefix(facts.ConsoleSignInURL, facts.AdminURL+"/console/sign-in/"), facts.ConsoleSignInURL)
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := noFollow.Get(facts.ConsoleSignInURL)
	require.NoError(t, err)
	first, _ := io.ReadAll(res.Body)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	assert.Contains(t, string(first), "<h1>Overview</h1>", "the link answers with the overview itself")
	require.Len(t, res.Cookies(), 1, "a session cookie")
	req, err := http.NewRequest(http.MethodGet, facts.AdminURL+"/console/", nil)
	require.NoError(t, err)
	req.AddCookie(res.Cookies()[0])
	page, err := noFollow.Do(req)
	require.NoError(t, err)
	pageBody, _ := io.ReadAll(page.Body)
	page.Body.Close()
	assert.Equal(t, http.StatusOK, page.StatusCode)
	assert.Contains(t, string(pageBody), "<h1>Overview</h1>")
	again, err := noFollow.Get(facts.ConsoleSignInURL)
	require.NoError(t, err)
	again.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, again.StatusCode, "the link works once")
	assert.Empty(t, again.Cookies())

	assert.Equal(t, 0, stop(), "Ctrl-C exits 0")
}

func TestSandboxDataDirKeepsData(t *testing.T) {
	dir := t.TempDir()
	first, _, stop := startSandbox(t, "--data-dir", dir)
	require.Equal(t, 0, stop())

	second, _, stop := startSandbox(t, "--data-dir", dir)
	defer stop()
	assert.NotEqual(t, first.OrganizationSecret, second.OrganizationSecret, "secrets are rotated so they can be shown again")
	status, body := do(t, http.MethodGet, second.BaseURL+"/v1/organizations/"+second.OrganizationID+"/validate",
		map[string]string{"Authorization": "Bearer " + second.Users[0].Token, "x-organization-secret": second.OrganizationSecret}, "")
	assert.Equal(t, http.StatusOK, status, body)
	status, _ = do(t, http.MethodGet, second.BaseURL+"/v1/organizations/"+second.OrganizationID+"/validate",
		map[string]string{"Authorization": "Bearer " + second.Users[0].Token, "x-organization-secret": first.OrganizationSecret}, "")
	assert.Equal(t, http.StatusUnauthorized, status, "the old secret stops working")
}

func TestRunCommandErrors(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		env      map[string]string
		code     int
		stderrRe []string
	}{
		{name: "no command", args: nil, code: 2, stderrRe: []string{"usage"}},
		{name: "unknown command", args: []string{"launch"}, code: 2, stderrRe: []string{`unknown command "launch"`}},
		{name: "serve without config", args: []string{"serve"}, code: 1, stderrRe: []string{"admin.api_key", "auth.jwks_url"}},
		{name: "unknown env key", args: []string{"serve"}, env: map[string]string{"RXGATE_HTTP__LISEN": "x"}, code: 1, stderrRe: []string{"http.lisen"}},
		{name: "bad env value", args: []string{"sandbox"}, env: map[string]string{"RXGATE_AUTH__LEEWAY": "soon"}, code: 1, stderrRe: []string{"auth.leeway"}},
		{name: "missing config file", args: []string{"serve", "--config", "/nonexistent/rxgate.yaml"}, code: 1, stderrRe: []string{"/nonexistent/rxgate.yaml"}},
		{name: "token without ids", args: []string{"token"}, code: 1, stderrRe: []string{"--organization"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tt.args, &stdout, &stderr)
			assert.Equal(t, tt.code, code, stderr.String())
			for _, want := range tt.stderrRe {
				assert.Contains(t, stderr.String(), want)
			}
		})
	}
}

// TestTuneProcs: serving from Badger on disk adds syncProcs to Go's
// default GOMAXPROCS, however often it runs; an operator's GOMAXPROCS, a
// PostgreSQL store and an in-memory one keep what they have.
func TestTuneProcs(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(before) })
	runtime.SetDefaultGOMAXPROCS()
	def := runtime.GOMAXPROCS(0)
	store := func(driver string, inMemory bool) *config.Config {
		cfg := config.Defaults()
		cfg.Storage.Driver, cfg.Storage.InMemory = driver, inMemory
		return cfg
	}
	tests := []struct {
		name   string
		cfg    *config.Config
		envSet bool
		want   int
	}{
		{"badger on disk", store(config.DriverBadger, false), false, def + syncProcs},
		{"badger on disk again", store(config.DriverBadger, false), false, def + syncProcs},
		{"GOMAXPROCS set", store(config.DriverBadger, false), true, 7},
		{"postgres", store(config.DriverPostgres, false), false, 7},
		{"in memory", store(config.DriverBadger, true), false, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.want == 7 {
				runtime.GOMAXPROCS(7)
			}
			tuneProcs(tt.cfg, tt.envSet)
			assert.Equal(t, tt.want, runtime.GOMAXPROCS(0))
		})
	}
}

func TestVersionAndTokenCommands(t *testing.T) {
	var out bytes.Buffer
	require.Equal(t, 0, run(context.Background(), []string{"version"}, &out, io.Discard))
	assert.Equal(t, "rxgate dev\n", out.String())

	facts, _, stop := startSandbox(t)
	defer stop()
	t.Setenv("RXGATE_ADMIN__API_KEY", facts.AdminAPIKey)
	out.Reset()
	var errOut bytes.Buffer
	code := run(context.Background(), []string{"token", "--admin-url", facts.AdminURL, "--organization", facts.OrganizationID,
		"--user", facts.Users[2].UserID, "--scope", "read:patient_prescription", "--ttl", "10m"}, &out, &errOut)
	require.Equal(t, 0, code, errOut.String())
	tok := strings.TrimSpace(out.String())
	status, body := do(t, http.MethodGet, facts.BaseURL+"/v1/organizations/"+facts.OrganizationID+"/validate",
		map[string]string{"Authorization": "Bearer " + tok, "x-organization-secret": facts.OrganizationSecret}, "")
	assert.Equal(t, http.StatusOK, status, body)
}

// TestServeSubprocessSurvivesKill builds the real binary, writes data
// through it, kills it with SIGKILL, restarts it on the same data
// directory and reads everything back; then SIGTERM stops it with exit 0.
func TestServeSubprocessSurvivesKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary; skipped with -short")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "rxgate")
	build := exec.Command("go", "build", "-o", bin, ".")
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

func do(t testing.TB, method, url string, headers map[string]string, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func jsonPath(t testing.TB, body string, path ...string) string {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal([]byte(body), &v))
	for _, p := range path {
		m, ok := v.(map[string]any)
		require.True(t, ok, "no %s in %s", p, body)
		v = m[p]
	}
	s, ok := v.(string)
	require.True(t, ok, "%v is not a string in %s", path, body)
	return s
}

// runCurl executes a printed curl command: with the real curl through a
// shell when the machine has both, otherwise by interpreting its -X, -H and
// -d options and single-quoted words.
func runCurl(t testing.TB, command string) (int, string) {
	t.Helper()
	words, err := shellWords(command)
	require.NoError(t, err)
	require.Equal(t, "curl", words[0])
	if _, err := exec.LookPath("curl"); err == nil {
		out, err := exec.Command("bash", "-c", command+" -w '\n%{http_code}'").Output()
		require.NoError(t, err, command)
		s := strings.TrimRight(string(out), "\n")
		i := strings.LastIndexByte(s, '\n')
		var status int
		_, _ = jsonNumber(s[i+1:], &status)
		return status, s[:i]
	}
	method, url, body := http.MethodGet, "", ""
	headers := map[string]string{}
	for i := 1; i < len(words); i++ {
		switch words[i] {
		case "-s":
		case "-X":
			i++
			method = words[i]
		case "-H":
			i++
			k, v, _ := strings.Cut(words[i], ":")
			headers[k] = strings.TrimSpace(v)
		case "-d":
			i++
			body = words[i]
			if method == http.MethodGet {
				method = http.MethodPost
			}
		default:
			url = words[i]
		}
	}
	return do(t, method, url, headers, body)
}

func jsonNumber(s string, v *int) (int, error) {
	return 0, json.Unmarshal([]byte(strings.TrimSpace(s)), v)
}

// shellWords splits a command the way a POSIX shell splits plain words and
// single-quoted strings (all a printed command uses).
func shellWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord, inQuote := false, false
	for _, r := range s {
		switch {
		case inQuote && r == '\'':
			inQuote = false
		case inQuote:
			cur.WriteRune(r)
		case r == '\'':
			inQuote, inWord = true, true
		case r == ' ' || r == '\t' || r == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case r == '"' || r == '$' || r == '`' || r == '\\':
			return nil, errors.New("unexpected shell metacharacter " + string(r))
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inQuote {
		return nil, errors.New("unterminated quote")
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// TestEncryptionCommands: keygen writes a key only its owner may read and
// never overwrites one; a store made with the key does not open without
// it, with another key, or with a key file others may read, each with one
// line naming the setting; rotate-key moves the store to a new key.
func TestEncryptionCommands(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	keys := t.TempDir()
	keyA, keyB := filepath.Join(keys, "a.key"), filepath.Join(keys, "b.key")
	for _, f := range []string{keyA, keyB} {
		var stderr bytes.Buffer
		require.Equal(t, 0, run(context.Background(), []string{"keygen", "--out", f}, io.Discard, &stderr), stderr.String())
		info, err := os.Stat(f)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), info.Mode().Perm())
		_, err = config.ReadKeyFile("k", f)
		require.NoError(t, err)
	}
	before, err := os.ReadFile(keyA)
	require.NoError(t, err)
	var stderr bytes.Buffer
	require.Equal(t, 1, run(context.Background(), []string{"keygen", "--out", keyA}, io.Discard, &stderr))
	require.Contains(t, stderr.String(), "exists")
	after, err := os.ReadFile(keyA)
	require.NoError(t, err)
	require.Equal(t, before, after, "keygen never overwrites a key")

	// sandbox runs the same wiring as serve, and needs no config file.
	sandboxWith := func(keyFile string) (int, string) {
		t.Setenv("RXGATE_STORAGE__ENCRYPTION_KEY_FILE", keyFile)
		var stderr bytes.Buffer
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan int, 1)
		stdout := newSignalWriter()
		go func() {
			done <- run(ctx, []string{"sandbox", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--data-dir", dir}, stdout, &stderr)
		}()
		select {
		case <-stdout.ready:
			cancel()
			return <-done, ""
		case code := <-done:
			return code, stderr.String()
		}
	}
	code, out := sandboxWith(keyA)
	require.Equal(t, 0, code, out)
	code, out = sandboxWith("")
	require.Equal(t, 1, code)
	require.Contains(t, out, "the store is encrypted")
	code, out = sandboxWith(keyB)
	require.Equal(t, 1, code)
	require.Contains(t, out, "does not hold the key")
	require.NoError(t, os.Chmod(keyA, 0o640))
	code, out = sandboxWith(keyA)
	require.Equal(t, 1, code)
	require.Contains(t, out, "storage.encryption_key_file")
	require.Contains(t, out, keyA)
	require.Contains(t, out, "chmod 600")
	require.NoError(t, os.Chmod(keyA, 0o600))

	stderr.Reset()
	var stdout bytes.Buffer
	require.Equal(t, 0, run(context.Background(), []string{"rotate-key", "--data-dir", dir, "--old-key-file", keyA, "--new-key-file", keyB}, &stdout, &stderr), stderr.String())
	code, out = sandboxWith(keyA)
	require.Equal(t, 1, code)
	require.Contains(t, out, "does not hold the key")
	code, out = sandboxWith(keyB)
	require.Equal(t, 0, code, out)
}

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
	require.Equal(t, 0, run(context.Background(), []string{"backup", "--admin-url", first.AdminURL, "--out", out}, &stdout, &stderr), stderr.String())
	require.Contains(t, stdout.String(), "backup written to "+out)
	require.Equal(t, 0, stop())
	t.Setenv("RXGATE_ADMIN__API_KEY", "")

	restored := filepath.Join(t.TempDir(), "b")
	stdout.Reset()
	stderr.Reset()
	require.Equal(t, 0, run(context.Background(), []string{"restore", "--in", out, "--data-dir", restored}, &stdout, &stderr), stderr.String())
	stderr.Reset()
	require.Equal(t, 1, run(context.Background(), []string{"restore", "--in", out, "--data-dir", restored}, io.Discard, &stderr))
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

// TestMigrateTwiceAtOnce: two `rxgate migrate` runs started together (two
// replicas rolling out) both succeed and apply each migration once.
func TestMigrateTwiceAtOnce(t *testing.T) {
	url := testsuite.PostgresSchema(t)
	t.Setenv("RXGATE_STORAGE__DRIVER", "postgres")
	t.Setenv("RXGATE_STORAGE__POSTGRES__URL", url)
	var wg sync.WaitGroup
	codes, outs := make([]int, 2), make([]string, 2)
	for i := range codes {
		wg.Go(func() {
			var stdout, stderr bytes.Buffer
			// migrateCmd, not run: run sets the process's version, once
			// per process; two replicas are two processes.
			if err := migrateCmd(context.Background(), nil, &stdout, &stderr); err != nil {
				codes[i] = 1
				stderr.WriteString(err.Error())
			}
			outs[i] = stdout.String() + stderr.String()
		})
	}
	wg.Wait()
	for i := range codes {
		require.Equal(t, 0, codes[i], outs[i])
		assert.Contains(t, outs[i], "schema is at version")
		assert.NotContains(t, outs[i], url, "the URL is not echoed")
	}
	conn, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var n, newest int
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT count(*), max(version) FROM schema_migrations`).Scan(&n, &newest))
	assert.Equal(t, postgres.SchemaVersion(), newest)
	assert.Equal(t, newest, n, "each migration applied once")
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
	code := run(context.Background(), []string{"serve"}, &stdout, &stderr)
	assert.Equal(t, 1, code)
	assert.Less(t, time.Since(start), time.Minute, "the wait is bounded")
	assert.Contains(t, stderr.String(), "no database answered within 1s")
	assert.NotContains(t, stderr.String(), "hunter2-secret")
}
