package testsuite_test

import (
	"bufio"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jwk"
	"github.com/lestrrat-go/jwx/v2/jwt"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/app/auth"
	"github.com/rxgate/rxgate/storage"
	"github.com/rxgate/rxgate/testsuite"
)

// BenchmarkRead measures the partner read path against the framework's own
// limit (`make bench-read`, issue 31). It starts the real binary (`rxgate
// serve`, a Badger store on disk in a temporary directory) whose tokens
// come from an identity provider this benchmark plays (an RS256 key, its
// JWKS on loopback), seeds a patient with readBenchItems prescriptions,
// captures the 20-item prescription page, and starts testsuite/barepage,
// a bare Echo handler in its own process answering those captured bytes.
// Then wrk (2 threads, 64 connections) measures, after a warm-up, in
// three interleaved passes:
//
//   - bare: the bare handler;
//   - one token: the authenticated page, one token throughout;
//   - rotating: the page with a new token about every second request,
//     from a pool of pre-minted tokens (a wrk Lua script walks it, and
//     each run starts where the last one stopped, so a pass meets tokens
//     the server has not seen lately; the share the server really
//     verified, from rxgate_token_verifications_total, is printed);
//   - 304: the page with If-None-Match of its ETag.
//
// It prints each pass, the server's CPU per request (from /proc), wrk's
// own CPU per request (showing whether the load generator is the
// bottleneck), and the medians of the per-pass ratios against the issue's
// goals. Nothing asserts a speed. READ_BENCH_SECONDS (10), READ_BENCH_WARMUP
// (3) and READ_BENCH_TOKENS (40000) shorten or grow a run; READ_BENCH_PERF
// names a directory for a perf profile of the server in each run
// (startPerf). Every request goes to loopback, and every process started
// is stopped by its PID.
func BenchmarkRead(b *testing.B) {
	wrkPath, err := exec.LookPath("wrk")
	if err != nil {
		b.Skip("bench-read: wrk is missing (apt-get install -y wrk)")
	}
	seconds := envInt(b, "READ_BENCH_SECONDS", 10)
	warmup := envInt(b, "READ_BENCH_WARMUP", 3)
	poolSize := envInt(b, "READ_BENCH_TOKENS", 40000)
	dir := b.TempDir()

	// The identity provider.
	idp := newBenchIDP(b)
	jwksSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(idp.jwks)
	}))
	defer jwksSrv.Close()

	// The product.
	bin := rxgateBinary(b)
	cfgPath, adminKey := readBenchConfig(b, jwksSrv.URL+"/jwks.json")
	proc := startBinary(b, bin, cfgPath)
	defer func() { _ = proc.cmd.Process.Signal(syscall.SIGTERM); _ = proc.cmd.Wait() }()
	b.Setenv(testsuite.EnvBaseURL, proc.baseURL)
	b.Setenv(testsuite.EnvAdminURL, proc.admURL)
	b.Setenv(testsuite.EnvAdminKey, adminKey)
	env := testsuite.Start(b)
	tn := env.NewTenant(b)
	seedReadBench(b, env, tn, adminKey)
	userID := tn.UserID(testsuite.RolePrescriber)
	pageURL := env.BaseURL + strings.TrimPrefix(tn.PatientPath(), "/admin") + "/prescriptions"
	oneToken := idp.mint(b, userID, tn.OrgID)

	// The page, captured.
	body, etag := capturePage(b, pageURL, oneToken, tn.OrgSecret)
	bodyPath := filepath.Join(dir, "page.json")
	require.NoError(b, os.WriteFile(bodyPath, body, 0o600))

	// The bare handler.
	bare := startBarePage(b, dir, bodyPath)
	defer func() { _ = bare.cmd.Process.Signal(syscall.SIGTERM); _ = bare.cmd.Wait() }()
	u, err := url.Parse(pageURL)
	require.NoError(b, err)
	u.Host = bare.addr
	bareURL := u.String()

	// The token pool and the Lua script walking it.
	mintStart := time.Now()
	pool := idp.mintPool(b, userID, tn.OrgID, poolSize)
	poolPath := filepath.Join(dir, "tokens.txt")
	require.NoError(b, os.WriteFile(poolPath, []byte(strings.Join(pool, "\n")+"\n"), 0o600))
	scriptPath := filepath.Join(dir, "rotate.lua")
	require.NoError(b, os.WriteFile(scriptPath, []byte(rotateLua), 0o600))
	// A pool token works (and the captured bytes are what the bare handler sends).
	got, _ := capturePage(b, pageURL, pool[len(pool)-1], tn.OrgSecret)
	require.Equal(b, len(body), len(got), "a pool token's page differs in length")

	common := []string{"-H", "Authorization: Bearer " + oneToken, "-H", "x-organization-secret: " + tn.OrgSecret}
	offset := 0 // the next pool token a rotating run starts with
	measures := []readMeasure{
		{name: "bare", url: bareURL, pid: bare.cmd.Process.Pid, args: common},
		{name: "one token", url: pageURL, pid: proc.cmd.Process.Pid, args: common},
		{name: "rotating", url: pageURL, pid: proc.cmd.Process.Pid, args: common, rotating: true},
		{name: "304", url: pageURL, pid: proc.cmd.Process.Pid, args: append(slices.Clone(common), "-H", "If-None-Match: "+etag)},
	}
	run := func(m readMeasure, secs int) readRun {
		var extra []string
		if m.rotating {
			extra = []string{"-s", scriptPath}
		}
		before := tokenVerifications(b, proc.admURL, adminKey)
		stopPerf := startPerf(b, m, secs)
		r := runWrk(b, wrkPath, m, secs, extra, poolPath, offset)
		stopPerf()
		if m.rotating {
			after := tokenVerifications(b, proc.admURL, adminKey)
			r.verified, r.hits = after[auth.ResultVerified]-before[auth.ResultVerified], after[auth.ResultCacheHit]-before[auth.ResultCacheHit]
			offset = (offset + int(r.requests/2) + 64) % len(pool)
		}
		return r
	}
	fmt.Printf("bench-read: page %d bytes, %d prescriptions seeded, %d tokens minted in %s; wrk -t2 -c64, %ds runs after a %ds warm-up\n",
		len(body), readBenchItems, len(pool), time.Since(mintStart).Round(time.Second), seconds, warmup)
	for _, m := range measures {
		run(m, warmup)
	}
	passes := make([][]readRun, readPasses)
	for p := range passes {
		for _, m := range measures {
			passes[p] = append(passes[p], run(m, seconds))
		}
	}
	printReadBench(os.Stdout, measures, passes)
}

