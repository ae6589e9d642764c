package queue

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rxgate/rxgate/queue/signature"
	"github.com/rxgate/rxgate/storage"
)

// Request headers of a delivery besides the signature.
const (
	headerWebhookID = "X-Webhook-Id"
	headerUserAgent = "User-Agent"
)

// maxURLLen bounds an endpoint URL.
const maxURLLen = 2048

// maxResponseBytes is how much of an answer's body is read (and thrown
// away) so that the connection can be reused.
const maxResponseBytes = 64 << 10

// URLError is a CheckURL failure.
type URLError struct {
	// Reason is safe to show to the operator ("must use https").
	Reason string
}

func (e *URLError) Error() string { return "queue: endpoint url not allowed: " + e.Reason }

// errNotLoopback refuses a plain-http connection to another address.
var errNotLoopback = errors.New("plain http is allowed only to loopback addresses")

// CheckURL reports whether raw may be a webhook endpoint: an absolute https
// URL with a host, without user info or fragment; or, when
// allowInsecureLoopback is on, an http URL whose host is a loopback address
// or localhost. The error's text is safe to show to the operator.
func CheckURL(raw string, allowInsecureLoopback bool) error {
	if len(raw) > maxURLLen {
		return &URLError{fmt.Sprintf("must be at most %d characters", maxURLLen)}
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Host == "" || u.Hostname() == "" {
		return &URLError{"must be an absolute https URL"}
	}
	if u.User != nil {
		return &URLError{"must not hold user info"}
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		return &URLError{"must not have a fragment"}
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if !allowInsecureLoopback {
			return &URLError{"must use https"}
		}
		if !loopbackHost(u.Hostname()) {
			return &URLError{errNotLoopback.Error()}
		}
		return nil
	}
	return &URLError{"must be an absolute https URL"}
}

func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// newClient returns the delivery client: https verified against the
// system roots plus the PEM certificates in caFile, only to addresses dest
// permits, plain http only over connections to loopback addresses (both
// checked on the address actually dialled, so a name cannot resolve around
// them), redirects never followed. The per-attempt timeout is set on each
// request's context.
//
// No proxy is used, HTTPS_PROXY and the like included: through a proxy the
// address dialled is the proxy's and the proxy connects to the endpoint, so
// dest could not see, let alone refuse, the destination. An environment
// variable set for some other client would then silently open the private
// network to anyone who can register an endpoint.
func newClient(caFile string, workers int, timeout time.Duration, dest Destinations) (*http.Client, error) {
	roots, err := x509.SystemCertPool()
	if err != nil || roots == nil {
		roots = x509.NewCertPool()
	}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("queue: CA file: %w", err)
		}
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("queue: CA file: no PEM certificate in %s", caFile)
		}
	}
	dialer := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second, Control: dest.control}
	secure := &http.Transport{
		Proxy:                 nil, // see above
		DialContext:           dialer.DialContext,
		TLSClientConfig:       &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:   timeout,
		ResponseHeaderTimeout: timeout,
		MaxIdleConns:          4 * workers,
		MaxIdleConnsPerHost:   workers,
		IdleConnTimeout:       90 * time.Second,
		ForceAttemptHTTP2:     true,
	}
	loopback := &net.Dialer{
		Timeout:   timeout,
		KeepAlive: 30 * time.Second,
		Control: func(_, address string, _ syscall.RawConn) error {
			host, _, err := net.SplitHostPort(address)
			if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
				return errNotLoopback
			}
			return nil
		},
	}
	insecure := &http.Transport{
		DialContext:           loopback.DialContext,
		ResponseHeaderTimeout: timeout,
		MaxIdleConns:          4 * workers,
		MaxIdleConnsPerHost:   workers,
		IdleConnTimeout:       90 * time.Second,
	}
	return &http.Client{
		Transport: schemeRouter{https: secure, http: insecure},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}, nil
}

// schemeRouter sends https requests through one transport and http
// requests through the loopback-only one.
type schemeRouter struct{ https, http *http.Transport }

func (r schemeRouter) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme == "http" {
		return r.http.RoundTrip(req)
	}
	return r.https.RoundTrip(req)
}

