package app

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage"
)

func TestNoneMatch(t *testing.T) {
	t.Parallel()
	const tag = `W/"0123456789abcdef"`
	tests := []struct {
		name   string
		values []string
		want   bool
	}{
		{name: "no field", values: nil},
		{name: "the tag", values: []string{tag}, want: true},
		{name: "its strong form (weak comparison)", values: []string{`"0123456789abcdef"`}, want: true},
		{name: "another tag", values: []string{`W/"fedcba9876543210"`}},
		{name: "another strong tag", values: []string{`"fedcba9876543210"`}},
		{name: "a list with the tag", values: []string{`"a", W/"b",` + tag + ` , "c"`}, want: true},
		{name: "a list without it", values: []string{`"a", W/"b", "c"`}},
		{name: "the tag in a second field line", values: []string{`"a"`, tag}, want: true},
		{name: "star", values: []string{"*"}, want: true},
		{name: "star with spaces", values: []string{" * "}, want: true},
		{name: "a tag holding a comma", values: []string{`"x,0123456789abcdef"`}},
		{name: "unquoted", values: []string{"0123456789abcdef"}},
		{name: "lower-case weak prefix is not one", values: []string{`w/"0123456789abcdef"`}},
		{name: "malformed element ends the value", values: []string{`"a", bad, ` + tag}},
		{name: "unterminated", values: []string{`"0123456789abcdef`}},
		{name: "a prefix of the tag", values: []string{`W/"0123456789abcde"`}},
		{name: "empty value", values: []string{""}},
		{name: "only commas", values: []string{", ,"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, noneMatch(tt.values, tag))
		})
	}
}

func TestAcceptsGzip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		values []string
		want   bool
	}{
		{name: "no field", values: nil},
		{name: "empty", values: []string{""}},
		{name: "gzip", values: []string{"gzip"}, want: true},
		{name: "upper case", values: []string{"GZIP"}, want: true},
		{name: "x-gzip", values: []string{"x-gzip"}, want: true},
		{name: "among others", values: []string{"br, gzip, deflate"}, want: true},
		{name: "browser-like", values: []string{"deflate, gzip;q=1.0, *;q=0.5"}, want: true},
		{name: "gzip q=0", values: []string{"gzip;q=0"}},
		{name: "gzip q=0.000", values: []string{"gzip; q=0.000"}},
		{name: "gzip q=0.001", values: []string{"gzip;q=0.001"}, want: true},
		{name: "gzip q=1.0", values: []string{"gzip;q=1.0"}, want: true},
		{name: "Q is case-insensitive", values: []string{"gzip;Q=0"}},
		{name: "identity only", values: []string{"identity"}},
		{name: "br only", values: []string{"br"}},
		{name: "star", values: []string{"*"}, want: true},
		{name: "star q=0", values: []string{"*;q=0"}},
		{name: "gzip refused, star accepted", values: []string{"gzip;q=0, *"}},
		{name: "gzip accepted, star refused", values: []string{"*;q=0, gzip;q=0.5"}, want: true},
		{name: "malformed q ignored", values: []string{"gzip;q=2"}},
		{name: "malformed q beside a good one", values: []string{"gzip;q=abc, x-gzip"}, want: true},
		{name: "too many decimals", values: []string{"gzip;q=0.0001"}},
		{name: "second field line", values: []string{"br", "gzip"}, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, acceptsGzip(tt.values))
		})
	}
}

// envelopeBody is a success envelope as respondRaw writes it, with data
// and, when paged, a pagination object.
func envelopeBody(data, timestamp, requestID string, paged bool) []byte {
	s := `{"success":true,"statusCode":200,"message":"m","code":"SUCCESS","data":` + data +
		`,"timestamp":"` + timestamp + `","requestId":"` + requestID + `"`
	if paged {
		s += `,"pagination":{"count":1,"hasNext":false,"limit":20,"offset":0,"lastKey":null}`
	}
	return []byte(s + "}")
}