const (
	readBenchItems = 120 // prescriptions of the patient whose page is read
	readPasses     = 3
)

// rotateLua is the wrk script of the rotating-token measure: thread t of n
// sends token i of the pool (a file, one token a line) on its requests 2i
// and 2i+1, tokens t, t+n, t+2n..., starting at the pool's index offset.
const rotateLua = `
local threads = 0
function setup(thread)
  thread:set("tid", threads)
  threads = threads + 1
end
function init(args)
  tokens = {}
  for line in io.lines(args[1]) do tokens[#tokens + 1] = line end
  nthreads = tonumber(args[2])
  offset = tonumber(args[3])
  n = 0
end
function request()
  local i = ((offset + math.floor(n / 2) * nthreads + tid) % #tokens) + 1
  n = n + 1
  wrk.headers["Authorization"] = "Bearer " .. tokens[i]
  return wrk.format()
end
`

// readMeasure is one of the measures; pid is the server's process.
type readMeasure struct {
	name     string
	url      string
	pid      int
	args     []string
	rotating bool
}

// readRun is one wrk run.
type readRun struct {
	rate              float64 // requests/s
	requests          float64
	serverCPU, wrkCPU time.Duration
	verified, hits    float64 // rotating runs: tokens verified in full and found in the cache
}

var (
	wrkRequests = regexp.MustCompile(`(\d+) requests in `)
	wrkRate     = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)
	wrkBad      = regexp.MustCompile(`Non-2xx or 3xx responses: (\d+)`)
	wrkSocket   = regexp.MustCompile(`Socket errors: .*`)
)

