package app

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/config"
)

// serve starts a's listeners and serving, and returns when both answer.
func serve(t *testing.T, a *App) {
	t.Helper()
	require.NoError(t, a.Listen())
	served := make(chan error, 1)
	go func() { served <- a.Serve() }()
	t.Cleanup(func() {
		require.NoError(t, a.Shutdown(context.Background()))
		require.NoError(t, <-served)
	})
}

// TestConnectionCap: each listener holds at most http.max_connections
// connections; one more is answered only once a held one closes.
func TestConnectionCap(t *testing.T) {
	t.Parallel()
	for _, listener := range []string{"partner", "operator"} {
		t.Run(listener, func(t *testing.T) {
			t.Parallel()
			a, _ := newTestAppWith(t, Options{}, func(c *config.Config) { c.HTTP.MaxConnections = 2 })
			serve(t, a)
			addr := a.PartnerAddr()
			if listener == "operator" {
				addr = a.AdminURL()[len("http://"):]
			}
			// Two idle connections, each holding its place.
			var held []net.Conn
			for range 2 {
				c, err := net.Dial("tcp", addr)
				require.NoError(t, err)
				t.Cleanup(func() { _ = c.Close() })
				held = append(held, c)
			}
			answered := make(chan error, 1)
			go func() {
				client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
				resp, err := client.Get("http://" + addr + "/healthz")
				if err == nil {
					_ = resp.Body.Close()
				}
				answered <- err
			}()
			// While both are held, the third is not served. (Only a server
			// that serves it can fail this; a slow one cannot.)
			select {
			case err := <-answered:
				t.Fatalf("a third connection was served while two were held: %v", err)
			case <-time.After(300 * time.Millisecond):
			}
			require.NoError(t, held[0].Close())
			require.NoError(t, <-answered, "served once a held connection closed")
		})
	}
}

// exchange sends raw on a new connection to addr and reads one answer,
// its body, and whether the server then closed the connection (it sends a
// second request to find out: an answer means open).
func exchange(t *testing.T, addr, raw string) (resp *http.Response, body []byte, closed bool) {
	t.Helper()
	resp, body, closed, err := tryExchange(t, addr, raw)
	require.NoError(t, err)
	return resp, body, closed
}

// tryExchange is exchange, returning an error where the answer could not
// be read.
func tryExchange(t *testing.T, addr, raw string) (resp *http.Response, body []byte, closed bool, err error) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(30*time.Second))) // a guard against a hang, not a speed
	go func() { _, _ = io.WriteString(c, raw) }()
	br := bufio.NewReader(c)
	if resp, err = http.ReadResponse(br, nil); err != nil {
		return nil, nil, true, err
	}
	if body, err = io.ReadAll(resp.Body); err != nil {
		return nil, nil, true, err
	}
	_, _ = io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: rxgate\r\n\r\n")
	second, err := http.ReadResponse(br, nil)
	if err != nil {
		return resp, body, true, nil
	}
	_ = second.Body.Close()
	return resp, body, false, nil
}

// TestRequestFraming: a request with both Content-Length and
// Transfer-Encoding (a smuggling attempt through a proxy that frames by
// Content-Length) is answered with Connection: close and its connection
// closed (RFC 9112 section 6.1); an ordinary request keeps its connection.
func TestRequestFraming(t *testing.T) {
	t.Parallel()
	a, _ := newTestApp(t, Options{})
	serve(t, a)
	tests := []struct {
		name       string
		raw        string
		wantClosed bool
	}{
		{name: "content-length and chunked", raw: "POST /healthz HTTP/1.1\r\nHost: rxgate\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", wantClosed: true},
		{name: "chunked alone", raw: "POST /healthz HTTP/1.1\r\nHost: rxgate\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", wantClosed: true},
		{name: "content-length alone", raw: "POST /healthz HTTP/1.1\r\nHost: rxgate\r\nContent-Length: 2\r\n\r\n{}"},
		{name: "no body", raw: "GET /healthz HTTP/1.1\r\nHost: rxgate\r\n\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			resp, _, closed := exchange(t, a.PartnerAddr(), tt.raw)
			require.Equal(t, tt.wantClosed, closed, "connection closed after the answer")
			require.Equal(t, tt.wantClosed, resp.Close, "the answer says Connection: close")
		})
	}
}