func (r schemeRouter) closeIdle() {
	r.https.CloseIdleConnections()
	r.http.CloseIdleConnections()
}

// outcome is what an attempt leads to.
type outcome int

const (
	outcomeDelivered outcome = iota
	outcomeRetry
	outcomeFailed
)

// next is the job's next state after the outcome.
func (o outcome) next() string {
	switch o {
	case outcomeDelivered:
		return storage.EventDelivered
	case outcomeRetry:
		return storage.EventPending
	}
	return storage.EventFailed
}

// outcomeName is a job's next state as Result.Outcome names it.
func outcomeName(next string) string {
	switch next {
	case storage.EventDelivered:
		return "delivered"
	case storage.EventPending:
		return "retry"
	}
	return "failed"
}

// response is what one attempt got back.
type response struct {
	status     int           // 0 when there was no response
	err        error         // the transport failure, when status is 0
	retryAfter time.Duration // from Retry-After; 0 when absent
	duration   time.Duration
	// header and body are what the attempt keeps of the answer for
	// debugging (storage.BoundAttemptDetail); tooLarge says the body ran
	// past maxResponseBytes, of which only the start was read.
	header   http.Header
	body     []byte
	tooLarge bool
}

// classify applies table 3.3 to one attempt's response: 2xx delivers;
// no response (network error, timeout, TLS failure), 408, 429 and 5xx are
// retried; anything else fails permanently.
//
// A connection Destinations refused is no response either, and is retried
// like a refused connection: the address it judged is what the endpoint's
// name resolved to at that moment, which can change before the next
// attempt (a DNS change or failover), as the outcome of a DNS failure can.
// The attempts are bounded by webhooks.max_attempts all the same.
func classify(r response) outcome {
	switch {
	case r.status == 0:
		return outcomeRetry
	case r.status >= 200 && r.status < 300:
		return outcomeDelivered
	case r.status == http.StatusRequestTimeout, r.status == http.StatusTooManyRequests, r.status >= 500:
		return outcomeRetry
	}
	return outcomeFailed
}

// send makes one attempt: POST body to u with the delivery headers, within
// timeout.
func send(ctx context.Context, client *http.Client, u string, body []byte, h http.Header, timeout time.Duration, now time.Time) response {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now() // a measurement of elapsed time, not logic
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return response{err: err}
	}
	req.Header = h
	resp, err := client.Do(req)
	if err != nil {
		return response{err: err, duration: time.Since(start)}
	}
	// The start of the body is kept for debugging; the rest, up to
	// maxResponseBytes, is read and thrown away so that the connection
	// can be reused. One byte past it tells a body too large.
	var head [storage.MaxAttemptBodyBytes + 1]byte
	n, _ := io.ReadFull(resp.Body, head[:])
	var rest int64
	if n > storage.MaxAttemptBodyBytes {
		rest, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponseBytes-int64(n)+1))
	}
	_ = resp.Body.Close()
	var kept []byte
	if n > 0 {
		kept = append([]byte(nil), head[:n]...)
	}
	return response{
		status:     resp.StatusCode,
		retryAfter: parseRetryAfter(resp.Header.Get("Retry-After"), now),
		duration:   time.Since(start),
		header:     resp.Header,
		body:       kept,
		tooLarge:   int64(n)+rest > maxResponseBytes,
	}
}

// detail is what an attempt keeps of r's answer: its headers, in name
// order, and the start of its body, bounded.
func (r response) detail() storage.AttemptDetail {
	if r.status == 0 {
		return storage.AttemptDetail{}
	}
	names := make([]string, 0, len(r.header))
	for k := range r.header {
		names = append(names, k)
	}
	slices.Sort(names)
	var hs [][2]string
	for _, k := range names {
		for _, v := range r.header[k] {
			hs = append(hs, [2]string{k, v})
		}
	}
	return storage.BoundAttemptDetail(hs, r.body, len(r.body) > storage.MaxAttemptBodyBytes || r.tooLarge)
}