func TestPageETag(t *testing.T) {
	t.Parallel()
	const org = "org-1"
	base := pageETag(org, envelopeBody(`[{"a":1}]`, "2026-01-01T00:00:00.000Z", "r1", true))
	assert.Regexp(t, `^W/"[0-9a-f]{16}"$`, base)
	tests := []struct {
		name  string
		scope string
		body  []byte
		same  bool
	}{
		{name: "another timestamp and request id", scope: org, body: envelopeBody(`[{"a":1}]`, "2027-05-05T10:11:12.131Z", "another-id", true), same: true},
		{name: "a data byte", scope: org, body: envelopeBody(`[{"a":2}]`, "2026-01-01T00:00:00.000Z", "r1", true)},
		{name: "data holding a timestamp member", scope: org, body: envelopeBody(`[{"timestamp":1}]`, "2026-01-01T00:00:00.000Z", "r1", true)},
		{name: "no pagination", scope: org, body: envelopeBody(`[{"a":1}]`, "2026-01-01T00:00:00.000Z", "r1", false)},
		{name: "another pagination", scope: org, body: bytes.Replace(envelopeBody(`[{"a":1}]`, "2026-01-01T00:00:00.000Z", "r1", true), []byte(`"count":1`), []byte(`"count":2`), 1)},
		{name: "another message", scope: org, body: bytes.Replace(envelopeBody(`[{"a":1}]`, "2026-01-01T00:00:00.000Z", "r1", true), []byte(`"m"`), []byte(`"n"`), 1)},
		{name: "another organization", scope: "org-2", body: envelopeBody(`[{"a":1}]`, "2026-01-01T00:00:00.000Z", "r1", true)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := pageETag(tt.scope, tt.body)
			if tt.same {
				assert.Equal(t, base, got)
			} else {
				assert.NotEqual(t, base, got)
			}
		})
	}
	t.Run("a timestamp member inside data", func(t *testing.T) {
		t.Parallel()
		// A timestamp inside data must not be taken for the envelope's:
		// two pages that differ in data only differ in tag.
		a := envelopeBody(`[{"timestamp":"x"}]`, "t", "r", false)
		b := envelopeBody(`[{"timestamp":"y"}]`, "t", "r", false)
		assert.NotEqual(t, pageETag(org, a), pageETag(org, b))
	})
}

// pageCase is one request to a handler that answers with sendPage.
type pageCase struct {
	name    string
	method  string
	status  int  // the handler's status; 200 when zero
	large   bool // the large body (over gzipMinBytes) rather than the small one
	headers [][2]string

	wantStatus int
	wantTag    bool // an ETag and Vary
	wantGzip   bool
	wantBody   bool
}