// TestHeaderLimit: a request whose headers fit http.max_header_bytes is
// served, also with a 16 KiB token; one well over it is refused with 431
// and its connection closed. (net/http reads up to 4 KiB past the limit
// before refusing, so the cases stay clear of the edge.)
func TestHeaderLimit(t *testing.T) {
	t.Parallel()
	a, _ := newTestAppWith(t, Options{}, func(c *config.Config) { c.HTTP.MaxHeaderBytes = 32 << 10 })
	serve(t, a)
	request := func(pad int) string {
		return "GET /healthz HTTP/1.1\r\nHost: rxgate\r\nAuthorization: Bearer " + strings.Repeat("t", 16<<10) +
			"\r\nX-Pad: " + strings.Repeat("p", pad) + "\r\n\r\n"
	}
	tests := []struct {
		name       string
		pad        int
		wantStatus int
	}{
		{name: "16 KiB token and 8 KiB more", pad: 8 << 10, wantStatus: http.StatusOK},
		{name: "40 KiB over the 32 KiB limit", pad: 24 << 10, wantStatus: http.StatusRequestHeaderFieldsTooLarge},
		{name: "far over", pad: 1 << 20, wantStatus: http.StatusRequestHeaderFieldsTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			resp, _, closed, err := tryExchange(t, a.PartnerAddr(), request(tt.pad))
			if tt.wantStatus == http.StatusOK {
				require.NoError(t, err)
				require.Equal(t, http.StatusOK, resp.StatusCode)
				require.False(t, closed)
				return
			}
			// The server answers 431 and hangs up while the client may
			// still be writing; the reset that causes can destroy the
			// answer before it is read (net/http documents this).
			require.True(t, closed)
			if err == nil {
				require.Equal(t, tt.wantStatus, resp.StatusCode)
			} else {
				require.True(t, errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF), "%v", err)
			}
		})
	}
}

