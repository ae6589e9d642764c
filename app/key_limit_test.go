package app

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/config"
)

// testClock is a clock the test moves.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// guardStep is one request of a key failure scenario: the clock moves by
// advance first; from is the client's address; want the status and, on a
// 429, the Retry-After.
type guardStep struct {
	name           string
	advance        time.Duration
	from           string
	key            string // "-": no credential at all
	wantStatus     int
	wantRetryAfter string
}

// runGuardSteps sends the steps in order through send, which builds and
// serves the request of one step and returns the recorder.
func runGuardSteps(t *testing.T, clock *testClock, steps []guardStep, send func(guardStep) *httptest.ResponseRecorder) {
	t.Helper()
	for i, st := range steps {
		clock.advance(st.advance)
		rec := send(st)
		where := fmt.Sprintf("step %d (%s)", i, st.name)
		require.Equal(t, st.wantStatus, rec.Code, "%s: %s", where, rec.Body)
		assert.Equal(t, st.wantRetryAfter, rec.Header().Get("Retry-After"), where)
	}
}

// keyGuessSteps is a key-guessing loop under a burst of 3 and an interval
// of 10s, sent from 192.0.2.1: three wrong keys are 401, then every
// attempt, the right key's too, is 429 until a token is back; requests
// without a key do not count; other addresses are apart, an IPv6 client
// counted by its /64. right is the right credential, wrong a wrong one.
func keyGuessSteps(right, wrong string) []guardStep {
	const me, other = "192.0.2.1:40000", "198.51.100.7:40000"
	steps := []guardStep{
		{name: "no key", from: me, key: "-", wantStatus: http.StatusUnauthorized},
		{name: "the right key", from: me, key: right, wantStatus: http.StatusOK},
	}
	for i := range 3 {
		steps = append(steps, guardStep{name: fmt.Sprintf("guess %d", i+1), from: me, key: wrong, wantStatus: http.StatusUnauthorized})
	}
	return append(steps,
		guardStep{name: "guess 4 is limited", from: me, key: wrong, wantStatus: http.StatusTooManyRequests, wantRetryAfter: "10"},
		guardStep{name: "the right key is limited too", from: me, key: right, wantStatus: http.StatusTooManyRequests, wantRetryAfter: "10"},
		guardStep{name: "from another port of the address", from: "192.0.2.1:40001", key: wrong, wantStatus: http.StatusTooManyRequests, wantRetryAfter: "10"},
		guardStep{name: "no key is not a guess", from: me, key: "-", wantStatus: http.StatusUnauthorized},
		guardStep{name: "another address is apart", from: other, key: wrong, wantStatus: http.StatusUnauthorized},
		guardStep{name: "another address with the right key", from: other, key: right, wantStatus: http.StatusOK},
		guardStep{name: "almost refilled", advance: 9 * time.Second, from: me, key: right, wantStatus: http.StatusTooManyRequests, wantRetryAfter: "1"},
		guardStep{name: "one token back: the right key", advance: time.Second, from: me, key: right, wantStatus: http.StatusOK},
		guardStep{name: "the right key takes no token", from: me, key: right, wantStatus: http.StatusOK},
		guardStep{name: "the token back: one guess", from: me, key: wrong, wantStatus: http.StatusUnauthorized},
		guardStep{name: "and limited again", from: me, key: wrong, wantStatus: http.StatusTooManyRequests, wantRetryAfter: "10"},
		guardStep{name: "refilled: a burst again", advance: time.Minute, from: me, key: wrong, wantStatus: http.StatusUnauthorized},
		guardStep{name: "IPv6 guess 1", from: "[2001:db8:1:2::1]:40000", key: wrong, wantStatus: http.StatusUnauthorized},
		guardStep{name: "IPv6 guess 2", from: "[2001:db8:1:2::2]:40000", key: wrong, wantStatus: http.StatusUnauthorized},
		guardStep{name: "IPv6 guess 3", from: "[2001:db8:1:2:ffff::3]:40000", key: wrong, wantStatus: http.StatusUnauthorized},
		guardStep{name: "IPv6 guess 4, same /64", from: "[2001:db8:1:2::4]:40000", key: wrong, wantStatus: http.StatusTooManyRequests, wantRetryAfter: "10"},
		guardStep{name: "IPv6, another /64", from: "[2001:db8:1:3::1]:40000", key: wrong, wantStatus: http.StatusUnauthorized},
	)
}

