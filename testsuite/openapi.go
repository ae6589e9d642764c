package testsuite

// This file holds the contract hook: every exchange Env.Do makes with the
// server under test is checked against the OpenAPI documents of
// app/openapi (issue 6), and the operations it reached are recorded for
// the coverage check of the package's TestMain.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/rxgate/rxgate/app/openapi"
)

// The two documents, as ContractOperation.Doc names them.
const (
	DocPartner = "partner"
	DocAdmin   = "admin"
)

// ContractOperation is one operation of an OpenAPI document.
type ContractOperation struct {
	// Doc is DocPartner or DocAdmin.
	Doc string
	// Method and Path are as the document writes them; Path is relative
	// to {base_url} for the partner document's operations, unless Root.
	Method, Path string
	// Root marks a partner operation at the root of the partner listener
	// (health, readiness, JWKS) rather than under http.base_path.
	Root        bool
	OperationID string
}

func (o ContractOperation) String() string {
	return fmt.Sprintf("%s %s %s (%s)", o.Doc, o.Method, o.Path, o.OperationID)
}

// mount is a set of a document's paths served under one URL prefix: the
// partner base path, the partner listener's root, or the operator
// listener. Its router matches paths relative to that prefix.
type mount struct {
	doc    string
	router routers.Router
	// errorEnvelope is the document's ErrorEnvelope schema, which answers
	// to requests no operation matches (404, 405) must satisfy.
	errorEnvelope *openapi3.SchemaRef
}

// contract is the documents, loaded, validated and compiled once per test
// binary.
type contract struct {
	partnerBase, partnerRoot, admin *mount
	operations                      []ContractOperation
}

// Schema formats the documents use that kin-openapi does not check by
// itself.
var (
	uuidPattern  = `^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`
	emailPattern = `^[^@\s]+@[^@\s]+\.[^@\s]+$`
)

var (
	requestOptions = &openapi3filter.Options{
		AuthenticationFunc:  openapi3filter.NoopAuthenticationFunc,
		SkipSettingDefaults: true,
		MultiError:          true,
		SchemaValidationOptions: []openapi3.SchemaValidationOption{
			openapi3.WithStringFormatValidator("uuid", openapi3.NewRegexpFormatValidator(uuidPattern)),
			openapi3.WithStringFormatValidator("email", openapi3.NewRegexpFormatValidator(emailPattern)),
		},
	}
	responseOptions = &openapi3filter.Options{
		IncludeResponseStatus:   true,
		MultiError:              true,
		SchemaValidationOptions: requestOptions.SchemaValidationOptions,
	}
)

// The reference page ({base_url}/docs) is HTML: its body is checked as the
// string its schema says, as text/plain is.
func init() { openapi3filter.RegisterBodyDecoder("text/html", openapi3filter.PlainBodyDecoder) }

var loadContract = sync.OnceValues(func() (*contract, error) {
	partnerJSON, err := openapi.Partner("", "")
	if err != nil {
		return nil, err
	}
	adminJSON, err := openapi.Admin("")
	if err != nil {
		return nil, err
	}
	partner, err := loadDocument(partnerJSON)
	if err != nil {
		return nil, fmt.Errorf("testsuite: partner document: %w", err)
	}
	admin, err := loadDocument(adminJSON)
	if err != nil {
		return nil, fmt.Errorf("testsuite: operator document: %w", err)
	}
	c := &contract{}
	// Partner paths with their own servers live at the listener's root.
	isRoot := func(item *openapi3.PathItem) bool { return len(item.Servers) > 0 }
	if c.partnerBase, err = newMount(DocPartner, partner, func(item *openapi3.PathItem) bool { return !isRoot(item) }); err != nil {
		return nil, err
	}
	if c.partnerRoot, err = newMount(DocPartner, partner, isRoot); err != nil {
		return nil, err
	}
	if c.admin, err = newMount(DocAdmin, admin, func(*openapi3.PathItem) bool { return true }); err != nil {
		return nil, err
	}
	for _, d := range []struct {
		name string
		doc  *openapi3.T
	}{{DocPartner, partner}, {DocAdmin, admin}} {
		for path, item := range d.doc.Paths.Map() {
			for method, op := range item.Operations() {
				c.operations = append(c.operations, ContractOperation{
					Doc: d.name, Method: method, Path: path, Root: d.name == DocPartner && isRoot(item), OperationID: op.OperationID,
				})
			}
		}
	}
	sort.Slice(c.operations, func(i, j int) bool { return c.operations[i].String() < c.operations[j].String() })
	return c, nil
})