// errorClass sorts an attempt's failure (storage.AttemptClasses); "" for
// a clean 2xx. A 2xx whose body ran past maxResponseBytes is delivered
// all the same, and classed body_too_large so that the operator sees why
// its connection was not reused.
func errorClass(r response) string {
	if r.status != 0 {
		switch {
		case r.status < 200 || r.status >= 300:
			return storage.AttemptHTTPStatus
		case r.tooLarge:
			return storage.AttemptBodyTooLarge
		}
		return ""
	}
	err := r.err
	var netErr net.Error
	var dnsErr *net.DNSError
	var certErr *tls.CertificateVerificationError
	var unknownCA x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var invalidCert x509.CertificateInvalidError
	var recordErr tls.RecordHeaderError
	var alertErr tls.AlertError
	var opErr *net.OpError
	switch {
	case err == nil:
		return ""
	case errors.Is(err, errDestinationNotAllowed), errors.Is(err, errNotLoopback):
		return storage.AttemptRefused
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &netErr) && netErr.Timeout()):
		return storage.AttemptTimeout
	case errors.As(err, &dnsErr):
		return storage.AttemptDNS
	case errors.As(err, &unknownCA), errors.As(err, &hostErr), errors.As(err, &invalidCert),
		errors.As(err, &certErr), errors.As(err, &recordErr), errors.As(err, &alertErr):
		return storage.AttemptTLS
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH),
		errors.As(err, &opErr) && opErr.Op == "dial":
		return storage.AttemptConnect
	}
	return storage.AttemptNetwork
}

// parseRetryAfter reads Retry-After as delay-seconds or an HTTP date
// (RFC 9110 10.2.3); 0 when absent, malformed or past.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 {
			return 0
		}
		if n > int64(365*24*time.Hour/time.Second) {
			n = int64(365 * 24 * time.Hour / time.Second)
		}
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// describe is an attempt's error as the event log shows it: short, without
// the URL, and never the answer's body.
func describe(r response, timeout time.Duration) string {
	if r.status != 0 {
		if r.status >= 200 && r.status < 300 {
			return ""
		}
		return "HTTP " + strconv.Itoa(r.status)
	}
	err := r.err
	var netErr net.Error
	var certErr *tls.CertificateVerificationError
	var unknownCA x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var invalidCert x509.CertificateInvalidError
	var dnsErr *net.DNSError
	switch {
	case err == nil:
		return ""
	case errors.Is(err, errDestinationNotAllowed):
		// First, and nothing else: the text must not vary with the host.
		return DestinationNotAllowed
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &netErr) && netErr.Timeout()):
		return "timeout: no response within " + timeout.String()
	case errors.As(err, &unknownCA):
		return "tls: certificate signed by an unknown authority"
	case errors.As(err, &hostErr):
		return "tls: certificate is not valid for the host"
	case errors.As(err, &invalidCert):
		return "tls: certificate is invalid or expired"
	case errors.As(err, &certErr):
		return "tls: certificate does not verify"
	case errors.Is(err, errNotLoopback):
		return "refused: " + errNotLoopback.Error()
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.As(err, &dnsErr):
		return "dns: " + dnsErr.Err
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	msg := "network: " + err.Error()
	if len(msg) > 200 {
		msg = msg[:200]
	}
	return msg
}

// deliveryHeader builds the request headers of one attempt, signed with
// the endpoint's scheme: the spec's X-Webhook-Signature and X-Webhook-Id,
// or Standard Webhooks' webhook-id (the event id, the same on every retry
// and replay, as that scheme's idempotency key), webhook-timestamp and
// webhook-signature, keyed with the bytes the whsec_ secret encodes.
func deliveryHeader(eventID, userAgent string, t time.Time, body []byte, scheme string, secrets []string) http.Header {
	h := make(http.Header, 5)
	h.Set("Content-Type", "application/json")
	if scheme == storage.SchemeStandard {
		keys := make([][]byte, len(secrets))
		for i, s := range secrets {
			// StandardSecret's output always decodes.
			keys[i], _ = signature.StandardKey(signature.StandardSecret(s))
		}
		signature.StandardHeaders(h, eventID, t, body, keys...)
	} else {
		h.Set(signature.HeaderName, signature.Header(t, body, secrets...))
		h.Set(headerWebhookID, eventID)
	}
	h.Set(headerUserAgent, userAgent)
	return h
}