// runWrk runs wrk against m for secs seconds.
func runWrk(b *testing.B, wrkPath string, m readMeasure, secs int, extra []string, poolPath string, offset int) readRun {
	b.Helper()
	args := append([]string{"-t2", "-c64", "-d" + strconv.Itoa(secs) + "s", "--timeout", "5s"}, m.args...)
	args = append(args, extra...)
	args = append(args, m.url)
	if m.rotating {
		args = append(args, poolPath, "2", strconv.Itoa(offset))
	}
	cmd := exec.Command(wrkPath, args...)
	cpu := processCPU(m.pid)
	out, err := cmd.CombinedOutput()
	serverCPU := processCPU(m.pid) - cpu
	require.NoError(b, err, "wrk: %s", out)
	if bad := wrkBad.FindSubmatch(out); bad != nil {
		b.Fatalf("wrk %s: %s answers were not 2xx or 3xx:\n%s", m.name, bad[1], out)
	}
	if sock := wrkSocket.Find(out); sock != nil {
		b.Fatalf("wrk %s: %s", m.name, sock)
	}
	reqs, rate := wrkRequests.FindSubmatch(out), wrkRate.FindSubmatch(out)
	require.NotNil(b, reqs, "wrk output: %s", out)
	require.NotNil(b, rate, "wrk output: %s", out)
	r := readRun{serverCPU: serverCPU, wrkCPU: cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()}
	r.requests, _ = strconv.ParseFloat(string(reqs[1]), 64)
	r.rate, _ = strconv.ParseFloat(string(rate[1]), 64)
	return r
}

// startPerf records, when READ_BENCH_PERF names a directory, a perf
// profile (call graphs) of m's server during each full-length run, as
// DIR/<measure>-<pass>.data for `perf report -i`; the profiler's own
// cost shows in the figures. It returns the function that stops it.
func startPerf(b *testing.B, m readMeasure, secs int) func() {
	dir := os.Getenv("READ_BENCH_PERF")
	if dir == "" || secs != envInt(b, "READ_BENCH_SECONDS", 10) {
		return func() {}
	}
	var out string
	for pass := 1; ; pass++ {
		out = filepath.Join(dir, fmt.Sprintf("%s-%d.data", strings.ReplaceAll(m.name, " ", "-"), pass))
		if _, err := os.Stat(out); err != nil {
			break
		}
	}
	cmd := exec.Command("perf", "record", "-q", "-F", "997", "-g", "-p", strconv.Itoa(m.pid), "-o", out)
	if err := cmd.Start(); err != nil {
		b.Logf("perf: %v", err)
		return func() {}
	}
	return func() { _ = cmd.Process.Signal(os.Interrupt); _ = cmd.Wait() }
}

// printReadBench prints every pass and the medians of the per-pass ratios.
func printReadBench(w io.Writer, measures []readMeasure, passes [][]readRun) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "pass\tmeasure\treq/s\tserver CPU/req\twrk CPU/req\tverified in full\t")
	perReq := func(d time.Duration, n float64) string {
		if n == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f µs", float64(d.Microseconds())/n)
	}
	for p, runs := range passes {
		for i, r := range runs {
			verified := ""
			if measures[i].rotating && r.verified+r.hits > 0 {
				verified = fmt.Sprintf("%.0f%% of req", 100*r.verified/r.requests)
			}
			fmt.Fprintf(tw, "%d\t%s\t%.0f\t%s\t%s\t%s\t\n", p+1, measures[i].name, r.rate,
				perReq(r.serverCPU, r.requests), perReq(r.wrkCPU, r.requests), verified)
		}
	}
	_ = tw.Flush()
	for p, runs := range passes {
		for i, r := range runs {
			if measures[i].rotating && r.requests > 0 && r.verified < 0.4*r.requests {
				fmt.Fprintf(w, "warning: pass %d verified only %.0f%% of its requests' tokens in full (about 50%% is meant): "+
					"the pool wrapped while its tokens were still cached; raise READ_BENCH_TOKENS\n", p+1, 100*r.verified/r.requests)
			}
		}
	}
	ratio := func(num, den int) float64 {
		var rs []float64
		for _, runs := range passes {
			rs = append(rs, runs[num].rate/runs[den].rate)
		}
		slices.Sort(rs)
		return rs[len(rs)/2]
	}
	fmt.Fprintf(w, "medians of %d passes:\n", len(passes))
	for _, g := range []struct {
		name     string
		num, den int
		goal     float64
	}{
		{"one token / bare", 1, 0, 0.60},
		{"rotating / one token", 2, 1, 0.60},
		{"304 / bare", 3, 0, 0.90},
	} {
		r := ratio(g.num, g.den)
		verdict := "met"
		if r < g.goal {
			verdict = "NOT met"
		}
		fmt.Fprintf(w, "  %-22s %.3f  (goal >= %.2f: %s)\n", g.name, r, g.goal, verdict)
	}
}