// TestRefusalsBeforeAnyHandler pins which refusals are the server's own,
// in the envelope, and which net/http writes itself, as plain text, before
// any handler runs, as docs/api.md lists them: a request line,
// header or framing that net/http cannot read is refused by it.
func TestRefusalsBeforeAnyHandler(t *testing.T) {
	t.Parallel()
	a, _ := newTestAppWith(t, Options{}, func(c *config.Config) { c.HTTP.MaxBodyBytes = 1 << 10 })
	serve(t, a)
	const key = "Authorization: Bearer test-admin-key-0123456789\r\n"
	tests := []struct {
		name     string
		admin    bool
		raw      string
		status   int
		envelope bool
	}{
		// The server's own.
		{name: "unknown route", raw: "GET /nope HTTP/1.1\r\nHost: rxgate\r\n\r\n", status: http.StatusNotFound, envelope: true},
		{name: "wrong method", raw: "DELETE /healthz HTTP/1.1\r\nHost: rxgate\r\n\r\n", status: http.StatusMethodNotAllowed, envelope: true},
		{name: "HTTP/2 preface on HTTP/1", raw: "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", status: http.StatusNotFound, envelope: true},
		{name: "body over the limit", admin: true, raw: "POST /admin/v1/partners HTTP/1.1\r\nHost: 127.0.0.1\r\n" + key +
			"Content-Type: application/json\r\nContent-Length: 2048\r\n\r\n" + strings.Repeat(" ", 2048), status: http.StatusRequestEntityTooLarge, envelope: true},
		{name: "chunked body over the limit", admin: true, raw: "POST /admin/v1/partners HTTP/1.1\r\nHost: 127.0.0.1\r\n" + key +
			"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n800\r\n" + strings.Repeat(" ", 2048) + "\r\n0\r\n\r\n",
			status: http.StatusRequestEntityTooLarge, envelope: true},
		{name: "malformed chunked body", admin: true, raw: "POST /admin/v1/partners HTTP/1.1\r\nHost: 127.0.0.1\r\n" + key +
			"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", status: http.StatusBadRequest, envelope: true},
		// net/http's, before any handler.
		{name: "no Host", raw: "GET /healthz HTTP/1.1\r\n\r\n", status: http.StatusBadRequest},
		{name: "malformed Host", raw: "GET /healthz HTTP/1.1\r\nHost: a b\r\n\r\n", status: http.StatusBadRequest},
		{name: "malformed Content-Length", raw: "POST /healthz HTTP/1.1\r\nHost: rxgate\r\nContent-Length: abc\r\n\r\n", status: http.StatusBadRequest},
		{name: "two Content-Lengths", raw: "POST /healthz HTTP/1.1\r\nHost: rxgate\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", status: http.StatusBadRequest},
		{name: "malformed header line", raw: "GET /healthz HTTP/1.1\r\nHost: rxgate\r\nBad Header\r\n\r\n", status: http.StatusBadRequest},
		{name: "malformed request line", raw: "G@T /healthz HTTP/1.1\r\nHost: rxgate\r\n\r\n", status: http.StatusBadRequest},
		{name: "HTTP/0.9", raw: "GET /healthz\r\n\r\n", status: http.StatusBadRequest},
		{name: "unknown Expect", raw: "GET /healthz HTTP/1.1\r\nHost: rxgate\r\nExpect: 200-ok\r\n\r\n", status: http.StatusExpectationFailed},
		{name: "unknown transfer coding", raw: "POST /healthz HTTP/1.1\r\nHost: rxgate\r\nTransfer-Encoding: gzip\r\n\r\n", status: http.StatusNotImplemented},
		{name: "HTTP/3.0", raw: "GET /healthz HTTP/3.0\r\nHost: rxgate\r\n\r\n", status: http.StatusHTTPVersionNotSupported},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			addr := a.PartnerAddr()
			if tt.admin {
				addr = strings.TrimPrefix(a.AdminURL(), "http://")
			}
			resp, body, closed := exchange(t, addr, tt.raw)
			require.Equal(t, tt.status, resp.StatusCode, "%s", body)
			if tt.status == http.StatusRequestEntityTooLarge {
				require.True(t, resp.Close && closed, "a body over the limit closes its connection")
			}
			if tt.envelope {
				require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
				require.Contains(t, string(body), `"success":false,"statusCode":`+strconv.Itoa(tt.status))
				return
			}
			require.NotContains(t, resp.Header.Get("Content-Type"), "json", "net/http's own answer: %s", body)
		})
	}
}

// TestConfiguredRequestLimits: http.max_bulk_drugs and
// http.max_validation_entries hold at the values configured.
func TestConfiguredRequestLimits(t *testing.T) {
	t.Parallel()
	d := newDrugAppWith(t, func(c *config.Config) { c.HTTP.MaxBulkDrugs, c.HTTP.MaxValidationEntries = 3, 2 })
	t.Run("bulk drugs at the limit", func(t *testing.T) {
		status, _, raw := d.bulk(t, drugArray(3, func(int) bool { return false }))
		require.Equal(t, http.StatusOK, status, raw)
	})
	t.Run("bulk drugs over the limit", func(t *testing.T) {
		status, ans, raw := d.bulk(t, drugArray(4, func(int) bool { return false }))
		require.Equal(t, http.StatusBadRequest, status, raw)
		require.Contains(t, ans.Error.Detail, "At most 3 custom drugs")
	})
	t.Run("validation entries", func(t *testing.T) {
		body := `{"a":1,"b":2,"c":3,"d":4,"e":5}`
		status, ans, raw := d.do(t, d.request(http.MethodPost, "/users/"+d.prescriber+"/custom-drugs", d.prescriberTok, []byte(body)))
		require.Equal(t, http.StatusBadRequest, status, raw)
		require.Len(t, ans.Error.Validation, 2, raw)
	})
}