func loadDocument(raw []byte) (*openapi3.T, error) {
	doc, err := openapi3.NewLoader().LoadFromData(raw)
	if err != nil {
		return nil, err
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, err
	}
	return doc, nil
}

// newMount builds a router over the paths of doc that keep selects, with
// every server removed so that the router matches paths alone (the hook
// strips the mount's URL prefix first).
func newMount(name string, doc *openapi3.T, keep func(*openapi3.PathItem) bool) (*mount, error) {
	sub := *doc
	sub.Servers = nil
	sub.Paths = openapi3.NewPaths()
	for path, item := range doc.Paths.Map() {
		if !keep(item) {
			continue
		}
		it := *item
		it.Servers = nil
		sub.Paths.Set(path, &it)
	}
	r, err := gorillamux.NewRouter(&sub)
	if err != nil {
		return nil, fmt.Errorf("testsuite: %s router: %w", name, err)
	}
	return &mount{doc: name, router: r, errorEnvelope: doc.Components.Schemas["ErrorEnvelope"]}, nil
}

// ContractOperations lists every operation of both documents.
func ContractOperations() ([]ContractOperation, error) {
	c, err := loadContract()
	if err != nil {
		return nil, err
	}
	return append([]ContractOperation(nil), c.operations...), nil
}

// coverage records, per "doc operationId", the statuses seen.
var coverage = struct {
	sync.Mutex
	seen map[string]map[int]bool
}{seen: map[string]map[int]bool{}}

func record(doc, operationID string, status int) {
	coverage.Lock()
	defer coverage.Unlock()
	k := doc + " " + operationID
	if coverage.seen[k] == nil {
		coverage.seen[k] = map[int]bool{}
	}
	coverage.seen[k][status] = true
}

// UncoveredOperations lists the operations of the documents that no
// exchange of this test binary reached so far.
func UncoveredOperations() ([]ContractOperation, error) {
	ops, err := ContractOperations()
	if err != nil {
		return nil, err
	}
	coverage.Lock()
	defer coverage.Unlock()
	var out []ContractOperation
	for _, op := range ops {
		if coverage.seen[op.Doc+" "+op.OperationID] == nil {
			out = append(out, op)
		}
	}
	return out, nil
}

// CoveredStatuses returns, per operation ("partner getUser"), the statuses
// this test binary saw it answer, sorted.
func CoveredStatuses() map[string][]int {
	coverage.Lock()
	defer coverage.Unlock()
	out := make(map[string][]int, len(coverage.seen))
	for k, set := range coverage.seen {
		for s := range set {
			out[k] = append(out[k], s)
		}
		sort.Ints(out[k])
	}
	return out
}

// mountFor returns the mount serving u and u's path relative to it
// (escaped), or nil when u is not a URL of the server under test.
func (e *Env) mountFor(c *contract, u *url.URL) (*mount, string) {
	for _, m := range []struct {
		prefix string
		mount  *mount
	}{{e.AdminURL, c.admin}, {e.BaseURL, c.partnerBase}, {e.PartnerURL, c.partnerRoot}} {
		if m.prefix == "" {
			continue
		}
		p, err := url.Parse(m.prefix)
		if err != nil || p.Scheme != u.Scheme || p.Host != u.Host {
			continue
		}
		prefix := strings.TrimRight(p.EscapedPath(), "/")
		rel, ok := strings.CutPrefix(u.EscapedPath(), prefix)
		if !ok || (rel != "" && rel[0] != '/') {
			continue
		}
		if rel == "" {
			rel = "/"
		}
		return m.mount, rel
	}
	return nil, ""
}

// checkContract is the hook of Env.Do: on Envs built by Start it checks
// the exchange (CheckContract) and records the operation it reached.
func (e *Env) checkContract(t testing.TB, req *http.Request, res *Response) {
	t.Helper()
	if e.contract {
		e.check(t, req, res, true)
	}
}

