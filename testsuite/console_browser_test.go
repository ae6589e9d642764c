package testsuite_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/config"
	"github.com/rxgate/rxgate/queue/receiver"
	"github.com/rxgate/rxgate/testsuite"
)

// Browser tests drive Debian's Chromium, headless, through the DevTools
// protocol (chromedp). Without Chromium they skip, unless
// RXGATE_TEST_REQUIRE_BROWSER is set (CI sets it), when they fail.
const (
	envRequireBrowser = "RXGATE_TEST_REQUIRE_BROWSER"
	// envScreenshots, when set, is a directory the screenshots are saved
	// to as well (make screenshots uses it for docs/console.md's).
	envScreenshots = "RXGATE_TEST_SCREENSHOTS"
)

// chromiumPath finds Chromium or skips t.
func chromiumPath(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv(envRequireBrowser) != "" {
		t.Fatalf("testsuite: %s is set but Chromium is not installed: apt-get install chromium", envRequireBrowser)
	}
	t.Skip("testsuite: browser tests need Chromium: install Debian's chromium package (apt-get install chromium) to run them")
	return ""
}

// browser is one headless Chromium with a fresh profile, watched for
// console errors and for requests to any origin but the console's.
type browser struct {
	t      testing.TB
	ctx    context.Context
	origin string
	shots  []string // directories screenshots go to

	mu       sync.Mutex
	problems []string
}

func newBrowser(t testing.TB, origin string) *browser {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 860),
	}
	// The allocator starts Chromium and kills it, by its process, when its
	// context is cancelled.
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(allocCtx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(func() {
		cancelTimeout()
		cancelCtx()
		cancelAlloc()
	})
	b := &browser{t: t, ctx: ctx, origin: origin, shots: []string{t.TempDir()}}
	if dir := os.Getenv(envScreenshots); dir != "" {
		require.NoError(t, os.MkdirAll(dir, 0o755))
		b.shots = append(b.shots, dir)
	}
	err := chromedp.Listen(ctx, func(ev any) {
		var problem string
		switch ev := ev.(type) {
		case *network.EventRequestWillBeSent:
			if u := ev.Request.URL; !strings.HasPrefix(u, origin+"/") {
				problem = "request to another origin: " + u
			}
		case *runtime.EventExceptionThrown:
			problem = "exception: " + ev.ExceptionDetails.Text
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError {
				problem = "console.error"
			}
		case *log.EventEntryAdded:
			if ev.Entry.Level == log.EntryLevelError {
				problem = "console error: " + ev.Entry.Text + " " + ev.Entry.URL
			}
		}
		if problem != "" {
			b.mu.Lock()
			b.problems = append(b.problems, problem)
			b.mu.Unlock()
		}
	})
	require.NoError(t, err, "starting Chromium")
	require.NoError(t, chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		if _, err := cdp.Call(ctx, tg, network.Enable, network.EnableParams{}); err != nil {
			return err
		}
		if _, err := cdp.Call(ctx, tg, log.Enable, cdp.Empty{}); err != nil {
			return err
		}
		_, err := cdp.Call(ctx, tg, runtime.Enable, cdp.Empty{})
		return err
	})), "watching the page")
	return b
}

// run runs steps and fails t on an error.
func (b *browser) run(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	require.NoError(b.t, chromedp.Do(b.ctx, steps...), what)
}

// get runs one action that returns a value.
func get[T any](b *browser, what string, a chromedp.Action[T]) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, a)
	require.NoError(b.t, err, what)
	return v
}

// check asserts that the page so far logged no error and asked no other
// origin, allowing the console's log of an expected error status.
func (b *browser) check(page string, allowStatus int) {
	b.t.Helper()
	b.mu.Lock()
	problems := b.problems
	b.problems = nil
	b.mu.Unlock()
	for _, p := range problems {
		if allowStatus != 0 && strings.Contains(p, fmt.Sprintf("status of %d", allowStatus)) {
			continue
		}
		b.t.Errorf("%s: %s", page, p)
	}
}

