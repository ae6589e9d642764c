package app

import (
	"net"
	"net/netip"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/rxgate/rxgate/config"
)

// The operator listener's guards against a web page its operator opens
// (issue 27, L3). Such a page can rebind its own DNS name to 127.0.0.1 and
// then call the listener as a same-origin page: the Host allowlist here
// refuses a request that names such a host, and the key failure limit
// (key_limit.go) stops a page, or anything else, from guessing the
// operator key at the speed of the network.

// adminHostMiddleware refuses with 421 a request to the operator listener
// whose Host is not one the listener answers for (hostAllowlist). It is
// the operator listener's only; the partner listener answers any Host.
func (a *App) adminHostMiddleware() echo.MiddlewareFunc {
	allowed := newHostAllowlist(a.cfg.Admin)
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if !allowed.permits(c.Request().Host) {
				return errMisdirected
			}
			return next(c)
		}
	}
}

// hostAllowlist holds the host names the operator listener answers for,
// lower-case and without a trailing dot; every IP literal is answered
// too. DNS rebinding needs a name the attacker controls: an IP literal
// cannot be rebound, nor can localhost (browsers resolve it themselves),
// and the names the operator configured are the operator's own.
//
// The port is not checked. A rebinding page is reached at the listener's
// own port (the browser must connect to it), so a port check would refuse
// nothing the name check lets through, while it would refuse the operator
// who reaches the listener through a port forward, a container's
// published port or a proxy on another port.
type hostAllowlist map[string]bool

func newHostAllowlist(admin config.Admin) hostAllowlist {
	l := hostAllowlist{"localhost": true}
	if admin.PublicURL != "" {
		if u, err := url.Parse(admin.PublicURL); err == nil && u.Hostname() != "" {
			l[canonicalHost(u.Hostname())] = true
		}
	}
	for _, h := range admin.AllowedHosts {
		l[canonicalHost(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"))] = true
	}
	return l
}

// permits reports whether a request with this Host header (a name or an
// IP literal, with or without a port) is answered. An empty Host (an
// HTTP/1.0 request without one, as some health checkers send) names
// nothing that could be rebound, and browsers always send one: it passes.
func (l hostAllowlist) permits(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if host == "" {
		return true
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return true
	}
	return l[canonicalHost(host)]
}

// canonicalHost is a host name as the allowlist keeps it: lower-case,
// without the trailing dot of a fully qualified name.
func canonicalHost(h string) string {
	return strings.ToLower(strings.TrimSuffix(h, "."))
}
