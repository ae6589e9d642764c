package app

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/invopop/validation"
	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/config"
	"github.com/rxgate/rxgate/storage"
	"github.com/rxgate/rxgate/storage/badger"
)

func TestToAPIError(t *testing.T) {
	t.Parallel()
	custom := errConflict("A user with this email already exists.")
	tests := []struct {
		name             string
		err              error
		validationStatus int // 422 unless set
		wantStatus       int
		wantSlug         string
		wantCode         string
		wantValidation   []FieldError
		wantSame         *Error // the error itself is returned
		wantCause        bool   // the original error is kept for the log
	}{
		{
			name: "not found, wrapped", err: fmt.Errorf("storage: get patient %s: %w", "p1", storage.ErrNotFound),
			wantStatus: http.StatusNotFound, wantSlug: slugNotFound, wantCode: codeNotFound, wantCause: true,
		},
		{
			name: "not found, wrapped twice", err: fmt.Errorf("app: %w", fmt.Errorf("storage: %w", storage.ErrNotFound)),
			wantStatus: http.StatusNotFound, wantSlug: slugNotFound, wantCode: codeNotFound, wantCause: true,
		},
		{
			name: "already exists, wrapped", err: fmt.Errorf("storage: create user: %w", storage.ErrAlreadyExists),
			wantStatus: http.StatusConflict, wantSlug: slugConflict, wantCode: codeConflict, wantCause: true,
		},
		{
			name: "store busy", err: fmt.Errorf("storage: update patient: %w: could not serialize", storage.ErrConflict),
			wantStatus: http.StatusServiceUnavailable, wantSlug: slugServiceUnavailable, wantCode: codeUnavailable, wantCause: true,
		},
		{
			name: "store unavailable", err: fmt.Errorf("storage: create prescription: %w: cannot connect", storage.ErrUnavailable),
			wantStatus: http.StatusServiceUnavailable, wantSlug: slugServiceUnavailable, wantCode: codeUnavailable, wantCause: true,
		},
		{
			name: "bad cursor", err: fmt.Errorf("storage: list prescriptions: %w", storage.ErrBadCursor),
			wantStatus: http.StatusBadRequest, wantSlug: slugValidation, wantCode: codeValidation, wantCause: true,
			wantValidation: []FieldError{{Field: "lastKey", Message: "is not a cursor issued for this list", Code: codeValidation}},
		},
		{
			name: "validation errors, sorted, with the operation's status",
			err: validation.Errors{
				"sex":   errors.New("must be one of M, F, I, N"),
				"email": errors.New("must be a valid email address"),
				"phone": errors.New("must be an Australian phone number"),
			},
			wantStatus: http.StatusUnprocessableEntity, wantSlug: slugValidation, wantCode: codeValidation,
			wantValidation: []FieldError{
				{Field: "email", Message: "must be a valid email address", Code: codeValidation},
				{Field: "phone", Message: "must be an Australian phone number", Code: codeValidation},
				{Field: "sex", Message: "must be one of M, F, I, N", Code: codeValidation},
			},
		},
		{
			name: "validation errors with status 400", validationStatus: http.StatusBadRequest,
			err:        validation.Errors{"name": errors.New("cannot be blank")},
			wantStatus: http.StatusBadRequest, wantSlug: slugValidation, wantCode: codeValidation,
			wantValidation: []FieldError{{Field: "name", Message: "cannot be blank", Code: codeValidation}},
		},
		{
			name: "nested validation errors give dotted paths",
			err: validation.Errors{
				"australian_address": validation.Errors{
					"postcode": errors.New("must be exactly 4 digits"),
					"state":    errors.New("must be a valid value"),
				},
				"given_name": errors.New("must not be null"),
				"a": validation.Errors{
					"b": validation.Errors{"c": errors.New("deep")},
				},
			},
			wantStatus: http.StatusUnprocessableEntity, wantSlug: slugValidation, wantCode: codeValidation,
			wantValidation: []FieldError{
				{Field: "a.b.c", Message: "deep", Code: codeValidation},
				{Field: "australian_address.postcode", Message: "must be exactly 4 digits", Code: codeValidation},
				{Field: "australian_address.state", Message: "must be a valid value", Code: codeValidation},
				{Field: "given_name", Message: "must not be null", Code: codeValidation},
			},
		},
		{
			name:       "wrapped validation errors",
			err:        fmt.Errorf("app: %w", validation.Errors{"phone": errors.New("bad")}),
			wantStatus: http.StatusUnprocessableEntity, wantSlug: slugValidation, wantCode: codeValidation,
			wantValidation: []FieldError{{Field: "phone", Message: "bad", Code: codeValidation}},
		},
		{
			name: "validation internal error", err: validation.NewInternalError(errors.New("rule exploded: SECRET-789")),
			wantStatus: http.StatusInternalServerError, wantSlug: slugInternal, wantCode: codeInternal, wantCause: true,
		},
		{
			name: "echo not found", err: echo.ErrNotFound,
			wantStatus: http.StatusNotFound, wantSlug: slugNotFound, wantCode: codeNotFound, wantCause: true,
		},
		{
			name: "echo method not allowed", err: echo.ErrMethodNotAllowed,
			wantStatus: http.StatusMethodNotAllowed, wantSlug: slugMethodNotAllowed, wantCode: codeMethodNotAllowed, wantCause: true,
		},
		{
			name: "echo payload too large", err: echo.NewHTTPError(http.StatusRequestEntityTooLarge, "body of 5 MB"),
			wantStatus: http.StatusRequestEntityTooLarge, wantSlug: slugPayloadTooLarge, wantCode: codeTooLarge, wantCause: true,
		},
		{
			name: "echo unsupported media type", err: echo.ErrUnsupportedMediaType,
			wantStatus: http.StatusUnsupportedMediaType, wantSlug: slugUnsupportedMedia, wantCode: codeUnsupportedMedia, wantCause: true,
		},
		{
			name: "other echo client error", err: echo.ErrTeapot,
			wantStatus: http.StatusBadRequest, wantSlug: slugBadRequest, wantCode: codeBadRequest, wantCause: true,
		},
		{
			name: "echo server error", err: echo.NewHTTPError(http.StatusInternalServerError, "SECRET-echo"),
			wantStatus: http.StatusInternalServerError, wantSlug: slugInternal, wantCode: codeInternal, wantCause: true,
		},
		{
			name: "max bytes", err: fmt.Errorf("read: %w", &http.MaxBytesError{Limit: 10}),
			wantStatus: http.StatusRequestEntityTooLarge, wantSlug: slugPayloadTooLarge, wantCode: codeTooLarge, wantCause: true,
		},
		{
			name: "api error passes through", err: custom, wantSame: custom,
			wantStatus: http.StatusConflict, wantSlug: slugConflict, wantCode: codeConflict,
		},
		{
			name: "wrapped api error passes through", err: fmt.Errorf("app: %w", custom), wantSame: custom,
			wantStatus: http.StatusConflict, wantSlug: slugConflict, wantCode: codeConflict,
		},
		{
			name: "unknown error", err: errors.New("badger: value log truncated: SECRET-000 patient Jane Citizen"),
			wantStatus: http.StatusInternalServerError, wantSlug: slugInternal, wantCode: codeInternal, wantCause: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			status := tt.validationStatus
			if status == 0 {
				status = http.StatusUnprocessableEntity
			}
			got := toAPIError(tt.err, status)
			require.NotNil(t, got)
			if tt.wantSame != nil {
				assert.Same(t, tt.wantSame, got)
			}
			assert.Equal(t, tt.wantStatus, got.Status)
			assert.Equal(t, tt.wantSlug, got.Slug)
			assert.Equal(t, tt.wantCode, got.Code)
			assert.Equal(t, tt.wantValidation, got.Validation)
			assert.NotEmpty(t, got.Title)
			assert.NotEmpty(t, got.Detail)
			if tt.wantCause {
				assert.ErrorIs(t, got, tt.err, "the cause is kept for the log")
			}
			switch {
			case got.Status == http.StatusServiceUnavailable:
				// A fixed message of its own: try again.
				assert.Contains(t, []string{errStoreUnavailable.Detail, errStoreBusy.Detail}, got.Detail)
				assert.Empty(t, got.Validation)
			case got.Status >= http.StatusInternalServerError:
				assert.Equal(t, titleInternal, got.Title)
				assert.Equal(t, detailInternal, got.Detail)
				assert.Empty(t, got.Validation)
			}
			// Nothing the client sees repeats the error's text.
			client := got.Title + " " + got.Detail
			for _, v := range got.Validation {
				client += " " + v.Field + " " + v.Message
			}
			if got.Status >= http.StatusInternalServerError || got.Slug != slugValidation {
				assert.NotContains(t, client, tt.err.Error())
				assert.NotContains(t, client, "SECRET")
			}
		})
	}
}