// newGuardApp is an App with a burst of 3 wrong keys and one more every
// 10s, on a clock the test moves.
func newGuardApp(t *testing.T) (*App, *testClock) {
	t.Helper()
	clock := &testClock{now: time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)}
	a, _ := newTestAppWith(t, Options{Now: clock.Now}, func(c *config.Config) {
		c.Admin.KeyFailureBurst, c.Admin.KeyFailureInterval = 3, 10*time.Second
	})
	return a, clock
}

// TestKeyFailureLimitBearer: the guessing loop against the operator API's
// Bearer key, on an operation and on /metrics; the 429 is the envelope.
func TestKeyFailureLimitBearer(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"/admin/v1/overview", "/metrics"} {
		t.Run(path, func(t *testing.T) {
			t.Parallel()
			a, clock := newGuardApp(t)
			runGuardSteps(t, clock, keyGuessSteps(testAdminKey, "wrong-"+testAdminKey), func(st guardStep) *httptest.ResponseRecorder {
				req := httptest.NewRequest(http.MethodGet, path, nil)
				req.Host, req.RemoteAddr = "127.0.0.1:8081", st.from
				if st.key != "-" {
					req.Header.Set("Authorization", "Bearer "+st.key)
				}
				rec := httptest.NewRecorder()
				a.AdminHandler().ServeHTTP(rec, req)
				if rec.Code == http.StatusTooManyRequests {
					env := decodeEnvelope(t, rec.Body.Bytes())
					assert.Equal(t, "https://errors.rxgate.dev/too-many-requests", env.Error.Type)
					assert.Equal(t, "TOO_MANY_REQUESTS", env.Code)
					assert.NotContains(t, rec.Body.String(), testAdminKey)
				}
				return rec
			})
		})
	}
}

// TestKeyFailureLimitConsole: the guessing loop against the console's
// sign-in form; the 429 is the sign-in page.
func TestKeyFailureLimitConsole(t *testing.T) {
	t.Parallel()
	a, clock := newGuardApp(t)
	steps := keyGuessSteps(testAdminKey, "wrong-"+testAdminKey)
	for i := range steps {
		if steps[i].wantStatus == http.StatusOK {
			steps[i].wantStatus = http.StatusSeeOther // signed in: to the overview
		}
	}
	runGuardSteps(t, clock, steps, func(st guardStep) *httptest.ResponseRecorder {
		form := url.Values{}
		if st.key != "-" {
			form.Set("key", st.key)
		}
		req := httptest.NewRequest(http.MethodPost, "/console/sign-in", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Host, req.RemoteAddr = "127.0.0.1:8081", st.from
		rec := httptest.NewRecorder()
		a.AdminHandler().ServeHTTP(rec, req)
		if rec.Code == http.StatusTooManyRequests {
			assert.Contains(t, rec.Body.String(), "Too many wrong operator keys")
			assert.Contains(t, rec.Body.String(), `type="password"`, "the sign-in form again")
		}
		return rec
	})
}

// TestKeyFailureLimitSignInLink: a wrong sign-in link counts as a wrong
// key; a live link from a limited address is refused without being spent,
// and works once the address has a token again.
func TestKeyFailureLimitSignInLink(t *testing.T) {
	t.Parallel()
	a, clock := newGuardApp(t)
	link, err := url.Parse(a.ConsoleSignInURL())
	require.NoError(t, err)
	const me = "192.0.2.1:40000"
	wrong := "/console/sign-in/" + strings.Repeat("A", 43)
	steps := []guardStep{
		{name: "wrong link 1", from: me, key: wrong, wantStatus: http.StatusUnauthorized},
		{name: "wrong link 2", from: me, key: wrong, wantStatus: http.StatusUnauthorized},
		{name: "wrong link 3", from: me, key: wrong, wantStatus: http.StatusUnauthorized},
		{name: "wrong link 4 is limited", from: me, key: wrong, wantStatus: http.StatusTooManyRequests, wantRetryAfter: "10"},
		{name: "the live link is limited too", from: me, key: link.Path, wantStatus: http.StatusTooManyRequests, wantRetryAfter: "10"},
		{name: "and was not spent", advance: 10 * time.Second, from: me, key: link.Path, wantStatus: http.StatusOK},
		{name: "spent now", from: "198.51.100.7:40000", key: link.Path, wantStatus: http.StatusUnauthorized},
	}
	runGuardSteps(t, clock, steps, func(st guardStep) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, st.key, nil)
		req.Host, req.RemoteAddr = "localhost:8081", st.from
		rec := httptest.NewRecorder()
		a.AdminHandler().ServeHTTP(rec, req)
		return rec
	})
}

