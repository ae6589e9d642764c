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