// TestRecordLimit crosses storage.max_record_bytes: an update whose
// patient would encode larger than the bound is a 413 in the envelope and
// leaves the stored patient as it was; one under it is stored.
func TestRecordLimit(t *testing.T) {
	t.Parallel()
	f := newPatientAppWith(t, func(c *config.Config) { c.Storage.MaxRecordBytes = config.MinRecordBytes })
	// Every free-text member at its 255 characters, each of four bytes:
	// about 8 KB of patient, valid in every member.
	long := strings.Repeat("\U0001F600", 255)
	var fields []string
	for _, name := range []string{"family_name", "given_name", "title", "concession_pension_number", "entitlement_number", "racf_id", "medicare_card_number", "dva_file_number"} {
		fields = append(fields, fmt.Sprintf("%q:%q", name, long))
	}
	big := "{" + strings.Join(fields, ",") + "}"
	require.Greater(t, len(big), config.MinRecordBytes, "the body must make a record over the bound")

	rec := f.put([]byte(big))
	require.Equal(t, http.StatusRequestEntityTooLarge, rec.Code, rec.Body.String())
	var ans struct {
		Success    bool `json:"success"`
		StatusCode int  `json:"statusCode"`
		Error      struct {
			Title string `json:"title"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &ans), rec.Body.String())
	require.False(t, ans.Success)
	require.Equal(t, http.StatusRequestEntityTooLarge, ans.StatusCode)
	require.NotEmpty(t, ans.Error.Title)
	require.NotContains(t, rec.Body.String(), long, "the refusal must not echo patient data")

	stored, err := f.app.store.GetPatient(f.ctx, f.org, f.user, f.patient)
	require.NoError(t, err)
	require.Equal(t, *f.baseline.FamilyName, *stored.FamilyName, "a refused update changes nothing")

	rec = f.put([]byte(`{"family_name":"` + long + `"}`))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
}

// TestTimeouts crosses each connection timeout, set short: the server
// closes the connection, without an answer where the request was never
// read whole. (The deadline on the client's reads only guards against a
// hang; nothing here measures speed.)
func TestTimeouts(t *testing.T) {
	t.Parallel()
	const short = 200 * time.Millisecond
	tests := []struct {
		name string
		edit func(*config.Config)
		// send is written at once; the server must then close the
		// connection, after answering wantStatus (0: no answer at all).
		send       string
		admin      bool // sent to the operator listener
		wantStatus int
	}{
		{
			name:       "header read",
			edit:       func(c *config.Config) { c.HTTP.ReadHeaderTimeout = short },
			send:       "GET /healthz HTTP/1.1\r\nHost: rxgate\r\n",
			wantStatus: 0,
		},
		{
			name: "whole request read",
			edit: func(c *config.Config) { c.HTTP.ReadTimeout = short },
			send: "POST /admin/v1/partners HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer test-admin-key-0123456789\r\n" +
				"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"name\":",
			admin: true,
			// The handler's read of the body fails; its answer is written,
			// since writing has a deadline of its own, and the connection
			// closed.
			wantStatus: http.StatusBadRequest,
		},
		{
			name:       "response write",
			edit:       func(c *config.Config) { c.HTTP.WriteTimeout = time.Nanosecond },
			send:       "GET /healthz HTTP/1.1\r\nHost: rxgate\r\n\r\n",
			wantStatus: 0,
		},
		{
			name:       "idle keep-alive",
			edit:       func(c *config.Config) { c.HTTP.IdleTimeout = short },
			send:       "GET /healthz HTTP/1.1\r\nHost: rxgate\r\n\r\n",
			wantStatus: http.StatusOK,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a, _ := newTestAppWith(t, Options{}, tt.edit)
			serve(t, a)
			addr := a.PartnerAddr()
			if tt.admin {
				addr = strings.TrimPrefix(a.AdminURL(), "http://")
			}
			c, err := net.Dial("tcp", addr)
			require.NoError(t, err)
			defer c.Close()
			require.NoError(t, c.SetDeadline(time.Now().Add(30*time.Second))) // a guard against a hang
			_, err = io.WriteString(c, tt.send)
			require.NoError(t, err)
			got, err := io.ReadAll(c)
			require.NoError(t, err, "the server closes the connection (EOF), not the guard")
			if tt.wantStatus == 0 {
				require.Empty(t, got, "no answer")
				return
			}
			resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(string(got))), nil)
			require.NoError(t, err, "%q", got)
			require.Equal(t, tt.wantStatus, resp.StatusCode, "%q", got)
		})
	}
}
