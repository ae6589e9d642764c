package testsuite_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"

	"github.com/rxgate/rxgate/testsuite"
)

// TestReferencePage: GET {base_url}/docs is an HTML page of every
// operation of the served document (its id, method and path), the webhook
// with its signature scheme and every schema, with the instance's base URL
// in the examples; it loads no script and nothing from another origin, and
// its Content-Security-Policy allows nothing but its own style.
func TestReferencePage(t *testing.T) {
	t.Parallel()
	env := testsuite.Start(t)
	r := env.Do(t, testsuite.Request{URL: "/docs"})
	require.Equal(t, http.StatusOK, r.Status)
	require.True(t, strings.HasPrefix(r.Header.Get("Content-Type"), "text/html"), r.Header.Get("Content-Type"))
	csp := r.Header.Get("Content-Security-Policy")
	require.Contains(t, csp, "default-src 'none'")
	require.NotContains(t, csp, "unsafe-inline")
	assert.Equal(t, "DENY", r.Header.Get("X-Frame-Options"))
	page := string(r.Body)

	var doc struct {
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components struct {
			Schemas map[string]json.RawMessage `json:"schemas"`
		} `json:"components"`
	}
	d := env.Do(t, testsuite.Request{URL: "/v1/openapi.json"})
	require.NoError(t, json.Unmarshal(d.Body, &doc))
	ops := 0
	for path, item := range doc.Paths {
		for method, raw := range item {
			var op struct {
				OperationID string `json:"operationId"`
			}
			if json.Unmarshal(raw, &op) != nil || op.OperationID == "" {
				continue // parameters, servers
			}
			ops++
			assert.Contains(t, page, `id="op-`+op.OperationID+`"`, "%s %s", method, path)
			assert.Contains(t, page, html.EscapeString(path))
		}
	}
	require.Greater(t, ops, 15)
	for name := range doc.Components.Schemas {
		assert.Contains(t, page, `id="schema-`+name+`"`)
	}
	assert.Contains(t, page, "onPrescriptionCreated")
	assert.Contains(t, page, "X-Webhook-Signature")
	assert.Contains(t, page, "HMAC-SHA256")
	assert.Contains(t, page, "curl -s -X GET &#39;"+env.BaseURL+"/v1/organizations/")

	// No script, no style sheet, image or frame, no link to another origin.
	root, err := html.Parse(bytes.NewReader(r.Body))
	require.NoError(t, err)
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			assert.NotContains(t, []string{"script", "link", "img", "iframe", "object", "embed"}, n.Data, "a <%s> element", n.Data)
			for _, a := range n.Attr {
				assert.False(t, strings.HasPrefix(a.Key, "on"), "an event handler attribute %s", a.Key)
				if a.Key == "href" || a.Key == "src" {
					ok := strings.HasPrefix(a.Val, "#") || strings.HasPrefix(a.Val, env.BaseURL)
					assert.True(t, ok, "%s=%q leaves the page's origin", a.Key, a.Val)
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(root)
}
