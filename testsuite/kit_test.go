package testsuite_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/testsuite"
)

// recorder is a testing.TB that records failures instead of failing, to
// test the kit's own assertions. Only the methods assert uses are
// implemented; the embedded nil TB makes any other call panic.
type recorder struct {
	testing.TB
	mu       sync.Mutex
	failures []string
}

func (r *recorder) Helper() {}

func (r *recorder) Name() string { return "recorder" }

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures = append(r.failures, fmt.Sprintf(format, args...))
}

const (
	goodSuccess = `{"success":true,"statusCode":200,"message":"ok","code":"SUCCESS","data":{"a":1},` +
		`"timestamp":"2026-01-02T03:04:05.678Z","requestId":"rid-1"}`
	goodError = `{"success":false,"statusCode":422,"code":"VALIDATION_ERROR","error":{"type":"https://errors.example.test/validation-error",` +
		`"title":"Validation failed","detail":"There were some problems with your input.",` +
		`"validation":[{"field":"name","message":"is required","code":"VALIDATION_ERROR"}]},` +
		`"timestamp":"2026-01-02T03:04:05Z","requestId":"rid-1","meta":{"apiVersion":"1.0"}}`
)

// TestKitCheckEnvelope checks that Env.CheckEnvelope accepts the spec's
// envelopes and flags each kind of deviation.
func TestKitCheckEnvelope(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		status      int
		requestID   string
		contentType string
		body        string
		wantOK      bool
	}{
		{name: "good success", status: 200, body: goodSuccess, wantOK: true},
		{name: "good error", status: 422, body: goodError, wantOK: true},
		{name: "created without code", status: 201, body: strings.Replace(strings.Replace(goodSuccess, `"code":"SUCCESS",`, "", 1), `200`, `201`, 1), wantOK: true},
		{name: "not JSON", status: 200, body: `ok`},
		{name: "not an object", status: 200, body: `[1]`},
		{name: "wrong content type", status: 200, body: goodSuccess, contentType: "text/plain"},
		{name: "statusCode differs", status: 201, body: goodSuccess},
		{name: "statusCode a string", status: 200, body: strings.Replace(goodSuccess, `"statusCode":200`, `"statusCode":"200"`, 1)},
		{name: "header differs from requestId", status: 200, body: goodSuccess, requestID: "rid-2"},
		{name: "no requestId", status: 200, body: strings.Replace(goodSuccess, `"requestId":"rid-1"`, `"requestId":""`, 1), requestID: "-"},
		{name: "timestamp not UTC", status: 200, body: strings.Replace(goodSuccess, `.678Z`, `.678+02:00`, 1)},
		{name: "timestamp zero offset without Z", status: 200, body: strings.Replace(goodSuccess, `.678Z`, `.678+00:00`, 1)},
		{name: "timestamp not RFC 3339", status: 200, body: strings.Replace(goodSuccess, `2026-01-02T03:04:05.678Z`, `2026-01-02 03:04:05`, 1)},
		{name: "success false on 200", status: 200, body: strings.Replace(goodSuccess, `"success":true`, `"success":false`, 1)},
		{name: "no message on success", status: 200, body: strings.Replace(goodSuccess, `"message":"ok",`, "", 1)},
		{name: "no data on success", status: 200, body: strings.Replace(goodSuccess, `,"data":{"a":1}`, "", 1)},
		{name: "wrong code on 200", status: 200, body: strings.Replace(goodSuccess, `"SUCCESS"`, `"OK"`, 1)},
		{name: "success true on error", status: 422, body: strings.Replace(goodError, `"success":false`, `"success":true`, 1)},
		{name: "error type under another base", status: 422, body: strings.Replace(goodError, `errors.example.test`, `errors.other.test`, 1)},
		{name: "error type without slug", status: 422, body: strings.Replace(goodError, `/validation-error"`, `/"`, 1)},
		{name: "empty title", status: 422, body: strings.Replace(goodError, `"title":"Validation failed"`, `"title":""`, 1)},
		{name: "no detail", status: 422, body: strings.Replace(goodError, `"detail":"There were some problems with your input.",`, "", 1)},
		{name: "validation entry with another code", status: 422, body: strings.Replace(goodError, `"is required","code":"VALIDATION_ERROR"`, `"is required","code":"E1"`, 1)},
		{name: "validation entry without field", status: 422, body: strings.Replace(goodError, `"field":"name",`, "", 1)},
		{name: "no meta", status: 422, body: strings.Replace(goodError, `,"meta":{"apiVersion":"1.0"}`, "", 1)},
		{name: "wrong apiVersion", status: 422, body: strings.Replace(goodError, `"1.0"`, `"1"`, 1)},
		{name: "no error object", status: 422, body: `{"success":false,"statusCode":422,"timestamp":"2026-01-02T03:04:05Z","requestId":"rid-1","meta":{"apiVersion":"1.0"}}`},
		{name: "wrong code on 404", status: 404, body: strings.Replace(strings.Replace(goodError, `422`, `404`, 1), `VALIDATION_ERROR","error"`, `NOT_FOUND","error"`, 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				ct := tt.contentType
				if ct == "" {
					ct = "application/json"
				}
				w.Header().Set("Content-Type", ct)
				switch tt.requestID {
				case "":
					w.Header().Set("X-Request-Id", "rid-1")
				case "-":
				default:
					w.Header().Set("X-Request-Id", tt.requestID)
				}
				w.WriteHeader(tt.status)
				_, _ = w.Write([]byte(tt.body))
			}))
			t.Cleanup(srv.Close)
			env := &testsuite.Env{BaseURL: srv.URL, ErrorsBase: "https://errors.example.test"}
			r := env.Do(t, testsuite.Request{URL: "/"})

			rec := &recorder{}
			ok := env.CheckEnvelope(rec, r)
			assert.Equal(t, tt.wantOK, ok, "CheckEnvelope's result; failures: %v", rec.failures)
			assert.Equal(t, tt.wantOK, len(rec.failures) == 0, "failures reported: %v", rec.failures)
		})
	}
}

