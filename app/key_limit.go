package app

import (
	"math"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"golang.org/x/time/rate"
)

// Bounds of the key failure limiter's memory.
const (
	// keyLimiterMaxClients is the most client addresses tracked at once;
	// beyond it the address whose last failure is oldest is forgotten.
	// Forgetting one only gives it a fresh burst, which a new address
	// would get anyway.
	keyLimiterMaxClients = 10_000
)

// keyLimiter limits wrong operator credentials (the API key, a console
// sign-in key or link) per client address with a token bucket
// (golang.org/x/time/rate): each wrong credential takes a token, burst
// tokens to begin with and one more every interval. With none left, a
// wrong credential is answered 429, and so is a right one: were a right
// key let through while wrong ones get 429, an attacker could go on
// guessing at full speed and watch for the one answer that is not a 429,
// and the limit would limit nothing. The operator who shares the address
// (or mistyped the key burst times) waits at most interval for the next
// attempt. A right credential from an address with tokens left takes
// none: right keys alone, however many and however concurrent, never
// reach the limit.
//
// The client address is the connection's remote address. Echo's RealIP
// would believe X-Forwarded-For, and the app configures no IPExtractor
// and has no trusted-proxy setting: behind a proxy every client shares the
// proxy's address (admin.key_failure_burst: 0 turns the limit off there).
// An IPv6 client is counted by its /64, the least a host is given, so
// that rotating addresses within it gains nothing.
//
// A nil *keyLimiter limits nothing.
type keyLimiter struct {
	burst int
	every rate.Limit
	// idle is how long an emptied bucket takes to fill again: a client
	// whose last failure is older than that is forgotten.
	idle time.Duration

	mu        sync.Mutex
	clients   map[netip.Prefix]*keyClient // guarded by mu
	lastSweep time.Time                   // guarded by mu
}

// keyClient is one client address's bucket and its last failure.
type keyClient struct {
	lim  *rate.Limiter
	last time.Time
}

// newKeyLimiter returns the limiter of admin.key_failure_burst and
// admin.key_failure_interval, or nil when the limit is off.
func newKeyLimiter(burst int, interval time.Duration) *keyLimiter {
	if burst <= 0 || interval <= 0 {
		return nil
	}
	return &keyLimiter{
		burst:   burst,
		every:   rate.Every(interval),
		idle:    time.Duration(burst) * interval,
		clients: map[netip.Prefix]*keyClient{},
	}
}

// clientKey is the bucket a request's remote address ("ip:port") counts
// in. An address that does not parse (no real connection has one) counts
// in the bucket of the zero prefix, limited with every such one.
func clientKey(remoteAddr string) netip.Prefix {
	ap, err := netip.ParseAddrPort(remoteAddr)
	if err != nil {
		return netip.Prefix{}
	}
	ip := ap.Addr().Unmap().WithZone("")
	bits := 32
	if ip.Is6() {
		bits = 64
	}
	p, _ := ip.Prefix(bits)
	return p
}

// permit reports whether a right credential from client is let through at
// now: unless the client has no token left. When not, it returns how long
// until it has one. A right credential takes no token.
func (l *keyLimiter) permit(client netip.Prefix, now time.Time) (time.Duration, bool) {
	if l == nil {
		return 0, true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	kc := l.clients[client]
	if kc == nil {
		return 0, true
	}
	if wait := l.wait(kc, now); wait > 0 {
		return wait, false
	}
	return 0, true
}

// fail records a wrong credential from client at now. It takes a token and
// reports false when one was left (answer 401); with none left it reports
// true (answer 429) and how long until there is one.
func (l *keyLimiter) fail(client netip.Prefix, now time.Time) (time.Duration, bool) {
	if l == nil {
		return 0, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	kc := l.clients[client]
	if kc == nil {
		l.makeRoom(now)
		kc = &keyClient{lim: rate.NewLimiter(l.every, l.burst)}
		l.clients[client] = kc
	}
	kc.last = now
	if kc.lim.AllowN(now, 1) {
		return 0, false
	}
	return l.wait(kc, now), true
}

// wait is how long until kc has a token at now, 0 when it has one now.
// l.mu is held.
func (l *keyLimiter) wait(kc *keyClient, now time.Time) time.Duration {
	missing := 1 - kc.lim.TokensAt(now)
	if missing <= 0 {
		return 0
	}
	return time.Duration(math.Ceil(missing / float64(l.every) * float64(time.Second)))
}

// makeRoom forgets the clients whose buckets are full again (their last
// failure is more than idle ago) when a sweep is due or the map is full,
// and, when it is still full, the client whose last failure is oldest.
// Both scans are of at most keyLimiterMaxClients entries, and run at most
// once per idle unless an attacker with that many addresses keeps the map
// full. l.mu is held.
func (l *keyLimiter) makeRoom(now time.Time) {
	full := len(l.clients) >= keyLimiterMaxClients
	if !full && now.Sub(l.lastSweep) < l.idle {
		return
	}
	l.lastSweep = now
	for k, kc := range l.clients {
		if now.Sub(kc.last) >= l.idle {
			delete(l.clients, k)
		}
	}
	if len(l.clients) < keyLimiterMaxClients {
		return
	}
	var oldest netip.Prefix
	var oldestAt time.Time
	first := true
	for k, kc := range l.clients {
		if first || kc.last.Before(oldestAt) {
			oldest, oldestAt, first = k, kc.last, false
		}
	}
	delete(l.clients, oldest)
}

// checkOperatorKey runs the key failure limit around one check of an
// operator credential from c's client: matched is the check's outcome and
// wrong the error that answers a wrong credential. It returns nil for a
// right credential the limit lets through, wrong for a wrong one within
// the limit, and the 429 (its Retry-After header set) for either when the
// client's attempts are used up.
func (a *App) checkOperatorKey(c echo.Context, matched bool, wrong *Error) *Error {
	client := clientKey(c.Request().RemoteAddr)
	now := a.now()
	if matched {
		wait, ok := a.keyFailures.permit(client, now)
		if ok {
			return nil
		}
		return tooManyKeyFailures(c, wait)
	}
	if wait, limited := a.keyFailures.fail(client, now); limited {
		return tooManyKeyFailures(c, wait)
	}
	return wrong
}

// tooManyKeyFailures is the 429 of a limited client, with Retry-After set
// to wait.
func tooManyKeyFailures(c echo.Context, wait time.Duration) *Error {
	c.Response().Header().Set("Retry-After", retryAfterSeconds(wait))
	return errTooManyKeyFailures
}

// retryAfterSeconds is a Retry-After value: whole seconds, rounded up, at
// least 1.
func retryAfterSeconds(d time.Duration) string {
	s := int64(math.Ceil(d.Seconds()))
	return strconv.FormatInt(max(s, 1), 10)
}