// shot saves a screenshot of the page as name.png.
func (b *browser) shot(name string) {
	b.t.Helper()
	png := get(b, "screenshot "+name, chromedp.FullScreenshot(100))
	for _, dir := range b.shots {
		require.NoError(b.t, os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644))
	}
}

func (b *browser) location() string {
	b.t.Helper()
	return get(b, "location", chromedp.Location())
}

func (b *browser) text(sel string) string {
	b.t.Helper()
	return get(b, "text of "+sel, chromedp.Text(chromedp.CSS(sel)))
}

// until reloads path until the text of sel holds every one of want.
func (b *browser) until(path, sel string, want ...string) {
	b.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		b.run("load "+path, chromedp.Navigate(b.origin+path))
		s := b.text(sel)
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(s, w)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("%s never showed %q in %s: %s", path, want, sel, s)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestConsoleInBrowser walks the console in headless Chromium as an
// operator would: sign in, look around, register an endpoint, watch a
// delivery, replay a failure, rotate a secret, sign out; a forged form is
// refused. Every page is screenshotted and checked for console errors and
// requests to other origins.
func TestConsoleInBrowser(t *testing.T) {
	t.Parallel()
	env := startWebhooks(t, func(c *config.Config) { c.Webhooks.MaxAttempts = 1 })
	env.RequireInProcess(t)
	b := newBrowser(t, env.AdminURL)
	tn := env.NewTenant(t)
	validate(t, env, tn)

	var failing atomic.Bool
	hooks := newHookReceiver(t)
	hooks.respond = func(*receiver.Delivery) int {
		if failing.Load() {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	}

	// Without a session every page sends the browser to sign-in.
	b.run("open the console", chromedp.Navigate(env.AdminURL+"/console/events"), chromedp.WaitVisible(chromedp.ID("key")))
	assert.Equal(t, env.AdminURL+"/console/sign-in", b.location())
	b.check("sign-in", 0)
	b.shot("sign-in")

	b.run("sign in",
		chromedp.SendKeys(chromedp.ID("key"), env.AdminKey),
		chromedp.Submit(chromedp.ID("key")),
		chromedp.WaitVisible(chromedp.ID("events-by-status")))
	assert.Equal(t, env.AdminURL+"/console/", b.location())
	assert.Equal(t, "1", b.text("span#organizations"))
	assert.Equal(t, "admin (config)", b.text("#who-name"), "the header says who is signed in")
	assert.Equal(t, "admin", b.text("#who-role"))
	b.check("overview", 0)
	b.shot("overview")

	b.run("open the organizations", chromedp.Click(chromedp.CSS(`a[href="/console/organizations"]`)), chromedp.WaitVisible(chromedp.CSS("table#organizations")))
	assert.Contains(t, b.text("table#organizations"), tn.OrgName)
	b.check("organizations", 0)
	b.shot("organizations")
	b.run("open one organization", chromedp.Click(chromedp.CSS(`a[href="/console/organizations/`+tn.OrgID+`"]`)), chromedp.WaitVisible(chromedp.ID("users")))
	assert.Contains(t, b.text("#users"), tn.Emails[testsuite.RolePrescriber])
	assert.Contains(t, b.text("#validated"), "yes")
	b.check("organization", 0)
	b.shot("organization")

	// Register an endpoint: its secret is on the next page only.
	b.run("register an endpoint",
		chromedp.Navigate(env.AdminURL+"/console/endpoints"),
		chromedp.WaitVisible(chromedp.ID("register")),
		chromedp.SetValue(chromedp.ID("partner_id"), tn.PartnerID),
		chromedp.SendKeys(chromedp.ID("url"), hooks.URL),
		chromedp.Submit(chromedp.ID("url")),
		chromedp.WaitVisible(chromedp.ID("secret")))
	secret := get(b, "the secret", chromedp.Value(chromedp.ID("secret")))
	require.Len(t, secret, 43)
	b.check("endpoint registered", 0)
	b.shot("endpoint-secret")
	hooks.arm(secret)
	b.run("list the endpoints", chromedp.Navigate(env.AdminURL+"/console/endpoints"))
	endpointsHTML := get(b, "the page", chromedp.OuterHTML(chromedp.CSS("html")))
	assert.Contains(t, endpointsHTML, hooks.URL)
	assert.NotContains(t, endpointsHTML, secret, "the secret is shown once")
	b.check("endpoints", 0)
	b.shot("endpoints")

	// A prescription created through the operator API: its event appears,
	// delivered, with the attempt.
	delivered := eventOf(t, env, tn, prescribe(t, env, tn))["event_id"].(string)
	b.until("/console/events?organization_id="+tn.OrgID, "#events", delivered, "delivered")
	b.check("events", 0)
	b.shot("events-delivered")
	b.run("open the event", chromedp.Click(chromedp.CSS(`a[href="/console/events/`+delivered+`"]`)), chromedp.WaitVisible(chromedp.ID("attempts")))
	attempts := b.text("#attempts")
	assert.Contains(t, attempts, "200")
	assert.Contains(t, b.text("#payload"), `"event_type": "prescription.created"`, "pretty-printed")
	b.check("event", 0)
	b.shot("event")

	// What the receiver saw, re-encoded as a Go receiver's json.Marshal
	// of the decoded body would: the diagnosis says the members moved.
	d := hooks.next(t)
	var decoded map[string]any
	require.NoError(t, json.Unmarshal(d.Body, &decoded))
	reencoded, err := json.Marshal(decoded)
	require.NoError(t, err)
	b.run("diagnose a signature",
		chromedp.Navigate(env.AdminURL+"/console/endpoints"),
		chromedp.Click(chromedp.CSS(`a[href$="/diagnose"]`)),
		chromedp.WaitVisible(chromedp.ID("diagnose")),
		chromedp.SetValue(chromedp.ID("signature"), d.Signature),
		chromedp.SetValue(chromedp.ID("body"), string(reencoded)),
		chromedp.Submit(chromedp.ID("signature")),
		chromedp.WaitVisible(chromedp.ID("findings")))
	assert.Contains(t, b.text("#verdict"), "does not verify")
	findings := b.text("#findings")
	assert.Contains(t, findings, "body_differs")
	assert.Contains(t, findings, "member_order")
	assert.NotContains(t, findings, secret)
	b.check("diagnosis", 0)
	b.shot("endpoint-diagnose")

	// A failed event is replayed with its button.
	failing.Store(true)
	failed := eventOf(t, env, tn, prescribe(t, env, tn))["event_id"].(string)
	b.until("/console/events/"+failed, "#event-status", "failed")
	assert.Contains(t, b.text("#attempts"), "503")
	b.shot("event-failed")
	failing.Store(false)
	b.run("replay", chromedp.Click(chromedp.ID("replay")), chromedp.WaitVisible(chromedp.CSS(".notice")))
	b.until("/console/events/"+failed, "#event-status", "delivered")
	assert.Contains(t, b.text("#attempts"), "200")
	b.check("replayed event", 0)
	b.shot("event-replayed")

	// The endpoint's health badge shows a failure; its Recover form
	// replays what failed since a time.
	failing.Store(true)
	since := time.Now().UTC().Add(-time.Second).Format(time.RFC3339)
	lost := eventOf(t, env, tn, prescribe(t, env, tn))["event_id"].(string)
	b.until("/console/events/"+lost, "#event-status", "failed")
	failing.Store(false)
	b.run("open the endpoints", chromedp.Navigate(env.AdminURL+"/console/endpoints"), chromedp.WaitVisible(chromedp.ID("endpoints")))
	assert.Contains(t, b.text("td.health"), "Failing")
	b.run("recover",
		chromedp.SetValue(chromedp.CSS(`form.recover input[name="since"]`), since),
		chromedp.Submit(chromedp.CSS(`form.recover input[name="since"]`)),
		chromedp.WaitVisible(chromedp.CSS(".notice")))
	b.check("endpoints recovered", 0)
	b.shot("endpoint-recovered")
	b.until("/console/events/"+lost, "#event-status", "delivered")

	// Rotate the endpoint's secret: a new one, shown once.
	b.run("rotate the secret",
		chromedp.Navigate(env.AdminURL+"/console/endpoints"),
		chromedp.Click(chromedp.CSS(`form[action$="/rotate-secret"] button`)),
		chromedp.WaitVisible(chromedp.ID("secret")))
	rotated := get(b, "the new secret", chromedp.Value(chromedp.ID("secret")))
	require.Len(t, rotated, 43)
	assert.NotEqual(t, secret, rotated)
	b.check("secret rotated", 0)

	// A form without its CSRF token is refused and changes nothing.
	b.run("post a form without its CSRF token",
		chromedp.Navigate(env.AdminURL+"/console/endpoints"),
		chromedp.WaitVisible(chromedp.ID("register")),
		chromedp.Evaluate[chromedp.Void](`document.querySelector('#register input[name="csrf"]').remove()`),
		chromedp.SendKeys(chromedp.ID("url"), hooks.URL+"/forged"),
		chromedp.Submit(chromedp.ID("url")),
		chromedp.WaitVisible(chromedp.ID("error")))
	body := b.text("#error")
	assert.Contains(t, body, "CSRF token")
	b.check("forged form", http.StatusForbidden)
	r := env.MustAdmin(t, http.MethodGet, "/admin/v1/webhook-endpoints?partner_id="+tn.PartnerID, nil, http.StatusOK)
	assert.NotContains(t, string(r.Body), "/forged")

	// The whole log: delivered, replayed, failed and skipped events.
	failing.Store(true)
	stillFailing := eventOf(t, env, tn, prescribe(t, env, tn))["event_id"].(string)
	unvalidated := env.NewTenant(t, testsuite.WithPartner(tn.PartnerID, tn.PartnerSecret))
	skipped := eventOf(t, env, unvalidated, prescribe(t, env, unvalidated))["event_id"].(string)
	b.until("/console/events", "#events", delivered, failed, stillFailing, skipped, "failed", "skipped")
	b.check("event log", 0)
	b.shot("events")

	// Sign out: the session is over.
	b.run("sign out",
		chromedp.Navigate(env.AdminURL+"/console/"),
		chromedp.Click(chromedp.CSS(".signout button")),
		chromedp.WaitVisible(chromedp.ID("key")))
	assert.Equal(t, env.AdminURL+"/console/sign-in", b.location())
	b.run("open a page after signing out", chromedp.Navigate(env.AdminURL+"/console/organizations/"+tn.OrgID), chromedp.WaitVisible(chromedp.ID("key")))
	assert.Equal(t, env.AdminURL+"/console/sign-in", b.location())
	b.check("signed out", 0)

	// A viewer's key: the same pages, without the forms it may not use.
	_, viewerKey := operatorKey(t, env, "viewer")
	b.run("sign in as a viewer",
		chromedp.SendKeys(chromedp.ID("key"), viewerKey),
		chromedp.Submit(chromedp.ID("key")),
		chromedp.WaitVisible(chromedp.ID("events-by-status")))
	assert.Equal(t, "viewer", b.text("#who-role"))
	b.run("open the endpoints as a viewer", chromedp.Navigate(env.AdminURL+"/console/endpoints"), chromedp.WaitVisible(chromedp.ID("endpoints")))
	assert.NotContains(t, b.text("main"), "Rotate secret")
	assert.NotContains(t, b.text("main"), "Register an endpoint")
	b.check("endpoints as a viewer", 0)
	b.shot("viewer-endpoints")

	u, err := url.Parse(b.shots[len(b.shots)-1])
	require.NoError(t, err)
	t.Logf("screenshots: %s", u.Path)
}
