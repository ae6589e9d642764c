package app

import (
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
)

const (
	headerRequestID          = "X-Request-Id"
	headerOrganizationSecret = "X-Organization-Secret"
	ctxRequestID             = "rxgate.requestID"
)

// requestIDMiddleware gives every request an id: the caller's X-Request-Id
// when it is a short token of safe characters, a new uuid otherwise. It is
// echoed in the X-Request-Id header and the envelope's requestId.
func (a *App) requestIDMiddleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		id := c.Request().Header.Get(headerRequestID)
		if !safeRequestID(id) {
			id = uuid.NewString()
		}
		c.Set(ctxRequestID, id)
		c.Response().Header().Set(headerRequestID, id)
		return next(c)
	}
}

func safeRequestID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return true
}

func requestID(c echo.Context) string {
	id, _ := c.Get(ctxRequestID).(string)
	return id
}

// logMiddleware logs one line per request: id, method, route template,
// status and latency. The route is the template (/v1/organizations/:id/...),
// never the raw path or query, and no header or body is logged, so tokens,
// secrets and patient data stay out of the log.
func (a *App) logMiddleware(api string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			start := time.Now()
			err := next(c)
			if err != nil {
				c.Error(err)
			}
			status := c.Response().Status
			took := time.Since(start)
			level := slog.LevelInfo
			if status >= 500 {
				level = slog.LevelError
			}
			// Echo gives the route template, or "" when no route matched:
			// never a label (or a log field) made of what the client sent.
			route := c.Path()
			if route == "" {
				route = "unmatched"
			}
			method := c.Request().Method
			if !knownMethods[method] {
				method = "other"
			}
			a.log.LogAttrs(c.Request().Context(), level, "request",
				slog.String("requestId", requestID(c)),
				slog.String("method", method),
				slog.String("route", route),
				slog.Int("status", status),
				slog.Duration("latency", took),
			)
			a.metrics.observeRequest(api, route, method, status, took)
			return nil
		}
	}
}

// knownMethods are the methods a metric label or a log field names; any
// other is "other".
var knownMethods = map[string]bool{
	http.MethodGet: true, http.MethodHead: true, http.MethodPost: true, http.MethodPut: true,
	http.MethodPatch: true, http.MethodDelete: true, http.MethodOptions: true,
}

// recoverMiddleware turns a panic into a 500 with the fixed message; the
// panic value and stack go to the log only.
func (a *App) recoverMiddleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			if r := recover(); r != nil {
				if r == http.ErrAbortHandler {
					panic(r)
				}
				err = fmt.Errorf("app: panic: %v\n%s", r, debug.Stack())
			}
		}()
		return next(c)
	}
}

// closeChunkedMiddleware closes the connection after answering a request
// that came with a Transfer-Encoding. A request with both Content-Length
// and Transfer-Encoding is how a request is smuggled past a proxy that
// frames by Content-Length, and RFC 9112 section 6.1 says the server must
// close the connection after it. net/http drops the Content-Length of such
// a request before a handler runs, so "both" cannot be told from
// "Transfer-Encoding alone": every request with a Transfer-Encoding (a
// chunked upload, which API clients rarely send) has its connection closed,
// which costs a client one new connection and nothing else.
func closeChunkedMiddleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if len(c.Request().TransferEncoding) > 0 {
			c.Response().Header().Set(echo.HeaderConnection, "close")
		}
		return next(c)
	}
}

// cacheRule is what noStoreMiddleware applies on one listener, by route
// template (c.Path()).
//
// The rule (issue 27, L4): every answer of both listeners carries
// Cache-Control: no-store, errors included, so that no cache keeps a
// token, a secret or patient data. That covers the partner API's
// authenticated routes, POST {base_url}/v1/token, the whole operator API
// and /metrics, the console's pages, 404 and 405 answers, and health and
// readiness (public, but a cached probe answer is a stale one). The only
// exceptions are the routes that answer every caller with the same public,
// secret-free content; their handlers set their own caching headers, if
// any:
//   - the OpenAPI documents ({base_url}/v1/openapi.json,
//     /admin/v1/openapi.json) and the reference page ({base_url}/docs):
//     none;
//   - the built-in issuer's JWKS (/.well-known/jwks.json): public,
//     max-age=300, so that verifiers may keep it;
//   - the console's stylesheet and icon (/console/static/...): no-cache.
//
// An error answer of those routes (a 421 from the operator listener's Host
// check, a 5xx) is no answer of public content: it is no-store too.
//
// A new route is therefore no-store unless it is listed here. The routes
// that mint tokens ({base_url}/v1/token, /admin/v1/tokens) also carry
// Pragma: no-cache, as RFC 6749 section 5.1 asks of a token answer.
type cacheRule struct {
	cacheable map[string]bool // route templates left to their handlers
	tokens    map[string]bool // route templates that mint tokens
}

// cacheRuleFor returns the rule of the listener api (apiPartner or
// apiAdmin).
func (a *App) cacheRuleFor(api string) cacheRule {
	set := func(routes ...string) map[string]bool {
		m := make(map[string]bool, len(routes))
		for _, r := range routes {
			m[r] = true
		}
		return m
	}
	if api == apiPartner {
		base := a.cfg.HTTP.BasePath
		return cacheRule{
			cacheable: set(base+"/v1/openapi.json", base+"/docs", "/.well-known/jwks.json"),
			tokens:    set(base + "/v1/token"),
		}
	}
	return cacheRule{
		cacheable: set("/admin/v1/openapi.json", "/console/static/console.css", "/console/static/favicon.svg"),
		tokens:    set("/admin/v1/tokens"),
	}
}

// noStoreMiddleware applies rule (see cacheRule). It runs after routing,
// so it sees the route template, never what the client wrote, and sets
// the headers before the handler and any middleware that can answer (the
// body limit) run, so that an answer made by the one error handler, a
// panic's 500 or the console's error page carries them too.
func noStoreMiddleware(rule cacheRule) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			route := c.Path()
			if rule.cacheable[route] {
				res := c.Response()
				res.Before(func() {
					if res.Status >= http.StatusBadRequest {
						res.Header().Set(echo.HeaderCacheControl, "no-store")
					}
				})
				return next(c)
			}
			h := c.Response().Header()
			h[echo.HeaderCacheControl] = noStoreValue
			if rule.tokens[route] {
				h.Set("Pragma", "no-cache")
			}
			return next(c)
		}
	}
}

// bodyLimitMiddleware refuses bodies over http.max_body_bytes with 413.
func (a *App) bodyLimitMiddleware(next echo.HandlerFunc) echo.HandlerFunc {
	limit := a.cfg.HTTP.MaxBodyBytes
	return func(c echo.Context) error {
		req := c.Request()
		if req.ContentLength > limit {
			// Close instead of reading the unwanted body to reuse the
			// connection.
			c.Response().Header().Set(echo.HeaderConnection, "close")
			return errTooLarge
		}
		req.Body = http.MaxBytesReader(c.Response(), req.Body, limit)
		return next(c)
	}
}

// bearerToken returns the token of an "Authorization: Bearer" header.
func bearerToken(r *http.Request) (string, bool) {
	h := r.Header.Get(echo.HeaderAuthorization)
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}