func TestSendPage(t *testing.T) {
	t.Parallel()
	small := envelopeBody(`[{"a":1}]`, "2026-01-01T00:00:00.000Z", "r1", true)
	require.Less(t, len(small), gzipMinBytes)
	large := envelopeBody(`["`+strings.Repeat("x", 4*gzipMinBytes)+`"]`, "2026-01-01T00:00:00.000Z", "r1", true)
	largeTag, smallTag := pageETag("org", large), pageETag("org", small)
	strong := strings.TrimPrefix(largeTag, "W/")

	e := echo.New()
	handler := func(c echo.Context) error {
		// What noStoreMiddleware sets on every partner answer.
		c.Response().Header().Set(echo.HeaderCacheControl, "no-store")
		status := http.StatusOK
		if s := c.QueryParam("status"); s != "" {
			status, _ = strconv.Atoi(s)
		}
		body := small
		if c.QueryParam("large") != "" {
			body = large
		}
		return sendPage(c, status, "org", body)
	}
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost} {
		e.Add(m, "/page", handler)
	}

	tests := []pageCase{
		{name: "no header", large: true, wantStatus: 200, wantTag: true, wantBody: true},
		{name: "small page", wantStatus: 200, wantTag: true, wantBody: true},
		{name: "matching tag", large: true, headers: [][2]string{{"If-None-Match", largeTag}}, wantStatus: 304, wantTag: true},
		{name: "matching tag, small page", headers: [][2]string{{"If-None-Match", smallTag}}, wantStatus: 304, wantTag: true},
		{name: "strong form of the tag", large: true, headers: [][2]string{{"If-None-Match", strong}}, wantStatus: 304, wantTag: true},
		{name: "non-matching tag", large: true, headers: [][2]string{{"If-None-Match", `W/"0000000000000000"`}}, wantStatus: 200, wantTag: true, wantBody: true},
		{name: "the other page's tag", large: true, headers: [][2]string{{"If-None-Match", smallTag}}, wantStatus: 200, wantTag: true, wantBody: true},
		{name: "list with a match", large: true, headers: [][2]string{{"If-None-Match", `"a", ` + largeTag + `, "b"`}}, wantStatus: 304, wantTag: true},
		{name: "star", large: true, headers: [][2]string{{"If-None-Match", "*"}}, wantStatus: 304, wantTag: true},
		{name: "HEAD", method: http.MethodHead, large: true, wantStatus: 200, wantTag: true},
		{name: "HEAD with a match", method: http.MethodHead, large: true, headers: [][2]string{{"If-None-Match", largeTag}}, wantStatus: 304, wantTag: true},
		{name: "gzip asked", large: true, headers: [][2]string{{"Accept-Encoding", "gzip, deflate"}}, wantStatus: 200, wantTag: true, wantGzip: true, wantBody: true},
		{name: "gzip not asked", large: true, headers: [][2]string{{"Accept-Encoding", "br, identity"}}, wantStatus: 200, wantTag: true, wantBody: true},
		{name: "gzip q=0", large: true, headers: [][2]string{{"Accept-Encoding", "gzip;q=0"}}, wantStatus: 200, wantTag: true, wantBody: true},
		{name: "small body not compressed", headers: [][2]string{{"Accept-Encoding", "gzip"}}, wantStatus: 200, wantTag: true, wantBody: true},
		{name: "HEAD with gzip", method: http.MethodHead, large: true, headers: [][2]string{{"Accept-Encoding", "gzip"}}, wantStatus: 200, wantTag: true, wantGzip: true},
		{name: "gzip and a matching tag", large: true, headers: [][2]string{{"Accept-Encoding", "gzip"}, {"If-None-Match", largeTag}}, wantStatus: 304, wantTag: true},
		{name: "gzip and another tag", large: true, headers: [][2]string{{"Accept-Encoding", "gzip"}, {"If-None-Match", `"nope"`}}, wantStatus: 200, wantTag: true, wantGzip: true, wantBody: true},
		{name: "POST is no page", method: http.MethodPost, large: true, headers: [][2]string{{"Accept-Encoding", "gzip"}, {"If-None-Match", "*"}}, wantStatus: 200, wantBody: true},
		{name: "201 is no page", status: 201, large: true, headers: [][2]string{{"Accept-Encoding", "gzip"}, {"If-None-Match", "*"}}, wantStatus: 201, wantBody: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			method := tt.method
			if method == "" {
				method = http.MethodGet
			}
			target := "/page?x=1"
			want, wantTag := small, smallTag
			if tt.large {
				target += "&large=1"
				want, wantTag = large, largeTag
			}
			if tt.status != 0 {
				target += "&status=" + strconv.Itoa(tt.status)
			}
			req := httptest.NewRequest(method, target, nil)
			for _, h := range tt.headers {
				req.Header.Add(h[0], h[1])
			}
			// A real server, so that HEAD and 304 lose their bodies as
			// they do on the wire.
			srv := httptest.NewServer(e)
			defer srv.Close()
			req.RequestURI, req.URL.Scheme, req.URL.Host = "", "http", srv.Listener.Addr().String()
			tr := &http.Transport{DisableCompression: true}
			defer tr.CloseIdleConnections()
			res, err := tr.RoundTrip(req)
			require.NoError(t, err)
			defer res.Body.Close()
			got, err := io.ReadAll(res.Body)
			require.NoError(t, err)

			require.Equal(t, tt.wantStatus, res.StatusCode)
			assert.Equal(t, "no-store", res.Header.Get("Cache-Control"), "Cache-Control is kept")
			if tt.wantTag {
				assert.Equal(t, wantTag, res.Header.Get("ETag"))
				assert.Equal(t, "Accept-Encoding", res.Header.Get("Vary"))
			} else {
				assert.Empty(t, res.Header.Get("ETag"))
				assert.Empty(t, res.Header.Get("Vary"))
			}
			if tt.wantStatus == http.StatusNotModified {
				assert.Empty(t, got, "a 304 has no body")
				assert.Empty(t, res.Header.Get("Content-Type"))
				assert.Empty(t, res.Header.Get("Content-Encoding"))
				return
			}
			assert.Equal(t, "application/json", res.Header.Get("Content-Type"))
			if tt.wantGzip {
				assert.Equal(t, "gzip", res.Header.Get("Content-Encoding"))
			} else {
				assert.Empty(t, res.Header.Get("Content-Encoding"))
			}
			if !tt.wantBody {
				assert.Empty(t, got, "HEAD")
				if tt.wantGzip {
					assert.Less(t, res.ContentLength, int64(len(want)))
				} else {
					assert.Equal(t, int64(len(want)), res.ContentLength)
				}
				return
			}
			if tt.wantTag {
				assert.Equal(t, int64(len(got)), res.ContentLength, "Content-Length")
			}
			if tt.wantGzip {
				zr, err := gzip.NewReader(bytes.NewReader(got))
				require.NoError(t, err)
				got, err = io.ReadAll(zr)
				require.NoError(t, err)
			}
			assert.Equal(t, want, got, "the identity bytes")
		})
	}
}

