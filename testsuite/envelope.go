package testsuite

import (
	"mime"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// APIVersion is meta.apiVersion on error responses (spec 9.2).
const APIVersion = "1.0"

// ValidationCode is the code of every error.validation entry (spec 7.2).
const ValidationCode = "VALIDATION_ERROR"

// codePattern is the shape of the envelope's machine-readable code.
var codePattern = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)

// statusCodes are the machine codes spec 7.2 pairs with statuses; an
// envelope with one of these statuses that carries a code must carry this
// one.
var statusCodes = map[int]string{
	200: "SUCCESS",
	401: "UNAUTHORIZED",
	403: "FORBIDDEN",
	404: "RESOURCE_NOT_FOUND",
}

// slugPattern is the shape of an error slug: lower-case words joined by
// hyphens.
var slugPattern = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// CheckEnvelope asserts that r is a well-formed envelope of spec section 2.1
// (success) or 2.2 (error), as the issue tightens them:
//
//   - a JSON object served as application/json;
//   - statusCode equals the HTTP status;
//   - requestId is non-empty and equals the X-Request-Id header;
//   - timestamp is RFC 3339 in UTC;
//   - code, when present, is an upper-case machine code: SUCCESS on 200,
//     UNAUTHORIZED on 401, FORBIDDEN on 403, RESOURCE_NOT_FOUND on 404;
//   - below 400: success is true, message a string, data present;
//   - from 400: success is false, error.type is ErrorsBase + "/" + a slug,
//     error.title and error.detail are non-empty strings, every
//     error.validation entry has string field, message and code
//     VALIDATION_ERROR, and meta.apiVersion is "1.0".
//
// It reports every problem (without stopping t) and returns whether there
// were none.
func (e *Env) CheckEnvelope(t testing.TB, r *Response) bool {
	t.Helper()
	ok := true
	check := func(cond bool, format string, args ...any) {
		t.Helper()
		if !assert.Truef(t, cond, format, args...) {
			ok = false
		}
	}
	if !assert.NotNilf(t, r.Envelope, "the body is not a JSON object: %q", r.Body) {
		return false
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	check(err == nil && mt == "application/json", "Content-Type is %q, want application/json", r.Header.Get("Content-Type"))

	status, isNum := r.Envelope["statusCode"].(float64)
	check(isNum && int(status) == r.Status, "statusCode is %v, want the HTTP status %d", r.Envelope["statusCode"], r.Status)

	id, _ := r.Envelope["requestId"].(string)
	check(id != "", "requestId is %v, want a non-empty string", r.Envelope["requestId"])
	check(r.Header.Get("X-Request-Id") == id, "X-Request-Id header %q differs from requestId %q", r.Header.Get("X-Request-Id"), id)

	ts, _ := r.Envelope["timestamp"].(string)
	when, err := time.Parse(time.RFC3339Nano, ts)
	check(err == nil, "timestamp %v is not RFC 3339", r.Envelope["timestamp"])
	if err == nil {
		_, offset := when.Zone()
		check(offset == 0 && (ts[len(ts)-1] == 'Z' || ts[len(ts)-1] == 'z'), "timestamp %q is not in UTC (want a Z suffix)", ts)
	}

	if v, present := r.Envelope["code"]; present {
		code, _ := v.(string)
		check(codePattern.MatchString(code), "code is %v, want an upper-case machine code", v)
		if want, ok := statusCodes[r.Status]; ok {
			check(code == want, "code is %q on status %d, want %q", code, r.Status, want)
		}
	}

	success, isBool := r.Envelope["success"].(bool)
	check(isBool, "success is %v, want a boolean", r.Envelope["success"])

	if r.Status < 400 {
		check(success, "success is false on status %d", r.Status)
		_, isString := r.Envelope["message"].(string)
		check(isString, "message is %v, want a string", r.Envelope["message"])
		_, hasData := r.Envelope["data"]
		check(hasData, "data is missing")
		return ok
	}

	check(!success, "success is true on status %d", r.Status)
	errObj, isObj := r.Envelope["error"].(map[string]any)
	check(isObj, "error is %v, want an object", r.Envelope["error"])
	if !isObj {
		return false
	}
	typ, _ := errObj["type"].(string)
	slug := r.Slug()
	check(slug != "" && slugPattern.MatchString(slug), "error.type %q is not %s/<slug>", typ, e.ErrorsBase)
	for _, member := range []string{"title", "detail"} {
		s, _ := errObj[member].(string)
		check(s != "", "error.%s is %v, want a non-empty string", member, errObj[member])
	}
	if v, present := errObj["validation"]; present {
		list, isList := v.([]any)
		check(isList, "error.validation is %v, want an array", v)
		for i, item := range list {
			m, _ := item.(map[string]any)
			field, _ := m["field"].(string)
			message, _ := m["message"].(string)
			check(field != "" && message != "" && m["code"] == ValidationCode,
				"error.validation[%d] is %v, want {field, message, code: %s}", i, item, ValidationCode)
		}
	}
	meta, _ := r.Envelope["meta"].(map[string]any)
	check(meta != nil && meta["apiVersion"] == APIVersion, "meta.apiVersion is %v, want %q", meta["apiVersion"], APIVersion)
	return ok
}
