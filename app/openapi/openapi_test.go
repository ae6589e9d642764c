package openapi_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/app/openapi"
)

// documents are the two documents, as served with the default URLs.
func documents(t testing.TB) map[string][]byte {
	t.Helper()
	partner, err := openapi.Partner("", "")
	require.NoError(t, err)
	admin, err := openapi.Admin("")
	require.NoError(t, err)
	return map[string][]byte{"partner": partner, "admin": admin}
}

func load(t testing.TB, doc []byte) *openapi3.T {
	t.Helper()
	loader := openapi3.NewLoader()
	d, err := loader.LoadFromData(doc)
	require.NoError(t, err)
	return d
}

// TestDocumentsValidate loads each document with kin-openapi and validates
// it, examples included.
func TestDocumentsValidate(t *testing.T) {
	t.Parallel()
	for name, doc := range documents(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			require.True(t, json.Valid(doc), "the rendered document is not JSON")
			d := load(t, doc)
			assert.Equal(t, "3.0.3", d.OpenAPI)
			require.NoError(t, d.Validate(t.Context(), openapi3.EnableExamplesValidation()))
		})
	}
}

// TestDocumentsComplete checks what issue 6 asks of every operation:
// operationId, summary, a security decision with the scope noted, an
// example per request body and per success response, an X-Request-Id on
// every response, and strict (additionalProperties: false) envelopes.
func TestDocumentsComplete(t *testing.T) {
	t.Parallel()
	for name, doc := range documents(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			d := load(t, doc)
			ids := map[string]bool{}
			for path, item := range d.Paths.Map() {
				for method, op := range item.Operations() {
					where := method + " " + path
					require.NotEmpty(t, op.OperationID, "%s: operationId", where)
					assert.False(t, ids[op.OperationID], "%s: duplicate operationId %s", where, op.OperationID)
					ids[op.OperationID] = true
					assert.NotEmpty(t, op.Summary, "%s: summary", where)
					checkSecurity(t, d, op, where)
					if rb := op.RequestBody; rb != nil {
						for ct, mt := range rb.Value.Content {
							assert.True(t, hasExample(mt), "%s: request %s has no example", where, ct)
						}
					}
					for status, resp := range op.Responses.Map() {
						where := fmt.Sprintf("%s %s", where, status)
						_, hasID := resp.Value.Headers["X-Request-Id"]
						assert.True(t, hasID, "%s: no X-Request-Id header", where)
						for ct, mt := range resp.Value.Content {
							if strings.HasPrefix(status, "2") {
								assert.True(t, hasExample(mt), "%s: response %s has no example", where, ct)
							}
							if s := mt.Schema.Value; s.Properties["requestId"] != nil {
								assert.True(t, s.AdditionalProperties.Has != nil && !*s.AdditionalProperties.Has,
									"%s: the envelope must set additionalProperties: false", where)
							}
						}
					}
				}
			}
		})
	}
}

// checkSecurity requires an operation either to need no authentication
// (security: []) or to state its scopes in x-required-scopes (partner) or
// use the operator key (admin).
func checkSecurity(t *testing.T, d *openapi3.T, op *openapi3.Operation, where string) {
	t.Helper()
	sec := d.Security
	if op.Security != nil {
		sec = *op.Security
	}
	if len(sec) == 0 {
		return
	}
	for _, req := range sec {
		for scheme := range req {
			assert.Contains(t, d.Components.SecuritySchemes, scheme, "%s: unknown security scheme", where)
		}
	}
	if _, ok := sec[0]["bearerAuth"]; ok {
		scopes, ok := op.Extensions["x-required-scopes"]
		assert.True(t, ok, "%s: x-required-scopes is missing", where)
		if list, _ := scopes.([]any); len(list) > 0 {
			_, ok := op.Extensions["x-scope-denied-status"]
			assert.True(t, ok, "%s: x-scope-denied-status is missing", where)
		}
	}
}

func hasExample(mt *openapi3.MediaType) bool {
	return mt.Example != nil || len(mt.Examples) > 0
}

