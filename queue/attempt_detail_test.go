package queue

import (
	"context"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage"
)

func TestErrorClass(t *testing.T) {
	t.Parallel()
	wrap := func(err error) error { return &url.Error{Op: "Post", URL: "https://h.example/x", Err: err} }
	tests := []struct {
		name string
		r    response
		want string
	}{
		{name: "2xx is clean", r: response{status: 204}, want: ""},
		{name: "2xx with a body too large", r: response{status: 200, tooLarge: true}, want: storage.AttemptBodyTooLarge},
		{name: "5xx", r: response{status: 503}, want: storage.AttemptHTTPStatus},
		{name: "4xx with a large body is the status", r: response{status: 410, tooLarge: true}, want: storage.AttemptHTTPStatus},
		{name: "redirect", r: response{status: 302}, want: storage.AttemptHTTPStatus},
		{name: "dns", r: response{err: wrap(&net.OpError{Op: "dial", Err: &net.DNSError{Err: "no such host", Name: "h.example", IsNotFound: true}})}, want: storage.AttemptDNS},
		{name: "connection refused", r: response{err: wrap(&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED})}, want: storage.AttemptConnect},
		{name: "unreachable", r: response{err: wrap(&net.OpError{Op: "dial", Err: syscall.EHOSTUNREACH})}, want: storage.AttemptConnect},
		{name: "timeout", r: response{err: wrap(context.DeadlineExceeded)}, want: storage.AttemptTimeout},
		{name: "unknown authority", r: response{err: wrap(x509.UnknownAuthorityError{})}, want: storage.AttemptTLS},
		{name: "wrong host", r: response{err: wrap(x509.HostnameError{Host: "h.example", Certificate: &x509.Certificate{}})}, want: storage.AttemptTLS},
		{name: "destination refused", r: response{err: wrap(&net.OpError{Op: "dial", Err: errDestinationNotAllowed})}, want: storage.AttemptRefused},
		{name: "plain http elsewhere", r: response{err: wrap(&net.OpError{Op: "dial", Err: errNotLoopback})}, want: storage.AttemptRefused},
		{name: "reset mid-answer", r: response{err: wrap(&net.OpError{Op: "read", Err: syscall.ECONNRESET})}, want: storage.AttemptNetwork},
		{name: "anything else", r: response{err: errors.New("EOF")}, want: storage.AttemptNetwork},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, errorClass(tt.r))
			assert.Contains(t, storage.AttemptClasses, tt.want+map[bool]string{true: storage.AttemptHTTPStatus}[tt.want == ""], "a known class")
		})
	}
}

// TestSendKeepsTheAnswer: send keeps the headers and the start of the body
// of the answer, and each real failure gets its class.
func TestSendKeepsTheAnswer(t *testing.T) {
	t.Parallel()
	client, err := newClient("", 2, 5*time.Second, Destinations{AllowLoopback: true})
	require.NoError(t, err)
	hang := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/small", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("X-Receiver", "rails")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":"signature verification failed"}`))
	})
	mux.HandleFunc("/large", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(strings.Repeat("z", maxResponseBytes+100)))
	})
	mux.HandleFunc("/medium", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(strings.Repeat("m", storage.MaxAttemptBodyBytes+100)))
	})
	mux.HandleFunc("/hang", func(http.ResponseWriter, *http.Request) { <-hang })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(hang) })    // before srv.Close, which waits for the handler
	tlsSrv := httptest.NewTLSServer(mux) // a certificate no root trusts
	t.Cleanup(tlsSrv.Close)
	closed := httptest.NewServer(mux)
	closedURL := closed.URL
	closed.Close()
	now := time.Now()
	post := func(u string, timeout time.Duration) response {
		return send(t.Context(), client, u, []byte(`{}`), http.Header{}, timeout, now)
	}

	r := post(srv.URL+"/small", 5*time.Second)
	require.Equal(t, http.StatusUnauthorized, r.status)
	assert.Equal(t, storage.AttemptHTTPStatus, errorClass(r))
	d := r.detail()
	assert.Equal(t, `{"error":"signature verification failed"}`, string(d.ResponseBody))
	assert.False(t, d.BodyTruncated)
	assert.Contains(t, d.ResponseHeaders, [2]string{"X-Receiver", "rails"})

	r = post(srv.URL+"/medium", 5*time.Second)
	assert.Equal(t, "", errorClass(r), "a 4 KiB+ body is no failure")
	d = r.detail()
	assert.Len(t, d.ResponseBody, storage.MaxAttemptBodyBytes)
	assert.True(t, d.BodyTruncated)

	r = post(srv.URL+"/large", 5*time.Second)
	assert.Equal(t, http.StatusOK, r.status)
	assert.Equal(t, storage.AttemptBodyTooLarge, errorClass(r))
	assert.Equal(t, outcomeDelivered, classify(r), "delivered all the same")

	r = post(tlsSrv.URL+"/small", 5*time.Second)
	assert.Equal(t, storage.AttemptTLS, errorClass(r), "%v", r.err)
	assert.Empty(t, r.detail().ResponseHeaders)

	r = post(closedURL+"/small", 5*time.Second)
	assert.Equal(t, storage.AttemptConnect, errorClass(r), "%v", r.err)

	r = post(srv.URL+"/hang", 50*time.Millisecond)
	assert.Equal(t, storage.AttemptTimeout, errorClass(r), "%v", r.err)
}