// TestKeyFailureLimitOff: with admin.key_failure_burst 0 nothing is
// limited.
func TestKeyFailureLimitOff(t *testing.T) {
	t.Parallel()
	a, _ := newTestAppWith(t, Options{}, func(c *config.Config) { c.Admin.KeyFailureBurst = 0 })
	for range 50 {
		req := httptest.NewRequest(http.MethodGet, "/admin/v1/overview", nil)
		req.Host = "127.0.0.1"
		req.Header.Set("Authorization", "Bearer wrong-"+testAdminKey)
		rec := httptest.NewRecorder()
		a.AdminHandler().ServeHTTP(rec, req)
		require.Equal(t, http.StatusUnauthorized, rec.Code)
	}
}

// TestKeyLimiterMemory: the limiter forgets a client once its bucket is
// full again, and tracks at most keyLimiterMaxClients, forgetting the
// one whose last failure is oldest.
func TestKeyLimiterMemory(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	client := func(i int) netip.Prefix {
		return clientKey(netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 1).String())
	}

	t.Run("idle clients are forgotten", func(t *testing.T) {
		t.Parallel()
		l := newKeyLimiter(3, 10*time.Second)
		for i := range 100 {
			l.fail(client(i), start)
		}
		require.Len(t, l.clients, 100)
		l.fail(client(1000), start.Add(29*time.Second))
		assert.Len(t, l.clients, 101, "not full yet: nothing forgotten")
		l.fail(client(1001), start.Add(30*time.Second))
		assert.Len(t, l.clients, 2, "the first hundred are full again: forgotten")
	})

	t.Run("at most keyLimiterMaxClients", func(t *testing.T) {
		t.Parallel()
		l := newKeyLimiter(3, 10*time.Second)
		for i := range keyLimiterMaxClients + 10 {
			l.fail(client(i), start.Add(time.Duration(i)*time.Microsecond))
		}
		assert.Len(t, l.clients, keyLimiterMaxClients)
		assert.NotContains(t, l.clients, client(0), "the oldest is forgotten")
		assert.Contains(t, l.clients, client(keyLimiterMaxClients+9), "the newest is kept")
		// The newest client's bucket is its own still: one failure taken,
		// two left, then limited.
		newest, at := client(keyLimiterMaxClients+9), start.Add(time.Second)
		for range 2 {
			_, limited := l.fail(newest, at)
			require.False(t, limited)
		}
		_, limited := l.fail(newest, at)
		assert.True(t, limited)
	})
}

// TestClientKey: a client is counted by its IPv4 address (an IPv4-mapped
// IPv6 one too) or its IPv6 /64; the port does not matter.
func TestClientKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		remote, want string
	}{
		{"192.0.2.1:1234", "192.0.2.1/32"},
		{"[::ffff:192.0.2.1]:1234", "192.0.2.1/32"},
		{"[::1]:1234", "::/64"},
		{"[2001:db8:1:2:3:4:5:6]:1", "2001:db8:1:2::/64"},
		{"[fe80::1%eth0]:1", "fe80::/64"},
		{"not an address", "invalid Prefix"},
	}
	for _, tt := range tests {
		t.Run(tt.remote, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, clientKey(tt.remote).String())
		})
	}
}
