package testsuite_test

import (
	"bufio"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/queue/signature"
)

// listenProcess is a running `rxgate listen`.
type listenProcess struct {
	cmd   *exec.Cmd
	URL   string
	lines chan string
}

func startListen(t testing.TB, bin string, args ...string) *listenProcess {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"listen"}, args...)...)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	p := &listenProcess{cmd: cmd, lines: make(chan string, 1000)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	first := p.waitLine(t, "receiving webhooks at ")
	_, rest, _ := strings.Cut(first, "receiving webhooks at ")
	p.URL, _, _ = strings.Cut(rest, " ")
	return p
}

// waitLine returns the next output line containing s.
func (p *listenProcess) waitLine(t testing.TB, s string) string {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case line, ok := <-p.lines:
			require.True(t, ok, "rxgate listen exited before printing %q", s)
			if strings.Contains(line, s) {
				return line
			}
		case <-timeout:
			t.Fatalf("rxgate listen did not print %q within 20s", s)
		}
	}
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	return port
}

// TestListenCommand runs `rxgate listen` as a partner would: it verifies
// each delivery, answers 200 or 400, and prints the event; a server's real
// deliveries verify.
func TestListenCommand(t *testing.T) {
	t.Parallel()
	bin := rxgateBinary(t)

	t.Run("answers 200 or 400", func(t *testing.T) {
		t.Parallel()
		p := startListen(t, bin, "--port", "0", "--secret", "old-secret", "--secret", "new-secret")
		assert.True(t, strings.HasPrefix(p.URL, "http://127.0.0.1:"), p.URL)
		body := `{"event_type":"prescription.created","event_id":"ev-1"}`
		send := func(header string) int {
			req, err := http.NewRequest(http.MethodPost, p.URL, strings.NewReader(body))
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Webhook-Id", "ev-1")
			req.Header.Set(signature.HeaderName, header)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			return resp.StatusCode
		}
		assert.Equal(t, 200, send(signature.Header(time.Now(), []byte(body), "new-secret")))
		line := p.waitLine(t, "event_id=ev-1")
		assert.Contains(t, line, "200  prescription.created")
		assert.Contains(t, line, "signature ok")
		p.waitLine(t, `"event_type": "prescription.created"`)

		assert.Equal(t, 200, send(signature.Header(time.Now(), []byte(body), "old-secret")), "either secret of a rotation verifies")
		assert.Equal(t, 400, send(signature.Header(time.Now(), []byte(body), "wrong")))
		assert.Contains(t, p.waitLine(t, "rejected"), "no signature matches")
		assert.Equal(t, 400, send(signature.Header(time.Now().Add(-10*time.Minute), []byte(body), "new-secret")))
		assert.Contains(t, p.waitLine(t, "rejected"), "300 seconds")

		resp, err := http.Get(strings.TrimSuffix(p.URL, "/") + "/other")
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusNotFound, resp.StatusCode, "deliveries are accepted at / only")

		require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
		assert.NoError(t, p.cmd.Wait(), "Ctrl-C exits 0")
	})

	t.Run("receives a server's deliveries", func(t *testing.T) {
		t.Parallel()
		env := startWebhooks(t)
		tn := env.NewTenant(t)
		port := freePort(t)
		_, secret := registerEndpoint(t, env, tn.PartnerID, "http://127.0.0.1:"+strconv.Itoa(port)+"/")
		p := startListen(t, bin, "--port", strconv.Itoa(port), "--secret", secret)
		validate(t, env, tn)
		scid := prescribe(t, env, tn)
		line := p.waitLine(t, "prescription.created")
		assert.Contains(t, line, "signature ok")
		p.waitLine(t, scid)
	})

	t.Run("explains a rejection", func(t *testing.T) {
		t.Parallel()
		p := startListen(t, bin, "--port", "0", "--secret", "the-secret", "--explain")
		body := `{"event_type":"prescription.created","event_id":"ev-2"}`
		send := func(header, body string) int {
			req, err := http.NewRequest(http.MethodPost, p.URL, strings.NewReader(body))
			require.NoError(t, err)
			req.Header.Set(signature.HeaderName, header)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			return resp.StatusCode
		}
		// What a framework that adds a final newline passes on.
		assert.Equal(t, 400, send(signature.Header(time.Now(), []byte(body), "the-secret"), body+"\n"))
		p.waitLine(t, "rejected")
		assert.Contains(t, p.waitLine(t, "why:"), "[body_differs (trailing_newline)]")
		// A clock 10 minutes off.
		assert.Equal(t, 400, send(signature.Header(time.Now().Add(10*time.Minute), []byte(body), "the-secret"), body))
		p.waitLine(t, "rejected")
		assert.Contains(t, p.waitLine(t, "why:"), "[timestamp_outside_tolerance]")
	})

	t.Run("needs a secret", func(t *testing.T) {
		t.Parallel()
		out, err := exec.Command(bin, "listen", "--port", "0").CombinedOutput()
		require.Error(t, err)
		assert.Contains(t, string(out), "--secret is required")
	})
}