// CheckContract checks one exchange against the documents. Env.Do calls it
// on every exchange of an Env built by Start. Requests are
// checked only to find their operation, which is recorded for the coverage
// check, and to catch the server accepting (answering below 400) a request
// the document forbids: the testsuite sends invalid requests on purpose.
// Responses must always match the document: a documented status, and a
// body and headers that satisfy its schemas. An answer to a request no
// operation matches must be a 404 (unknown path) or 405 (known path, other
// method) in the error envelope. Requests to other servers (a fake IdP, a
// webhook receiver) are not checked. Failures are reported on t without
// stopping it. Unlike the hook, it does not count towards the coverage
// check.
func (e *Env) CheckContract(t testing.TB, req *http.Request, res *Response) {
	t.Helper()
	e.check(t, req, res, false)
}

// check is CheckContract; record says to record the operation reached for
// the coverage check.
func (e *Env) check(t testing.TB, req *http.Request, res *Response, recordIt bool) {
	t.Helper()
	c, err := loadContract()
	if err != nil {
		t.Errorf("testsuite: loading the OpenAPI documents: %v", err)
		return
	}
	m, rel := e.mountFor(c, req.URL)
	if m == nil {
		return // not the server under test (a fake IdP, a webhook receiver)
	}
	where := fmt.Sprintf("%s %s", req.Method, req.URL.Path)

	rreq, err := routingRequest(req, rel)
	if err != nil {
		t.Errorf("testsuite: openapi: %s: %v", where, err)
		return
	}
	route, params, err := m.router.FindRoute(rreq)
	if err != nil {
		e.checkUnrouted(t, m, where, req, res, err)
		return
	}
	op := route.Operation
	if recordIt {
		record(m.doc, op.OperationID, res.Status)
	}
	where = fmt.Sprintf("%s (%s document, %s)", where, m.doc, op.OperationID)

	in := &openapi3filter.RequestValidationInput{Request: rreq, PathParams: params, Route: route, Options: requestOptions}
	if rreq.Body == nil && req.Body != nil && req.Body != http.NoBody {
		// A streamed body cannot be read twice; check the rest.
		opts := *requestOptions
		opts.ExcludeRequestBody = true
		in.Options = &opts
	}
	reqErr := openapi3filter.ValidateRequest(req.Context(), in)
	if _, err := url.ParseQuery(req.URL.RawQuery); err != nil && reqErr == nil {
		// The validator reads the query as url.Query does, dropping a
		// pair that is not correctly encoded; no document allows one.
		reqErr = fmt.Errorf("malformed query: %w", err)
	}
	if reqErr != nil && res.Status < 400 && !partialSuccess(op) {
		t.Errorf("testsuite: openapi: %s: the server answered %d to a request the document forbids: %v",
			where, res.Status, reqErr)
	}

	if reqErr == nil && (res.Status == http.StatusBadRequest || res.Status == http.StatusUnprocessableEntity) {
		// The document must not be looser than the server: a request it
		// allows may be refused only by a rule a schema cannot state.
		for _, f := range validationFields(res.Body) {
			if !businessRules[op.OperationID+" "+f] {
				t.Errorf("testsuite: openapi: %s: the server refused member %q of a request the document allows: state the rule in the schema (or list it in businessRules if no schema can)\nbody: %s",
					where, f, truncate(res.Body))
			}
		}
	}
	if req.Method == http.MethodHead {
		// kin-openapi does not check HEAD answers; their status must still
		// be documented.
		if op.Responses.Status(res.Status) == nil && op.Responses.Default() == nil {
			t.Errorf("testsuite: openapi: %s: status %d is not documented", where, res.Status)
		}
		return
	}
	if res.Status == http.StatusNotModified {
		checkNotModified(t, where, op, res)
		return
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: rreq, PathParams: params, Route: route},
		Status:                 res.Status,
		Header:                 res.Header,
		Options:                responseOptions,
	}
	out.SetBodyBytes(res.Body)
	if err := openapi3filter.ValidateResponse(req.Context(), out); err != nil {
		t.Errorf("testsuite: openapi: %s: the answer %d does not match the document: %v\nbody: %s",
			where, res.Status, err, truncate(res.Body))
	}
}