// envInt reads a positive integer from the environment, def when unset.
func envInt(b *testing.B, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	require.NoError(b, err, name)
	require.Positive(b, n, name)
	return n
}

// readBenchConfig is serveConfig with tokens from the JWKS at jwksURL
// instead of the built-in issuer.
func readBenchConfig(b *testing.B, jwksURL string) (path, key string) {
	b.Helper()
	dir := b.TempDir()
	path = filepath.Join(dir, "rxgate.yaml")
	key = "test-key-" + storage.NewSecret()
	require.NoError(b, os.WriteFile(path, []byte(`
http:
  listen: 127.0.0.1:0
admin:
  listen: 127.0.0.1:0
  api_key: `+key+`
storage:
  dir: `+filepath.Join(dir, "data")+`
auth:
  jwks_url: `+jwksURL+`
  issuer: `+benchIssuer+`
  audience: `+benchAudience+`
`), 0o600))
	return path, key
}

const (
	benchIssuer   = "https://idp.bench.invalid/"
	benchAudience = "rxgate-bench"
)

// benchIDP is the identity provider of the benchmark: an RS256 key with
// kid "bench".
type benchIDP struct {
	key  jwk.Key
	jwks []byte
}

func newBenchIDP(b *testing.B) *benchIDP {
	b.Helper()
	raw, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(b, err)
	key, err := jwk.FromRaw(raw)
	require.NoError(b, err)
	require.NoError(b, key.Set(jwk.KeyIDKey, "bench"))
	require.NoError(b, key.Set(jwk.AlgorithmKey, jwa.RS256))
	pub, err := key.PublicKey()
	require.NoError(b, err)
	require.NoError(b, pub.Set(jwk.KeyUsageKey, jwk.ForSignature))
	set := jwk.NewSet()
	require.NoError(b, set.AddKey(pub))
	jwks, err := json.Marshal(set)
	require.NoError(b, err)
	return &benchIDP{key: key, jwks: jwks}
}

// mint signs a token for userID in orgID, valid for two hours, with the
// scope the page needs.
func (p *benchIDP) mint(b *testing.B, userID, orgID string) string {
	now := time.Now().Truncate(time.Second)
	tok, err := jwt.NewBuilder().Issuer(benchIssuer).Audience([]string{benchAudience}).Subject(userID).
		IssuedAt(now).NotBefore(now).Expiration(now.Add(2*time.Hour)).JwtID(uuid.NewString()).
		Claim("org_id", orgID).Claim("scope", auth.ScopeReadPrescriptions).Build()
	if err != nil {
		b.Error(err)
		return ""
	}
	signed, err := jwt.Sign(tok, jwt.WithKey(jwa.RS256, p.key))
	if err != nil {
		b.Error(err)
		return ""
	}
	return string(signed)
}

// mintPool mints n distinct tokens on every CPU.
func (p *benchIDP) mintPool(b *testing.B, userID, orgID string, n int) []string {
	b.Helper()
	pool := make([]string, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range runtime.NumCPU() {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				pool[i] = p.mint(b, userID, orgID)
			}
		})
	}
	wg.Wait()
	require.False(b, b.Failed(), "minting the token pool failed")
	return pool
}

