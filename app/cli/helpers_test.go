package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// run runs cmd as main runs a command: its error printed to stderr after
// "rxgate: ", the exit code returned (0 after -h).
func run(ctx context.Context, cmd func(context.Context, Env, []string) error, args []string, stdout, stderr io.Writer) int {
	err := cmd(ctx, Env{Stdout: stdout, Stderr: stderr, Version: "dev"}, args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case err != nil:
		fmt.Fprintln(stderr, "rxgate:", err)
		return 1
	}
	return 0
}

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
