package cli

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// startSandbox runs `rxgate sandbox` in-process and returns its facts; the
// returned stop function cancels it (as Ctrl-C does) and returns the exit
// code.
func startSandbox(t testing.TB, extra ...string) (*SandboxFacts, string, func() int) {
	t.Helper()
	jsonPath := filepath.Join(t.TempDir(), "facts.json")
	ctx, cancel := context.WithCancel(context.Background())
	stdout, stderr := newSignalWriter(), newSignalWriter()
	args := append([]string{"--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--print-json", jsonPath}, extra...)
	done := make(chan int, 1)
	go func() { done <- run(ctx, Sandbox, args, stdout, stderr) }()
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
	var facts SandboxFacts
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
