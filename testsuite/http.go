package testsuite

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// NoContentType as Request.ContentType sends a body without a Content-Type
// header.
const NoContentType = "-"

// maxResponseBytes bounds what the kit reads of one response.
const maxResponseBytes = 8 << 20

// newClient returns the HTTP client of one Env. It never follows
// redirects, so a test sees exactly what the server answered. Each Env has
// its own transport, so that its connections can be closed before the
// server shuts down: http.Server.Shutdown waits up to five seconds for a
// connection the client opened but never used.
func newClient() (*http.Client, *http.Transport) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	return &http.Client{
		Transport: tr,
		Timeout:   30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}, tr
}

// defaultClient serves Envs built by hand rather than by Start.
var defaultClient, _ = newClient()

// Request is one HTTP request.
type Request struct {
	// Method defaults to GET.
	Method string
	// URL is absolute, or a path relative to Env.BaseURL.
	URL string
	// Token, when set, is sent as "Authorization: Bearer <Token>".
	Token string
	// Headers are set last, so they may override Authorization and
	// Content-Type.
	Headers map[string]string
	// Host, when set, is sent as the Host header instead of the URL's
	// host (net/http ignores a "Host" in Headers).
	Host string
	// Body is sent as is when it is []byte or string, streamed without a
	// Content-Length when it is an io.Reader, and marshalled to JSON
	// otherwise. nil sends no body.
	Body any
	// ContentType defaults to application/json when there is a body;
	// NoContentType omits the header.
	ContentType string
}

// Response is what the server answered.
type Response struct {
	Status int
	Header http.Header
	// Body is the content, decoded when the answer was gzip-encoded.
	Body []byte
	// Encoded is the body as it came, when the answer carried
	// Content-Encoding: gzip (the request asked for gzip itself; when it
	// did not, Go's transport asks, decodes and removes the header).
	Encoded []byte
	// Envelope is the body decoded as a JSON object; nil when it is not one.
	Envelope map[string]any

	errorsBase string
}

// Do sends r and returns the answer; transport failures fail t.
func (e *Env) Do(t testing.TB, r Request) *Response {
	t.Helper()
	method := r.Method
	if method == "" {
		method = http.MethodGet
	}
	var body io.Reader
	length := int64(-1)
	switch b := r.Body.(type) {
	case nil:
		length = 0
	case []byte:
		body, length = bytes.NewReader(b), int64(len(b))
	case string:
		body, length = strings.NewReader(b), int64(len(b))
	case io.Reader:
		// Hide any Len method so that net/http streams it chunked.
		body = struct{ io.Reader }{b}
	default:
		buf, err := json.Marshal(b)
		require.NoError(t, err, "testsuite: marshal request body")
		body, length = bytes.NewReader(buf), int64(len(buf))
	}
	req, err := http.NewRequestWithContext(t.Context(), method, e.URL(r.URL), body)
	require.NoError(t, err)
	if length >= 0 {
		req.ContentLength = length
	}
	if r.Body != nil {
		switch r.ContentType {
		case "":
			req.Header.Set("Content-Type", "application/json")
		case NoContentType:
		default:
			req.Header.Set("Content-Type", r.ContentType)
		}
	}
	if r.Token != "" {
		req.Header.Set("Authorization", "Bearer "+r.Token)
	}
	for k, v := range r.Headers {
		req.Header.Set(k, v)
	}
	if r.Host != "" {
		req.Host = r.Host
	}
	c := e.client
	if c == nil {
		c = defaultClient
	}
	res, err := c.Do(req)
	require.NoError(t, err, "testsuite: %s %s", method, req.URL)
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, maxResponseBytes))
	require.NoError(t, err, "testsuite: reading the answer to %s %s", method, req.URL)
	out := &Response{Status: res.StatusCode, Header: res.Header, Body: raw, errorsBase: e.ErrorsBase}
	if strings.EqualFold(res.Header.Get("Content-Encoding"), "gzip") {
		out.Encoded = raw
		out.Body = gunzip(t, raw)
	}
	var env map[string]any
	if json.Unmarshal(out.Body, &env) == nil {
		out.Envelope = env
	}
	e.checkContract(t, req, out)
	return out
}

