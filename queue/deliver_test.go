package queue

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestExponentialDelay(t *testing.T) {
	t.Parallel()
	fixed := func(v float64) func() float64 { return func() float64 { return v } }
	tests := []struct {
		name     string
		b        Exponential
		attempts int
		want     time.Duration
	}{
		{name: "first retry waits the base", b: Exponential{Base: time.Second, Max: time.Minute}, attempts: 1, want: time.Second},
		{name: "then twice as long", b: Exponential{Base: time.Second, Max: time.Minute}, attempts: 2, want: 2 * time.Second},
		{name: "and again", b: Exponential{Base: time.Second, Max: time.Minute}, attempts: 3, want: 4 * time.Second},
		{name: "capped", b: Exponential{Base: time.Second, Max: 5 * time.Second}, attempts: 4, want: 5 * time.Second},
		{name: "no overflow", b: Exponential{Base: time.Second, Max: time.Hour}, attempts: 90, want: time.Hour},
		{name: "zero attempts waits the base", b: Exponential{Base: time.Second, Max: time.Minute}, attempts: 0, want: time.Second},
		{name: "jitter low end is -20%", b: Exponential{Base: time.Second, Max: time.Minute, Rand: fixed(0)}, attempts: 1, want: 800 * time.Millisecond},
		{name: "jitter middle is exact", b: Exponential{Base: time.Second, Max: time.Minute, Rand: fixed(0.5)}, attempts: 2, want: 2 * time.Second},
		{name: "jitter high end is +20%", b: Exponential{Base: time.Second, Max: time.Minute, Rand: fixed(0.999999)}, attempts: 1, want: 1199999600 * time.Nanosecond},
		{name: "jitter never passes the cap", b: Exponential{Base: time.Second, Max: time.Second, Rand: fixed(0.99)}, attempts: 3, want: time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, tt.b.Delay(tt.attempts))
		})
	}
}

func TestCheckURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		url      string
		loopback bool
		reason   string // "" = allowed
	}{
		{url: "https://hooks.example.com/rx", reason: ""},
		{url: "https://hooks.example.com:8443/rx?x=1", reason: ""},
		{url: "https://10.0.0.5/rx", reason: ""},
		{url: "http://hooks.example.com/rx", reason: "must use https"},
		{url: "http://hooks.example.com/rx", loopback: true, reason: "plain http is allowed only to loopback addresses"},
		{url: "http://127.0.0.1:9000/", reason: "must use https"},
		{url: "http://127.0.0.1:9000/", loopback: true},
		{url: "http://127.8.9.10/", loopback: true},
		{url: "http://[::1]:9000/", loopback: true},
		{url: "http://localhost:9000/", loopback: true},
		{url: "http://10.0.0.5/", loopback: true, reason: "plain http is allowed only to loopback addresses"},
		{url: "http://0.0.0.0:9000/", loopback: true, reason: "plain http is allowed only to loopback addresses"},
		{url: "ftp://hooks.example.com/", loopback: true, reason: "must be an absolute https URL"},
		{url: "hooks.example.com/rx", reason: "must be an absolute https URL"},
		{url: "/rx", reason: "must be an absolute https URL"},
		{url: "https://", reason: "must be an absolute https URL"},
		{url: "https://:443/", reason: "must be an absolute https URL"},
		{url: "https://user:pw@hooks.example.com/", reason: "must not hold user info"},
		{url: "https://hooks.example.com/#frag", reason: "must not have a fragment"},
		{url: "https://hooks.example.com/" + strings.Repeat("a", 2100), reason: "must be at most 2048 characters"},
		{url: "https://hooks example.com/", reason: "must be an absolute https URL"},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			t.Parallel()
			err := CheckURL(tt.url, tt.loopback)
			if tt.reason == "" {
				assert.NoError(t, err)
				return
			}
			var ue *URLError
			if assert.True(t, errors.As(err, &ue), "%v", err) {
				assert.Equal(t, tt.reason, ue.Reason)
			}
		})
	}
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		value string
		want  time.Duration
	}{
		{value: "", want: 0},
		{value: "0", want: 0},
		{value: "-5", want: 0},
		{value: "30", want: 30 * time.Second},
		{value: " 7 ", want: 7 * time.Second},
		{value: "1.5", want: 0},
		{value: "soon", want: 0},
		{value: "99999999999", want: 365 * 24 * time.Hour},
		{value: now.Add(90 * time.Second).Format(http.TimeFormat), want: 90 * time.Second},
		{value: now.Add(-time.Hour).Format(http.TimeFormat), want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, parseRetryAfter(tt.value, now))
		})
	}
}

// TestClassify is table 3.3 as a function of the answer.
func TestClassify(t *testing.T) {
	t.Parallel()
	tests := []struct {
		status int
		err    error
		want   outcome
	}{
		{status: 200, want: outcomeDelivered},
		{status: 201, want: outcomeDelivered},
		{status: 202, want: outcomeDelivered},
		{status: 204, want: outcomeDelivered},
		{status: 299, want: outcomeDelivered},
		{status: 0, err: errors.New("connection refused"), want: outcomeRetry},
		{status: 408, want: outcomeRetry},
		{status: 429, want: outcomeRetry},
		{status: 500, want: outcomeRetry},
		{status: 502, want: outcomeRetry},
		{status: 503, want: outcomeRetry},
		{status: 504, want: outcomeRetry},
		{status: 599, want: outcomeRetry},
		{status: 400, want: outcomeFailed},
		{status: 401, want: outcomeFailed},
		{status: 403, want: outcomeFailed},
		{status: 404, want: outcomeFailed},
		{status: 409, want: outcomeFailed},
		{status: 410, want: outcomeFailed},
		{status: 413, want: outcomeFailed},
		{status: 422, want: outcomeFailed},
		{status: 301, want: outcomeFailed},
		{status: 302, want: outcomeFailed},
		{status: 304, want: outcomeFailed},
		{status: 101, want: outcomeFailed},
	}
	for _, tt := range tests {
		t.Run(http.StatusText(tt.status), func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, classify(response{status: tt.status, err: tt.err}), "status %d", tt.status)
		})
	}
}
