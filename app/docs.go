package app

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html/template"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/labstack/echo/v4"
)

// The API reference at GET {base_url}/docs: HTML rendered on the server
// from the partner document this instance serves (its own URLs in the
// examples), once. No script at all, no third-party resource: the only
// style is inline, allowed by its hash in the Content-Security-Policy.

//go:embed docs.html.tmpl
var docsTemplateText string

//go:embed docs.css
var docsCSS string

var docsTemplate = template.Must(template.New("docs").Parse(docsTemplateText))

// docsCSP allows the page's one inline style, by its hash, and nothing else.
var docsCSP = func() string {
	sum := sha256.Sum256([]byte(docsCSS))
	return "default-src 'none'; style-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'; " +
		"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
}()

type docsPage struct {
	Title, Version, BaseURL string
	Description             string
	CSS                     template.CSS
	Tags                    []docsTag
	Webhooks                []docsOp
	Schemas                 []docsSchema
}

type docsTag struct {
	Name, Description string
	Ops               []docsOp
}

type docsOp struct {
	ID, Method, Path, Summary, Description string
	Tag                                    string // the first of the operation's tags
	Scopes                                 []string
	ScopesStated                           bool   // x-required-scopes present (an empty list: no scope needed)
	ScopeDenied                            string // x-scope-denied-status
	Public                                 bool   // security: [] (no token)
	Params                                 []docsParam
	Body                                   template.HTML
	Responses                              []docsResponse
	Curl                                   string
}

type docsParam struct {
	Name, In, Type, Description string
	Required                    bool
}

type docsResponse struct {
	Status, Description string
	Schema              template.HTML
}

type docsSchema struct {
	Name string
	JSON template.HTML
}

// partnerDocs serves the reference. It renders at the first request (the
// listeners are bound by then, so the URLs are known).
func (a *App) partnerDocs() echo.HandlerFunc {
	render := sync.OnceValues(func() ([]byte, error) {
		doc, err := a.partnerDoc()
		if err != nil {
			return nil, err
		}
		return renderDocs(doc, a.BaseURL())
	})
	return func(c echo.Context) error {
		page, err := render()
		if err != nil {
			return err
		}
		h := c.Response().Header()
		h.Set("Content-Security-Policy", docsCSP)
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Content-Type-Options", "nosniff")
		return c.HTMLBlob(http.StatusOK, page)
	}
}

// document is the part of an OpenAPI 3.0 document the reference shows.
type document struct {
	Info struct {
		Title, Version, Description string
	}
	Tags []struct {
		Name, Description string
	}
	Paths      map[string]map[string]json.RawMessage
	XWebhooks  map[string]map[string]json.RawMessage `json:"x-webhooks"`
	Components struct {
		Schemas    map[string]json.RawMessage
		Parameters map[string]docParamJSON
		Responses  map[string]docResponseJSON
	}
}

type docParamJSON struct {
	Ref         string          `json:"$ref"`
	Name        string          `json:"name"`
	In          string          `json:"in"`
	Description string          `json:"description"`
	Required    bool            `json:"required"`
	Schema      json.RawMessage `json:"schema"`
}

type docResponseJSON struct {
	Ref         string                      `json:"$ref"`
	Description string                      `json:"description"`
	Content     map[string]docMediaTypeJSON `json:"content"`
}

type docMediaTypeJSON struct {
	Schema json.RawMessage `json:"schema"`
}

type docOperationJSON struct {
	Tags           []string                   `json:"tags"`
	OperationID    string                     `json:"operationId"`
	Summary        string                     `json:"summary"`
	Description    string                     `json:"description"`
	Security       *[]map[string][]string     `json:"security"`
	RequiredScopes *[]string                  `json:"x-required-scopes"`
	ScopeDenied    json.Number                `json:"x-scope-denied-status"`
	Parameters     []docParamJSON             `json:"parameters"`
	RequestBody    *docResponseJSON           `json:"requestBody"`
	Responses      map[string]docResponseJSON `json:"responses"`
}

var methodOrder = []string{"get", "put", "post", "patch", "delete", "head"}

// renderDocs renders the reference page from the partner document doc,
// with baseURL in the examples.
func renderDocs(doc []byte, baseURL string) ([]byte, error) {
	var d document
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, fmt.Errorf("docs: %w", err)
	}
	page := docsPage{Title: d.Info.Title, Version: d.Info.Version, Description: d.Info.Description, BaseURL: baseURL, CSS: template.CSS(docsCSS)}
	byTag := map[string]*docsTag{}
	for _, t := range d.Tags {
		page.Tags = append(page.Tags, docsTag{Name: t.Name, Description: t.Description})
	}
	for i := range page.Tags {
		byTag[page.Tags[i].Name] = &page.Tags[i]
	}
	for _, p := range slices.Sorted(maps.Keys(d.Paths)) {
		item := d.Paths[p]
		var shared []docParamJSON
		if raw, ok := item["parameters"]; ok {
			if err := json.Unmarshal(raw, &shared); err != nil {
				return nil, fmt.Errorf("docs: %s parameters: %w", p, err)
			}
		}
		server := baseURL
		if raw, ok := item["servers"]; ok {
			// A path of the listener's root (/healthz): its own server,
			// which the served document sets to this instance's root.
			var servers []struct{ URL string }
			if json.Unmarshal(raw, &servers) == nil && len(servers) > 0 {
				server = servers[0].URL
			}
		}
		for _, m := range methodOrder {
			raw, ok := item[m]
			if !ok {
				continue
			}
			op, err := d.operation(raw, m, p, shared, server)
			if err != nil {
				return nil, err
			}
			tag := op.Tag
			if tag == "" {
				tag = "Other"
			}
			if byTag[tag] == nil {
				page.Tags = append(page.Tags, docsTag{Name: tag})
				for i := range page.Tags {
					byTag[page.Tags[i].Name] = &page.Tags[i]
				}
			}
			byTag[tag].Ops = append(byTag[tag].Ops, op)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(d.XWebhooks)) {
		for _, m := range methodOrder {
			if raw, ok := d.XWebhooks[name][m]; ok {
				op, err := d.operation(raw, m, name, nil, "")
				if err != nil {
					return nil, err
				}
				op.Curl = ""
				page.Webhooks = append(page.Webhooks, op)
			}
		}
	}
	for _, n := range slices.Sorted(maps.Keys(d.Components.Schemas)) {
		page.Schemas = append(page.Schemas, docsSchema{Name: n, JSON: schemaHTML(d.Components.Schemas[n])})
	}
	var b bytes.Buffer
	if err := docsTemplate.Execute(&b, page); err != nil {
		return nil, fmt.Errorf("docs: %w", err)
	}
	return b.Bytes(), nil
}

