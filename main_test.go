package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

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

// The documents (README.md and docs/*.md) are checked against the tree:
// every relative link resolves, every make target and rxgate subcommand
// they name in code exists.

// commandNames returns rxgate's subcommands: the names in the commands
// table, and their aliases.
func commandNames() []string {
	var names []string
	for _, c := range commands {
		names = append(append(names, c.name), c.aliases...)
	}
	return names
}

// doc is one Markdown document, split into the parts the checks read.
type doc struct {
	path     string   // slash-separated, relative to the repository root
	prose    []string // lines outside fenced code, code spans removed
	code     []string // fenced code lines and code spans
	headings []string // heading texts, in order
}

var (
	codeSpanRe = regexp.MustCompile("(`+)(.+?)`+")
	linkRe     = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	headingRe  = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	makeRe     = regexp.MustCompile(`\bmake ([A-Za-z0-9][A-Za-z0-9_.-]*)`)
	targetRe   = regexp.MustCompile(`^([A-Za-z0-9][A-Za-z0-9_-]*)\s*:([^=]|$)`)
	inlineRe   = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

func readDoc(tb testing.TB, path string) doc {
	tb.Helper()
	raw, err := os.ReadFile(filepath.FromSlash(path))
	if err != nil {
		tb.Fatal(err)
	}
	d := doc{path: path}
	fence := ""
	for _, line := range strings.Split(string(raw), "\n") {
		trimmed := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			} else {
				d.code = append(d.code, line)
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		for _, m := range codeSpanRe.FindAllStringSubmatch(line, -1) {
			d.code = append(d.code, m[2])
		}
		if m := headingRe.FindStringSubmatch(line); m != nil {
			d.headings = append(d.headings, m[1])
		}
		d.prose = append(d.prose, codeSpanRe.ReplaceAllString(line, "code"))
	}
	return d
}

// anchors returns the anchors GitHub gives a document's headings:
// markup dropped, lower case, punctuation other than "-" and "_" dropped,
// spaces to hyphens, a repeated anchor suffixed -1, -2, ...
func anchors(headings []string) map[string]bool {
	set := map[string]bool{}
	seen := map[string]int{}
	for _, h := range headings {
		h = inlineRe.ReplaceAllString(h, "$1")
		var b strings.Builder
		for _, r := range strings.ToLower(h) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			seen[a]++
			a = fmt.Sprintf("%s-%d", a, n)
		} else {
			seen[a] = 1
		}
		set[a] = true
	}
	return set
}

// documents reads README.md and every docs/*.md.
func documents(tb testing.TB) []doc {
	tb.Helper()
	paths, err := filepath.Glob("docs/*.md")
	if err != nil {
		tb.Fatal(err)
	}
	docs := []doc{readDoc(tb, "README.md")}
	for _, p := range paths {
		docs = append(docs, readDoc(tb, filepath.ToSlash(p)))
	}
	if len(docs) < 2 {
		tb.Fatal("no documents under docs/")
	}
	return docs
}

// checkLink reports what is wrong with a relative link target in the
// document at from, or "" when it resolves.
func checkLink(tb testing.TB, from, target string) string {
	tb.Helper()
	if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
		return ""
	}
	file, anchor, _ := strings.Cut(target, "#")
	path := from
	if file != "" {
		path = filepath.ToSlash(filepath.Join(filepath.Dir(from), file))
	}
	if _, err := os.Stat(filepath.FromSlash(path)); err != nil {
		return fmt.Sprintf("%s: no such file", target)
	}
	if anchor == "" || !strings.HasSuffix(path, ".md") {
		return ""
	}
	if !anchors(readDoc(tb, path).headings)[anchor] {
		return fmt.Sprintf("%s: %s has no heading with anchor #%s", target, path, anchor)
	}
	return ""
}

func TestDocsLinks(t *testing.T) {
	for _, d := range documents(t) {
		t.Run(d.path, func(t *testing.T) {
			links := 0
			for _, line := range d.prose {
				for _, m := range linkRe.FindAllStringSubmatch(line, -1) {
					links++
					if msg := checkLink(t, d.path, m[1]); msg != "" {
						t.Errorf("%s: link %s", d.path, msg)
					}
				}
			}
			t.Logf("%d links", links)
		})
	}
}

