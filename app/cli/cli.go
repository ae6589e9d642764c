// Package cli is rxgate's commands, one file each: serve, sandbox, token,
// operator-key, listen, backup, restore, keygen, rotate-key, migrate,
// migrate-store and version. main holds the table that names them; each command here parses
// its own flags and returns an error, which main prints and turns into the
// exit code (flag.ErrHelp, after -h, is a success).
//
// This is the command wiring, the one place that picks a storage backend
// (storage/badger or storage/postgres, store.go) and starts the server,
// the webhook queue and the store's housekeeping around the HTTP layer in
// app (server.go).
package cli

import (
	"flag"
	"io"
	"strings"
)

// Env is what a command runs with besides its arguments.
type Env struct {
	// Stdout receives a command's output, Stderr its logs and flag errors.
	Stdout, Stderr io.Writer
	// Version is the build's version (main's, set with -ldflags).
	Version string
}

// newFlagSet is a command's flag set: errors and -h are returned, not
// fatal, and written to stderr.
func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// multiFlag collects a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, " ") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }
