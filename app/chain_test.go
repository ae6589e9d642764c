package app

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/require"
)

// TestComposedChain: the chain composed once runs, in order, around the
// handler Echo's router picked for each request: the route's, the 404's
// and the 405's.
func TestComposedChain(t *testing.T) {
	mark := func(name string) echo.MiddlewareFunc {
		return func(next echo.HandlerFunc) echo.HandlerFunc {
			return func(c echo.Context) error {
				c.Response().Header().Add("X-Chain", name)
				return next(c)
			}
		}
	}
	e := echo.New()
	e.Use(composedChain([]echo.MiddlewareFunc{mark("a"), mark("b")}))
	e.GET("/data", func(c echo.Context) error { return c.String(http.StatusOK, "data") })
	e.GET("/other", func(c echo.Context) error { return c.String(http.StatusOK, "other") })
	for _, tc := range []struct {
		method, target string
		status         int
		body           string
	}{
		{http.MethodGet, "/data", http.StatusOK, "data"},
		{http.MethodGet, "/other", http.StatusOK, "other"},
		{http.MethodGet, "/nope", http.StatusNotFound, "Not Found"},
		{http.MethodDelete, "/data", http.StatusMethodNotAllowed, "Method Not Allowed"},
		{http.MethodGet, "/data", http.StatusOK, "data"},
	} {
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.target, nil))
		require.Equal(t, tc.status, rec.Code, tc.target)
		require.Contains(t, rec.Body.String(), tc.body, tc.target)
		require.Equal(t, "a,b", strings.Join(rec.Header().Values("X-Chain"), ","), tc.target)
	}
}