// TestKitResponse checks the Response accessors.
func TestKitResponse(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Request-Id", "rid-1")
		w.WriteHeader(http.StatusUnprocessableEntity)
		_, _ = fmt.Fprintf(w, `{"requestId":"rid-1","echo":{"method":%q,"auth":%q,"ct":%q,"len":%d},`+
			`"error":{"type":"https://errors.example.test/validation-error","validation":[{"field":"a"},{"field":"b.c"}]}}`,
			r.Method, r.Header.Get("Authorization"), r.Header.Get("Content-Type"), r.ContentLength)
	}))
	t.Cleanup(srv.Close)
	env := &testsuite.Env{BaseURL: srv.URL + "/base", ErrorsBase: "https://errors.example.test"}

	r := env.Do(t, testsuite.Request{Method: http.MethodPost, URL: "/x", Token: "tok", Body: map[string]any{"k": "v"}})
	assert.Equal(t, "POST", r.String(t, "echo.method"))
	assert.Equal(t, "Bearer tok", r.String(t, "echo.auth"))
	assert.Equal(t, "application/json", r.String(t, "echo.ct"))
	assert.Equal(t, "validation-error", r.Slug())
	assert.Equal(t, []string{"a", "b.c"}, r.ValidationFields())
	assert.Equal(t, "rid-1", r.RequestID())
	v, ok := r.Get("error.validation.1.field")
	assert.True(t, ok)
	assert.Equal(t, "b.c", v)
	_, ok = r.Get("error.validation.2")
	assert.False(t, ok)

	r = env.Do(t, testsuite.Request{Method: http.MethodPost, Body: strings.NewReader("streamed"), ContentType: testsuite.NoContentType})
	assert.Equal(t, "", r.String(t, "echo.ct"))
	n, _ := r.Get("echo.len")
	assert.Equal(t, float64(-1), n, "an io.Reader body is streamed without a length")

	require.NotEqual(t, testsuite.Unique("a-"), testsuite.Unique("a-"))
}