// TestDocumentsNoStore: every response of every operation documents
// Cache-Control: no-store (issue 27, L4), except the successes of the
// operations that serve public, secret-free documents, and the answers that carry a token also
// document Pragma: no-cache (RFC 6749 section 5.1). The testsuite's
// contract hook then holds every answer the server gives to it.
func TestDocumentsNoStore(t *testing.T) {
	t.Parallel()
	cacheable := map[string]bool{"getReference": true, "getPartnerOpenAPI": true, "getJWKS": true, "getAdminOpenAPI": true}
	tokens := map[string]bool{"issueToken": true, "createToken": true}
	for name, doc := range documents(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			d := load(t, doc)
			for path, item := range d.Paths.Map() {
				for method, op := range item.Operations() {
					for status, resp := range op.Responses.Map() {
						where := fmt.Sprintf("%s %s %s", method, path, status)
						cc := resp.Value.Headers["Cache-Control"]
						if cacheable[op.OperationID] && strings.HasPrefix(status, "2") {
							if cc != nil {
								assert.NotContains(t, cc.Value.Schema.Value.Enum, "no-store", "%s: a public document is cacheable", where)
							}
							continue
						}
						if assert.NotNil(t, cc, "%s: no Cache-Control header", where) {
							assert.True(t, cc.Value.Required, "%s: Cache-Control is not required", where)
							assert.Equal(t, []any{"no-store"}, cc.Value.Schema.Value.Enum, where)
						}
						if tokens[op.OperationID] && strings.HasPrefix(status, "2") {
							if pragma := resp.Value.Headers["Pragma"]; assert.NotNil(t, pragma, "%s: no Pragma header", where) {
								assert.True(t, pragma.Value.Required, "%s: Pragma is not required", where)
								assert.Equal(t, []any{"no-cache"}, pragma.Value.Schema.Value.Enum, where)
							}
						}
					}
				}
			}
		})
	}
}

// TestWebhooksExtension checks the x-webhooks extension of the partner
// document: the prescription.created payload and the signature header.
func TestWebhooksExtension(t *testing.T) {
	t.Parallel()
	d := load(t, documents(t)["partner"])
	hooks, ok := d.Extensions["x-webhooks"].(map[string]any)
	require.True(t, ok, "x-webhooks is missing")
	raw, err := json.Marshal(hooks["prescription.created"])
	require.NoError(t, err)
	var hook struct {
		Post struct {
			Parameters []struct {
				Name     string `json:"name"`
				In       string `json:"in"`
				Required bool   `json:"required"`
			} `json:"parameters"`
			RequestBody struct {
				Content map[string]struct {
					Schema struct {
						Ref string `json:"$ref"`
					} `json:"schema"`
				} `json:"content"`
			} `json:"requestBody"`
			Description string `json:"description"`
		} `json:"post"`
	}
	require.NoError(t, json.Unmarshal(raw, &hook))
	require.NotEmpty(t, hook.Post.Parameters)
	assert.Equal(t, "X-Webhook-Signature", hook.Post.Parameters[0].Name)
	assert.Equal(t, "header", hook.Post.Parameters[0].In)
	assert.True(t, hook.Post.Parameters[0].Required)
	assert.Equal(t, "#/components/schemas/PrescriptionCreatedEvent", hook.Post.RequestBody.Content["application/json"].Schema.Ref)
	for _, s := range []string{"HMAC-SHA256", "<t>.<raw_request_body>", "300 seconds", "v1=<old>,v1=<new>"} {
		assert.Contains(t, hook.Post.Description, s)
	}
	require.Contains(t, d.Components.Schemas, "PrescriptionCreatedEvent")
}

// TestServers checks that Partner and Admin point the documents at the
// instance's URLs, and keep the defaults when given none.
func TestServers(t *testing.T) {
	t.Parallel()
	doc, err := openapi.Partner("https://rx.example.com/external/", "https://rx.example.com")
	require.NoError(t, err)
	d := load(t, doc)
	require.Len(t, d.Servers, 1)
	assert.Equal(t, "https://rx.example.com/external", d.Servers[0].URL)
	health := d.Paths.Value("/healthz")
	require.NotNil(t, health)
	assert.Equal(t, "https://rx.example.com", health.Servers[0].URL)

	doc, err = openapi.Admin("http://10.0.0.5:8081")
	require.NoError(t, err)
	assert.Equal(t, "http://10.0.0.5:8081", load(t, doc).Servers[0].URL)

	doc, err = openapi.Partner("", "")
	require.NoError(t, err)
	assert.Equal(t, openapi.DefaultBaseURL, load(t, doc).Servers[0].URL)
}

// TestRenderKeepsOrder checks that the JSON keeps the YAML's member order
// (paths in the order written, not sorted).
func TestRenderKeepsOrder(t *testing.T) {
	t.Parallel()
	doc := documents(t)["partner"]
	first := strings.Index(string(doc), `"/v1/token"`)
	later := strings.Index(string(doc), `"/healthz"`)
	require.Positive(t, first)
	assert.Less(t, first, later, "paths are rendered in the order written")
}

// TestPartnerForBulkLimit: the document states the configured bulk limit,
// in the schema and in the descriptions, and nothing else changes.
func TestPartnerForBulkLimit(t *testing.T) {
	t.Parallel()
	def, err := openapi.Partner("", "")
	require.NoError(t, err)
	got, err := openapi.PartnerFor("", "", 5000)
	require.NoError(t, err)
	require.Contains(t, string(def), `"maxItems":2000`)
	require.NotContains(t, string(got), `"maxItems":2000`)
	require.Contains(t, string(got), `"maxItems":5000`)
	require.Contains(t, string(got), "at most 5000 items")
	require.Equal(t, len(def), len(got), "only the limit changed (2000 and 5000 have as many digits)")
}