// operation is one operation of the document as the page shows it.
func (d *document) operation(raw json.RawMessage, method, path string, shared []docParamJSON, baseURL string) (docsOp, error) {
	var o docOperationJSON
	if err := json.Unmarshal(raw, &o); err != nil {
		return docsOp{}, fmt.Errorf("docs: %s %s: %w", method, path, err)
	}
	op := docsOp{ID: o.OperationID, Tag: first(o.Tags), Method: strings.ToUpper(method), Path: path, Summary: o.Summary, Description: o.Description,
		ScopeDenied: o.ScopeDenied.String(), Public: o.Security != nil && len(*o.Security) == 0}
	if o.RequiredScopes != nil {
		op.ScopesStated, op.Scopes = true, *o.RequiredScopes
	}
	for _, p := range append(shared, o.Parameters...) {
		if p.Ref != "" {
			p = d.Components.Parameters[strings.TrimPrefix(p.Ref, "#/components/parameters/")]
		}
		op.Params = append(op.Params, docsParam{Name: p.Name, In: p.In, Required: p.Required, Description: p.Description, Type: schemaType(p.Schema)})
	}
	if o.RequestBody != nil {
		if mt, ok := o.RequestBody.Content["application/json"]; ok {
			op.Body = schemaHTML(mt.Schema)
		}
	}
	for _, s := range slices.Sorted(maps.Keys(o.Responses)) {
		r := o.Responses[s]
		if r.Ref != "" {
			r = d.Components.Responses[strings.TrimPrefix(r.Ref, "#/components/responses/")]
		}
		resp := docsResponse{Status: s, Description: r.Description}
		for _, mt := range r.Content {
			resp.Schema = schemaHTML(mt.Schema)
			break
		}
		op.Responses = append(op.Responses, resp)
	}
	if baseURL != "" {
		op.Curl = curlExample(op, baseURL)
	}
	return op, nil
}

// curlExample is a curl command for op against baseURL (the server of its
// path), with placeholders for the credentials and header parameters.
func curlExample(op docsOp, baseURL string) string {
	var b strings.Builder
	url := baseURL + op.Path
	if op.Method == http.MethodHead {
		fmt.Fprintf(&b, "curl -sI '%s'", url)
	} else {
		fmt.Fprintf(&b, "curl -s -X %s '%s'", op.Method, url)
	}
	if !op.Public {
		b.WriteString(" \\\n  -H 'Authorization: Bearer <token>'")
	}
	for _, p := range op.Params {
		if p.In == "header" {
			fmt.Fprintf(&b, " \\\n  -H '%s: <%s>'", p.Name, p.Name)
		}
	}
	if op.Body != "" {
		b.WriteString(" \\\n  -H 'Content-Type: application/json' -d '{...}'")
	}
	return b.String()
}

// schemaType is a parameter schema's type, in a word.
func schemaType(raw json.RawMessage) string {
	var s struct {
		Type   string `json:"type"`
		Format string `json:"format"`
		Ref    string `json:"$ref"`
	}
	_ = json.Unmarshal(raw, &s)
	switch {
	case s.Ref != "":
		return strings.TrimPrefix(s.Ref, "#/components/schemas/")
	case s.Format != "":
		return s.Type + " (" + s.Format + ")"
	}
	return s.Type
}

var refPattern = regexp.MustCompile(`&#34;#/components/schemas/([A-Za-z0-9_.-]+)&#34;`)

// schemaHTML is a schema as indented JSON, escaped, with each reference to
// a component schema a link to it.
func schemaHTML(raw json.RawMessage) template.HTML {
	if len(raw) == 0 {
		return ""
	}
	var out bytes.Buffer
	if err := json.Indent(&out, raw, "", "  "); err != nil {
		out.Reset()
		out.Write(raw)
	}
	escaped := template.HTMLEscapeString(out.String())
	return template.HTML(refPattern.ReplaceAllString(escaped, `<a href="#schema-$1">$1</a>`)) //nolint:gosec // escaped above; the names match [A-Za-z0-9_.-]
}

// first is the first of ss, or "".
func first(ss []string) string {
	if len(ss) == 0 {
		return ""
	}
	return ss[0]
}
