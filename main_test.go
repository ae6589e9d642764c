package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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

// TestUsageIsTheTable: the usage text lists every command of the table,
// once, in its order, with its summary; help prints it on stdout, and
// version and its aliases print the version.
func TestUsageIsTheTable(t *testing.T) {
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, run(context.Background(), []string{"help"}, &stdout, &stderr))
	lines := strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")
	require.Equal(t, []string{"usage: rxgate <command> [flags]", "", "commands:"}, lines[:3])
	require.Len(t, lines[3:], len(commands))
	seen := map[string]bool{}
	for i, c := range commands {
		require.False(t, seen[c.name], "%s is in the table twice", c.name)
		seen[c.name] = true
		require.NotNil(t, c.run, c.name)
		fields := strings.Fields(lines[3+i])
		assert.Equal(t, c.name, fields[0])
		assert.Equal(t, c.summary, strings.Join(fields[1:], " "))
	}
	for _, name := range []string{"version", "--version", "-v"} {
		stdout.Reset()
		require.Equal(t, 0, run(context.Background(), []string{name}, &stdout, &stderr), name)
		assert.Equal(t, "rxgate dev\n", stdout.String(), name)
	}
}