// TestToAPIErrorSharedErrorsUnchanged checks that attaching a cause to one
// of the shared echo errors does not change the shared value.
func TestToAPIErrorSharedErrorsUnchanged(t *testing.T) {
	t.Parallel()
	before := *echoErrors[http.StatusNotFound]
	got := toAPIError(echo.ErrNotFound, http.StatusUnprocessableEntity)
	assert.NotSame(t, echoErrors[http.StatusNotFound], got)
	assert.Equal(t, before, *echoErrors[http.StatusNotFound])
}

// lockedBuffer is an io.Writer safe for the App's concurrent logging.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// records parses the JSON log lines written so far.
func (l *lockedBuffer) records(tb testing.TB) []map[string]any {
	tb.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(l.String()))
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		var rec map[string]any
		require.NoError(tb, json.Unmarshal(sc.Bytes(), &rec), "log line %s", sc.Text())
		out = append(out, rec)
	}
	require.NoError(tb, sc.Err())
	return out
}

// newLeakTestApp builds a real App on an in-memory store with the built-in
// issuer, logging JSON to log. Both are closed when the test ends.
func newLeakTestApp(tb testing.TB, log *lockedBuffer) *App {
	tb.Helper()
	cfg := config.Defaults()
	cfg.Storage.InMemory = true
	cfg.Auth.BuiltinIssuer = true
	cfg.HTTP.Listen = "127.0.0.1:0"
	cfg.Admin.Listen = "127.0.0.1:0"
	require.NoError(tb, cfg.Validate())

	store, err := badger.Open(badger.Options{InMemory: true})
	require.NoError(tb, err)
	tb.Cleanup(func() { assert.NoError(tb, store.Close()) })

	now := time.Date(2026, 3, 10, 9, 0, 0, 0, time.UTC)
	a, err := New(cfg, store, Options{
		Logger: slog.New(slog.NewJSONHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Now:    func() time.Time { return now },
	})
	require.NoError(tb, err)
	tb.Cleanup(func() { assert.NoError(tb, a.Shutdown(context.Background())) })
	return a
}

// TestInternalErrorsDoNotLeak sends requests whose handlers fail with
// secrets in the error through the App's real middleware and error handler:
// the client gets the spec's 500 envelope with a fixed message, the log gets
// the cause once, and the access log holds no token or query.
func TestInternalErrorsDoNotLeak(t *testing.T) {
	t.Parallel()
	const (
		token  = "TOKEN-SHOULD-NOT-LOG"
		cursor = "CURSOR-SHOULD-NOT-LOG"
	)
	tests := []struct {
		name      string
		route     string
		handler   echo.HandlerFunc
		requestID string // sent as X-Request-Id when set
		secrets   []string
	}{
		{
			name:  "panic",
			route: "/boom",
			handler: func(echo.Context) error {
				panic("SECRET-123 patient Jane Citizen")
			},
			secrets: []string{"SECRET-123", "Jane Citizen"},
		},
		{
			name:  "panic with an error value",
			route: "/boom-error",
			handler: func(echo.Context) error {
				panic(errors.New("SECRET-124 patient Jane Citizen"))
			},
			requestID: "req-p-2",
			secrets:   []string{"SECRET-124", "Jane Citizen"},
		},
		{
			name:  "returned error",
			route: "/fail",
			handler: func(echo.Context) error {
				return errors.New("db exploded: SECRET-456")
			},
			requestID: "req-fail-1",
			secrets:   []string{"SECRET-456", "db exploded"},
		},
		{
			name:  "returned validation internal error",
			route: "/fail-validation",
			handler: func(echo.Context) error {
				return validation.NewInternalError(errors.New("rule exploded: SECRET-457"))
			},
			secrets: []string{"SECRET-457", "rule exploded"},
		},
		{
			name:  "wrapped error naming a patient",
			route: "/fail-wrapped",
			handler: func(echo.Context) error {
				return fmt.Errorf("storage: update patient Jane Citizen: %w", errors.New("SECRET-458"))
			},
			secrets: []string{"SECRET-458", "Jane Citizen"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var log lockedBuffer
			a := newLeakTestApp(t, &log)
			a.partner.GET(tt.route, tt.handler)

			req := httptest.NewRequest(http.MethodGet, tt.route+"?lastKey="+cursor, nil)
			req.Header.Set(echo.HeaderAuthorization, "Bearer "+token)
			req.Header.Set(headerOrganizationSecret, "ORGSECRET-SHOULD-NOT-LOG")
			if tt.requestID != "" {
				req.Header.Set(headerRequestID, tt.requestID)
			}
			rec := httptest.NewRecorder()
			require.NotPanics(t, func() { a.PartnerHandler().ServeHTTP(rec, req) })

			// The response.
			require.Equal(t, http.StatusInternalServerError, rec.Code)
			assert.Contains(t, rec.Header().Get(echo.HeaderContentType), echo.MIMEApplicationJSON)
			id := rec.Header().Get(headerRequestID)
			require.NotEmpty(t, id)
			if tt.requestID != "" {
				assert.Equal(t, tt.requestID, id)
			}
			body := rec.Body.String()
			var env struct {
				Success    *bool  `json:"success"`
				StatusCode int    `json:"statusCode"`
				Code       string `json:"code"`
				Error      struct {
					Type       string            `json:"type"`
					Title      string            `json:"title"`
					Detail     string            `json:"detail"`
					Instance   string            `json:"instance"`
					Validation []json.RawMessage `json:"validation"`
				} `json:"error"`
				Timestamp string `json:"timestamp"`
				RequestID string `json:"requestId"`
				Meta      struct {
					APIVersion string `json:"apiVersion"`
				} `json:"meta"`
			}
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &env), "body %s", body)
			require.NotNil(t, env.Success)
			assert.False(t, *env.Success)
			assert.Equal(t, http.StatusInternalServerError, env.StatusCode)
			assert.Equal(t, codeInternal, env.Code)
			assert.True(t, strings.HasSuffix(env.Error.Type, "/internal-error"), "type %q", env.Error.Type)
			assert.Equal(t, "https://errors.rxgate.dev/internal-error", env.Error.Type)
			assert.Equal(t, "Internal server error", env.Error.Title)
			assert.Equal(t, detailInternal, env.Error.Detail)
			assert.Equal(t, tt.route, env.Error.Instance, "instance has no query string")
			assert.Empty(t, env.Error.Validation)
			assert.Equal(t, id, env.RequestID)
			assert.Equal(t, "2026-03-10T09:00:00.000Z", env.Timestamp)
			assert.Equal(t, "1.0", env.Meta.APIVersion)
			for _, s := range append([]string{"goroutine", ".go:", "panic", "Panic", token, cursor, "ORGSECRET"}, tt.secrets...) {
				assert.NotContains(t, body, s)
			}

			// The log: the cause once, with the request id; the access
			// line without query or headers.
			logText := log.String()
			for _, s := range []string{token, cursor, "lastKey", "ORGSECRET", "Bearer"} {
				assert.NotContains(t, logText, s)
			}
			var failures, access []map[string]any
			for _, rec := range log.records(t) {
				switch rec["msg"] {
				case "request failed":
					failures = append(failures, rec)
				case "request":
					access = append(access, rec)
				}
			}
			require.Len(t, failures, 1, "the cause is logged exactly once:\n%s", logText)
			assert.Equal(t, "ERROR", failures[0]["level"])
			assert.Equal(t, id, failures[0]["requestId"])
			assert.Equal(t, tt.route, failures[0]["route"])
			cause, _ := failures[0]["error"].(string)
			assert.Contains(t, cause, tt.secrets[0], "the cause is in the operator's log")
			assert.Equal(t, 1, strings.Count(logText, tt.secrets[0]), "the cause appears once in the log")

			require.Len(t, access, 1, "one access line:\n%s", logText)
			assert.Equal(t, id, access[0]["requestId"])
			assert.Equal(t, http.MethodGet, access[0]["method"])
			assert.Equal(t, tt.route, access[0]["route"])
			assert.EqualValues(t, http.StatusInternalServerError, access[0]["status"])
			for k, v := range access[0] {
				s, _ := v.(string)
				assert.NotContains(t, s, "?", "access log member %s", k)
				for _, secret := range tt.secrets {
					assert.NotContains(t, s, secret, "access log member %s", k)
				}
			}
		})
	}
}