// makeTargets returns the targets the Makefile defines.
func makeTargets(tb testing.TB) []string {
	tb.Helper()
	f, err := os.Open("Makefile")
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var targets []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		if m := targetRe.FindStringSubmatch(s.Text()); m != nil {
			targets = append(targets, m[1])
		}
	}
	if err := s.Err(); err != nil {
		tb.Fatal(err)
	}
	return targets
}

// subcommands returns the words that follow "rxgate " where it starts a
// command: at the start of a line or after a space, "/", "(" or "$" (so
// /usr/local/bin/rxgate serve counts, Description=rxgate does not), also
// where one "rxgate" follows another (sudo -u rxgate rxgate keygen). A
// shell or YAML comment ("# ...") is not a command.
func subcommands(text string) []string {
	var words []string
	for _, line := range strings.Split(text, "\n") {
		if i := strings.Index(line, "# "); i == 0 || i > 0 && line[i-1] == ' ' {
			line = line[:i]
		}
		for i := 0; ; {
			j := strings.Index(line[i:], "rxgate ")
			if j < 0 {
				break
			}
			at := i + j
			i = at + len("rxgate ")
			if at > 0 && !strings.ContainsRune(" \t/($", rune(line[at-1])) {
				continue
			}
			end := i
			for end < len(line) && (line[end] >= 'a' && line[end] <= 'z' || end > i && line[end] == '-') {
				end++
			}
			if w := line[i:end]; w != "" && w != "rxgate" {
				words = append(words, w)
			}
		}
	}
	return words
}

func TestDocsCommands(t *testing.T) {
	targets, names := makeTargets(t), commandNames()
	if len(targets) < 5 || len(names) < 5 {
		t.Fatalf("parsed %d make targets and %d commands; the parsers need a look", len(targets), len(names))
	}
	for _, d := range documents(t) {
		for _, code := range d.code {
			for _, m := range makeRe.FindAllStringSubmatch(code, -1) {
				if !slices.Contains(targets, m[1]) {
					t.Errorf("%s: `make %s` is not a target of the Makefile", d.path, m[1])
				}
			}
			for _, w := range subcommands(code) {
				if !slices.Contains(names, w) {
					t.Errorf("%s: `rxgate %s` is not an rxgate command (%s)", d.path, w, strings.Join(names, ", "))
				}
			}
		}
	}
}

func TestDocsAnchors(t *testing.T) {
	tests := []struct {
		heading, anchor string
	}{
		{"Quick start", "quick-start"},
		{"Badger or PostgreSQL?", "badger-or-postgresql"},
		{"`rxgate serve` flags", "rxgate-serve-flags"},
		{"Backups, retention & upgrades", "backups-retention--upgrades"},
		{"The [journal](x.md)", "the-journal"},
		{"snake_case key", "snake_case-key"},
	}
	for _, tt := range tests {
		h := codeSpanRe.ReplaceAllString(tt.heading, "$2")
		if !anchors([]string{h})[tt.anchor] {
			t.Errorf("%q: want anchor %q, got %v", tt.heading, tt.anchor, anchors([]string{h}))
		}
	}
	if got := anchors([]string{"Notes", "Notes"}); !got["notes"] || !got["notes-1"] {
		t.Errorf("repeated heading: got %v", got)
	}
}

func TestDocsSubcommandWords(t *testing.T) {
	tests := []struct {
		code string
		want []string
	}{
		{"rxgate serve --config FILE", []string{"serve"}},
		{"ExecStart=/usr/local/bin/rxgate serve --config x", []string{"serve"}},
		{"sudo -u rxgate rxgate keygen --out FILE", []string{"keygen"}},
		{"Description=rxgate e-prescribing partner API", nil},
		{"install -d -o rxgate -g rxgate /var/lib/rxgate --shell", nil},
		{"# readable by rxgate only", nil},
		{"User-Agent: rxgate/1.0, rxgate_http_requests_total", nil},
		{"rxgate rotate-key --data-dir DIR", []string{"rotate-key"}},
	}
	for _, tt := range tests {
		if got := subcommands(tt.code); !slices.Equal(got, tt.want) {
			t.Errorf("subcommands(%q) = %q, want %q", tt.code, got, tt.want)
		}
	}
}
