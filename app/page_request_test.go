package app

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/require"
)

// TestPageRequestFastPath: pageRequest's in-place reading of an unescaped
// query answers what parsing it (query, pageParams) answers.
func TestPageRequestFastPath(t *testing.T) {
	e := echo.New()
	for _, raw := range []string{
		"", "limit=20", "limit=1", "limit=0", "limit=101", "limit=-1", "limit=+5", "limit=05", "limit=x", "limit=", "limit",
		"limit=20&limit=30", "limit=abc&limit=20", "lastKey=abc", "lastKey=a&lastKey=b", "lastKey=&limit=3",
		"&&limit=4&&", "=&limit=4", "other=1&limit=7&lastKey=k", "LIMIT=5", "limit=5=6", "lastKey=a=b",
		"limit=9999999999999999999999", "pretty&limit=2",
	} {
		c := e.NewContext(httptest.NewRequest(http.MethodGet, "/x?"+raw, nil), httptest.NewRecorder())
		got, gotErr := pageRequest(c, 20, 100)
		q, err := parseQuery(raw)
		require.NoError(t, err, raw)
		want, wantErr := pageParams(q, 20, 100)
		require.Equal(t, want, got, raw)
		require.Equal(t, wantErr == nil, gotErr == nil, raw)
		if wantErr != nil {
			require.Equal(t, wantErr.Error(), gotErr.Error(), raw)
		}
	}
}