// checkNotModified checks a 304, which kin-openapi leaves unchecked: the
// status is documented, there is no body, and the headers satisfy the
// document's (every documented header is a string).
func checkNotModified(t testing.TB, where string, op *openapi3.Operation, res *Response) {
	t.Helper()
	doc := op.Responses.Status(res.Status)
	if doc == nil {
		t.Errorf("testsuite: openapi: %s: status %d is not documented", where, res.Status)
		return
	}
	if len(res.Body) > 0 {
		t.Errorf("testsuite: openapi: %s: a 304 with a body: %s", where, truncate(res.Body))
	}
	for name, h := range doc.Value.Headers {
		v := res.Header.Values(name)
		if len(v) == 0 {
			if h.Value.Required {
				t.Errorf("testsuite: openapi: %s: the 304 lacks the required header %s", where, name)
			}
			continue
		}
		if s := h.Value.Schema; s != nil && s.Value != nil {
			if err := s.Value.VisitJSON(v[0], responseOptions.SchemaValidationOptions...); err != nil {
				t.Errorf("testsuite: openapi: %s: the 304's header %s does not match the document: %v", where, name, err)
			}
		}
	}
}

// checkUnrouted checks the answer to a request the document has no
// operation for.
func (e *Env) checkUnrouted(t testing.TB, m *mount, where string, req *http.Request, res *Response, routeErr error) {
	t.Helper()
	want := http.StatusNotFound
	if errors.Is(routeErr, routers.ErrMethodNotAllowed) {
		want = http.StatusMethodNotAllowed
	}
	if res.Status != want {
		if want == http.StatusNotFound {
			t.Errorf("testsuite: openapi: %s: the %s document has no such path, yet the server answered %d (want 404): document the route",
				where, m.doc, res.Status)
		} else {
			t.Errorf("testsuite: openapi: %s: the %s document has no %s operation on this path, yet the server answered %d (want 405): document the route",
				where, m.doc, req.Method, res.Status)
		}
		return
	}
	if req.Method == http.MethodHead {
		return
	}
	v, err := decodeJSON(res.Body)
	if err == nil {
		err = m.errorEnvelope.Value.VisitJSON(v, append([]openapi3.SchemaValidationOption{openapi3.MultiErrors(), openapi3.VisitAsResponse()},
			responseOptions.SchemaValidationOptions...)...)
	}
	if err != nil {
		t.Errorf("testsuite: openapi: %s: the %d answer is not the %s document's ErrorEnvelope: %v\nbody: %s",
			where, res.Status, m.doc, err, truncate(res.Body))
	}
}

// routingRequest is a copy of req whose path is rel, with a fresh copy of
// the body when one can be had (req.GetBody).
func routingRequest(req *http.Request, rel string) (*http.Request, error) {
	path, err := url.PathUnescape(rel)
	if err != nil {
		return nil, fmt.Errorf("unescaping the path: %w", err)
	}
	r := req.Clone(context.WithoutCancel(req.Context()))
	u := *req.URL
	u.Path, u.RawPath = path, rel
	r.URL = &u
	r.Body = nil
	if req.GetBody != nil {
		body, err := req.GetBody()
		if err != nil {
			return nil, err
		}
		raw, err := io.ReadAll(body)
		if err != nil {
			return nil, err
		}
		r.Body = io.NopCloser(bytes.NewReader(raw))
		r.ContentLength = int64(len(raw))
	} else if req.Body == nil || req.Body == http.NoBody {
		r.Body = http.NoBody
	}
	return r, nil
}

// partialSuccess reports operations whose 2xx answers may follow a request
// that is partly invalid (bulk create reports invalid items in
// data.failures).
func partialSuccess(op *openapi3.Operation) bool {
	v, _ := op.Extensions["x-partial-success"].(bool)
	return v
}

func decodeJSON(b []byte) (any, error) {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("the body is not JSON: %w", err)
	}
	return v, nil
}

func truncate(b []byte) []byte {
	const max = 2048
	if len(b) > max {
		return append(b[:max:max], "..."...)
	}
	return b
}

// signaturePattern is the X-Webhook-Signature format of spec 6.4, with the
// second v1 of a rotation grace period.
var signaturePattern = regexp.MustCompile(`^t=[0-9]+(,v1=[0-9a-f]{64})+$`)