// TestJSONPageBytes holds jsonPage to the bytes c.JSON writes for the same
// envelope, compact and with ?pretty, so that a request that asks for
// neither ETag nor gzip gets what it got before.
func TestJSONPageBytes(t *testing.T) {
	t.Parallel()
	a, _ := newTestApp(t, Options{})
	// The same clock reading for both envelopes.
	now := time.Date(2026, 11, 27, 1, 2, 3, 4e6, time.UTC)
	a.now = func() time.Time { return now }
	data := []UserListItem{{UserID: "u1", Email: "a@b.example"}, {UserID: "u2", Email: "<c>&d@e.example"}}
	info := storage.PageInfo{Count: 2, HasNext: true, Limit: 2, LastKey: "k"}
	for _, target := range []string{"/", "/?pretty", "/?pretty=1&x=2"} {
		t.Run(target, func(t *testing.T) {
			t.Parallel()
			run := func(h echo.HandlerFunc) *httptest.ResponseRecorder {
				e := echo.New()
				req := httptest.NewRequest(http.MethodGet, target, nil)
				req.Header.Set(headerRequestID, "fixed-id")
				rec := httptest.NewRecorder()
				c := e.NewContext(req, rec)
				c.Set(ctxRequestID, "fixed-id")
				require.NoError(t, h(c))
				return rec
			}
			// The envelope built as page builds it.
			want := run(func(c echo.Context) error {
				return c.JSON(http.StatusOK, envelope{Success: true, StatusCode: 200, Message: "m", Code: codeSuccess,
					Data: data, Timestamp: timestamp(now), RequestID: requestID(c), Pagination: pagination(info)})
			})
			got := run(func(c echo.Context) error { return a.jsonPage(c, "m", data, info) })
			assert.Equal(t, want.Body.String(), got.Body.String())
			assert.Equal(t, want.Code, got.Code)
			assert.Equal(t, want.Header().Get("Content-Type"), got.Header().Get("Content-Type"))
			assert.True(t, json.Valid(got.Body.Bytes()))
		})
	}
}