// seedReadBench gives the tenant's patient readBenchItems prescriptions
// through the operator API, each with the members a real one has.
func seedReadBench(b *testing.B, env *testsuite.Env, tn *testsuite.Tenant, adminKey string) {
	b.Helper()
	path := env.AdminPath(tn.PatientPath() + "/prescriptions")
	client := &http.Client{Timeout: 30 * time.Second}
	for i := range readBenchItems {
		body := fmt.Sprintf(`{"scid":"RB%016d","item_name":"Amoxicillin 500 mg capsule","quantity":"20",`+
			`"number_of_repeats_authorised":"1","repeat_intervals":"28","pbs_code":"01884L","item_strength":"500 mg",`+
			`"item_form":"capsule","route_administration":"oral",`+
			`"reason_for_prescribing":"Community-acquired pneumonia, mild, no penicillin allergy recorded",`+
			`"patient_instructions":"Take one capsule three times a day with food until all are taken, even if you feel better."}`, i)
		req, err := http.NewRequest(http.MethodPost, path, strings.NewReader(body))
		require.NoError(b, err)
		req.Header.Set("Authorization", "Bearer "+adminKey)
		req.Header.Set("Content-Type", "application/json")
		res, err := client.Do(req)
		require.NoError(b, err)
		out, _ := io.ReadAll(res.Body)
		_ = res.Body.Close()
		require.Equal(b, http.StatusCreated, res.StatusCode, "seed: %s", out)
	}
}

// capturePage reads the page with token and returns its bytes and ETag.
func capturePage(b *testing.B, pageURL, token, orgSecret string) (body []byte, etag string) {
	b.Helper()
	req, err := http.NewRequest(http.MethodGet, pageURL, nil)
	require.NoError(b, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("x-organization-secret", orgSecret)
	res, err := http.DefaultClient.Do(req)
	require.NoError(b, err)
	defer res.Body.Close()
	body, err = io.ReadAll(res.Body)
	require.NoError(b, err)
	require.Equal(b, http.StatusOK, res.StatusCode, "page: %s", body)
	etag = res.Header.Get("ETag")
	require.NotEmpty(b, etag, "the page has no ETag")
	return body, etag
}

// barePage is a running testsuite/barepage.
type barePage struct {
	cmd  *exec.Cmd
	addr string
}

// startBarePage builds and starts testsuite/barepage answering the bytes
// of bodyPath.
func startBarePage(b *testing.B, dir, bodyPath string) *barePage {
	b.Helper()
	bin := filepath.Join(dir, "barepage")
	build := exec.Command("go", "build", "-o", bin, "github.com/rxgate/rxgate/testsuite/barepage")
	build.Stderr = os.Stderr
	require.NoError(b, build.Run(), "go build barepage")
	cmd := exec.Command(bin, "-listen", "127.0.0.1:0", "-body", bodyPath)
	stdout, err := cmd.StdoutPipe()
	require.NoError(b, err)
	cmd.Stderr = os.Stderr
	require.NoError(b, cmd.Start())
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(b, err, "barepage did not start")
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening on ")
	require.True(b, ok, "barepage said %q", line)
	return &barePage{cmd: cmd, addr: addr}
}

// tokenVerifications reads rxgate_token_verifications_total by result from the
// operator listener's /metrics; empty when it cannot.
func tokenVerifications(b *testing.B, adminURL, key string) map[string]float64 {
	b.Helper()
	counts := map[string]float64{}
	req, err := http.NewRequest(http.MethodGet, strings.TrimSuffix(adminURL, "/")+"/metrics", nil)
	require.NoError(b, err)
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return counts
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, `rxgate_token_verifications_total{result="`)
		if !ok {
			continue
		}
		result, value, ok := strings.Cut(rest, `"} `)
		if !ok {
			continue
		}
		counts[result], _ = strconv.ParseFloat(value, 64)
	}
	return counts
}