// CheckWebhookDelivery checks a webhook delivery against the partner
// document's x-webhooks description: the X-Webhook-Signature header's
// format, X-Webhook-Id naming the body's event_id, and the body against the
// PrescriptionCreatedEvent schema. It reports problems on t and returns
// whether there were none. It does not verify the signature
// (queue/signature does).
func CheckWebhookDelivery(t testing.TB, header http.Header, body []byte) bool {
	t.Helper()
	ok := true
	if sig := header.Get("X-Webhook-Signature"); !signaturePattern.MatchString(sig) {
		t.Errorf("testsuite: openapi: X-Webhook-Signature %q is not t=<unix>,v1=<hex>[,v1=<hex>]", sig)
		ok = false
	}
	schema, err := webhookSchema()
	if err != nil {
		t.Errorf("testsuite: openapi: %v", err)
		return false
	}
	v, err := decodeJSON(body)
	if err == nil {
		err = schema.VisitJSON(v, append([]openapi3.SchemaValidationOption{openapi3.MultiErrors()}, requestOptions.SchemaValidationOptions...)...)
	}
	if err != nil {
		t.Errorf("testsuite: openapi: the delivery does not match PrescriptionCreatedEvent: %v\nbody: %s", err, truncate(body))
		return false
	}
	if id, _ := v.(map[string]any)["event_id"].(string); header.Get("X-Webhook-Id") != id {
		t.Errorf("testsuite: openapi: X-Webhook-Id %q differs from the event_id %q", header.Get("X-Webhook-Id"), id)
		ok = false
	}
	return ok
}

var webhookSchema = sync.OnceValues(func() (*openapi3.Schema, error) {
	raw, err := openapi.Partner("", "")
	if err != nil {
		return nil, err
	}
	doc, err := openapi3.NewLoader().LoadFromData(raw)
	if err != nil {
		return nil, err
	}
	s := doc.Components.Schemas["PrescriptionCreatedEvent"]
	if s == nil || s.Value == nil {
		return nil, errors.New("the partner document has no PrescriptionCreatedEvent schema")
	}
	return s.Value, nil
})

// businessRules are the validation entries ("operationId field") that a
// schema cannot state, so a request the document allows may still get
// them: cursors issued by the server, records that must exist, dates
// against today, rules across members or against stored data, the webhook
// URL policy, a disabled user, the partner an operator key's role
// names, and the sandbox clock's bounds (a duration's value).
var businessRules = map[string]bool{
	"advanceSandboxClock advance":          true,
	"listPrescriptions lastKey":            true,
	"listUsers lastKey":                    true,
	"listEvents lastKey":                   true,
	"listOrganizationUsers lastKey":        true,
	"createOrganization partner_id":        true,
	"createWebhookEndpoint partner_id":     true,
	"createWebhookEndpoint url":            true,
	"createToken user_id":                  true,
	"createOperatorKey role":               true,
	"createPatientAdmin date_of_birth":     true,
	"createPatient date_of_birth":          true,
	"updatePatient date_of_birth":          true,
	"createPatientAdmin dva_file_number":   true,
	"createPatient dva_file_number":        true,
	"updatePatient dva_file_number":        true,
	"updatePrescription error":             true,
	"updatePrescription error.description": true,
}

// validationFields returns the fields of an answer's error.validation.
func validationFields(body []byte) []string {
	var ans struct {
		Error struct {
			Validation []struct {
				Field string `json:"field"`
			} `json:"validation"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &ans) != nil {
		return nil
	}
	out := make([]string, len(ans.Error.Validation))
	for i, v := range ans.Error.Validation {
		out[i] = v.Field
	}
	return out
}

// CheckAdminSchema checks body against the operator document's schema
// name (components.schemas): for what rxgate sends rather than answers,
// such as the operational events to webhooks.operator_url.
func CheckAdminSchema(t testing.TB, name string, body []byte) bool {
	t.Helper()
	raw, err := openapi.Admin("")
	if err == nil {
		var doc *openapi3.T
		if doc, err = openapi3.NewLoader().LoadFromData(raw); err == nil {
			s := doc.Components.Schemas[name]
			if s == nil || s.Value == nil {
				err = fmt.Errorf("the operator document has no %s schema", name)
			} else {
				var v any
				if v, err = decodeJSON(body); err == nil {
					err = s.Value.VisitJSON(v, append([]openapi3.SchemaValidationOption{openapi3.MultiErrors()}, requestOptions.SchemaValidationOptions...)...)
				}
			}
		}
	}
	if err != nil {
		t.Errorf("testsuite: openapi: the body does not match %s: %v\nbody: %s", name, err, truncate(body))
		return false
	}
	return true
}
