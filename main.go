// Command rxgate is a self-hosted implementation of the e-prescribing
// partner interface. Its subcommands (serve, sandbox, token and the rest)
// are the rows of the commands table below, each a function in app/cli;
// `rxgate help` prints the table. The table is the one list of them: the
// usage text is built from it and a test checks the documents against it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/rxgate/rxgate/app"
	"github.com/rxgate/rxgate/app/cli"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// command is a row of the commands table: its name, the one line the
// usage text gives it, and the function that runs it.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, env cli.Env, args []string) error
	aliases []string // other names that run it, left out of the usage
}

// commands are rxgate's subcommands, in the order the usage lists them.
var commands = []command{
	{name: "serve", summary: "run the partner and operator APIs (needs --config or RXGATE_ settings)", run: cli.Serve},
	{name: "sandbox", summary: "run a throwaway instance with demo data and print how to use it", run: cli.Sandbox},
	{name: "token", summary: "mint a partner token through the operator API", run: cli.Token},
	{name: "operator-key", summary: "create (--name N --role R), list or revoke (ID) operator keys through the operator API", run: cli.OperatorKey},
	{name: "audit", summary: "verify the audit trail of a running server (audit verify [--key-file FILE | --public-key B64])", run: cli.Audit},
	{name: "listen", summary: "receive webhooks on 127.0.0.1, verify each signature and print the event", run: cli.Listen},
	{name: "backup", summary: "download a consistent backup from a running server (--out FILE)", run: cli.Backup},
	{name: "restore", summary: "load a backup into an empty data directory (--in FILE --data-dir DIR)", run: cli.Restore},
	{name: "keygen", summary: "write a new encryption or audit key file (--out FILE, mode 600)", run: cli.Keygen},
	{name: "rotate-key", summary: "re-key a stopped encrypted store (--data-dir, --old-key-file, --new-key-file)", run: cli.RotateKey},
	{name: "migrate", summary: "bring the configured store's schema up to this version without serving", run: cli.Migrate},
	{name: "migrate-store", summary: "copy a stopped Badger store into an empty PostgreSQL database (--from-data-dir DIR --to-url URL)", run: cli.MigrateStore},
	{name: "version", summary: "print the version", run: cli.Version, aliases: []string{"--version", "-v"}},
}

// helpNames print the usage on stdout and succeed.
var helpNames = []string{"help", "--help", "-h"}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// usage is the usage text, built from the commands table: each name in a
// column of ten, or followed by two spaces when longer.
func usage() string {
	var b strings.Builder
	b.WriteString("usage: rxgate <command> [flags]\n\ncommands:\n")
	for _, c := range commands {
		fmt.Fprintf(&b, "  %-*s%s\n", max(10, len(c.name)+2), c.name, c.summary)
	}
	return b.String()
}

// lookup finds the command named name, or an alias of one.
func lookup(name string) (command, bool) {
	for _, c := range commands {
		if c.name == name || slices.Contains(c.aliases, name) {
			return c, true
		}
	}
	return command{}, false
}

// run is main without the process: it returns the exit code (2 for a
// usage error, 1 for a command's failure), so tests can drive it
// in-process.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	app.Version = version
	if len(args) == 0 {
		fmt.Fprint(stderr, usage())
		return 2
	}
	if slices.Contains(helpNames, args[0]) {
		fmt.Fprint(stdout, usage())
		return 0
	}
	c, ok := lookup(args[0])
	if !ok {
		fmt.Fprintf(stderr, "rxgate: unknown command %q\n%s", args[0], usage())
		return 2
	}
	err := c.run(ctx, cli.Env{Stdout: stdout, Stderr: stderr, Version: version}, args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "rxgate:", err)
		return 1
	}
	return 0
}
