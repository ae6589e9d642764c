package app

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/rxgate/rxgate/config"
)

// TestSessionCookie: the console's cookie is HttpOnly and SameSite=Strict
// always, and Secure whenever the browser reached the console over TLS.
func TestSessionCookie(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		publicURL string
		proto     string
		tls       bool
		secure    bool
	}{
		{name: "plain http", secure: false},
		{name: "TLS to rxgate", tls: true, secure: true},
		{name: "TLS proxy that says so", proto: "https", secure: true},
		{name: "proxy chain, TLS first", proto: "https, http", secure: true},
		{name: "proxy chain, plain first", proto: "http, https", secure: false},
		{name: "https public URL", publicURL: "https://rx-admin.example", secure: true},
		{name: "http public URL", publicURL: "http://rx-admin.internal", secure: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a, _ := newTestAppWith(t, Options{}, func(c *config.Config) { c.Admin.PublicURL = tt.publicURL })
			r := httptest.NewRequest("POST", "/console/sign-in", nil)
			if tt.proto != "" {
				r.Header.Set("X-Forwarded-Proto", tt.proto)
			}
			if tt.tls {
				r.TLS = &tls.ConnectionState{}
			}
			c := a.sessionCookie(r, "token", 60)
			assert.Equal(t, tt.secure, c.Secure)
			assert.True(t, c.HttpOnly)
			assert.Equal(t, http.SameSiteStrictMode, c.SameSite)
			assert.Equal(t, "/console", c.Path)
			assert.Equal(t, 60, c.MaxAge)
		})
	}
}