// gunzip decodes a gzip body; a body that does not decode fails t.
func gunzip(t testing.TB, raw []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	require.NoError(t, err, "testsuite: a Content-Encoding: gzip body that is not gzip")
	out, err := io.ReadAll(io.LimitReader(zr, maxResponseBytes))
	require.NoError(t, err, "testsuite: a Content-Encoding: gzip body that is not gzip")
	return out
}

// Admin sends a request to the operator API with the admin key; path is
// relative to AdminURL and body is as in Request.Body.
func (e *Env) Admin(t testing.TB, method, path string, body any) *Response {
	t.Helper()
	return e.Do(t, Request{Method: method, URL: e.AdminPath(path), Token: e.AdminKey, Body: body})
}

// MustAdmin is Admin that requires status want and a well-formed envelope.
func (e *Env) MustAdmin(t testing.TB, method, path string, body any, want int) *Response {
	t.Helper()
	r := e.Admin(t, method, path, body)
	require.Equal(t, want, r.Status, "%s %s: %s", method, path, r.Body)
	require.True(t, e.CheckEnvelope(t, r), "%s %s: malformed envelope", method, path)
	return r
}

// Get returns the member of the envelope at path: dot-separated member
// names and array indices ("data.organization_id", "error.validation.0").
func (r *Response) Get(path string) (any, bool) {
	var cur any = r.Envelope
	if r.Envelope == nil {
		return nil, false
	}
	for _, part := range strings.Split(path, ".") {
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[part]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(part)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// String returns the string at path, failing t when it is absent or not a
// string.
func (r *Response) String(t testing.TB, path string) string {
	t.Helper()
	v, ok := r.Get(path)
	require.True(t, ok, "%s is missing from %s", path, r.Body)
	s, ok := v.(string)
	require.True(t, ok, "%s is %T, not a string, in %s", path, v, r.Body)
	return s
}

// Strings returns the array of strings at path, failing t when it is absent
// or not one.
func (r *Response) Strings(t testing.TB, path string) []string {
	t.Helper()
	v, ok := r.Get(path)
	require.True(t, ok, "%s is missing from %s", path, r.Body)
	list, ok := v.([]any)
	require.True(t, ok, "%s is %T, not an array, in %s", path, v, r.Body)
	out := make([]string, len(list))
	for i, item := range list {
		s, ok := item.(string)
		require.True(t, ok, "%s.%d is %T, not a string", path, i, item)
		out[i] = s
	}
	return out
}

// DecodeData unmarshals the envelope's data member into v.
func (r *Response) DecodeData(t testing.TB, v any) {
	t.Helper()
	var env struct {
		Data json.RawMessage `json:"data"`
	}
	require.NoError(t, json.Unmarshal(r.Body, &env), "body: %s", r.Body)
	require.NotEmpty(t, env.Data, "no data in %s", r.Body)
	require.NoError(t, json.Unmarshal(env.Data, v), "data: %s", env.Data)
}

// Slug is the slug of error.type: what follows ErrorsBase + "/". It is ""
// when the body has no error.type under ErrorsBase.
func (r *Response) Slug() string {
	v, _ := r.Get("error.type")
	s, _ := v.(string)
	slug, ok := strings.CutPrefix(s, r.errorsBase+"/")
	if !ok {
		return ""
	}
	return slug
}

// ValidationFields lists the field of every error.validation entry, in the
// order answered.
func (r *Response) ValidationFields() []string {
	v, _ := r.Get("error.validation")
	list, _ := v.([]any)
	var out []string
	for _, item := range list {
		m, _ := item.(map[string]any)
		f, _ := m["field"].(string)
		out = append(out, f)
	}
	return out
}

// RequestID is the envelope's requestId.
func (r *Response) RequestID() string {
	v, _ := r.Get("requestId")
	s, _ := v.(string)
	return s
}
