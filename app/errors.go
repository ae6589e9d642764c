package app

import (
	"errors"
	"net/http"
	"sort"
	"strings"

	"github.com/invopop/validation"
	"github.com/labstack/echo/v4"

	"github.com/rxgate/rxgate/config"
	"github.com/rxgate/rxgate/storage"
)

// Error slugs (spec 7.2). error.type is {errors_base}/{slug}.
const (
	slugValidation         = "validation-error"
	slugAuthentication     = "authentication-required"
	slugInsufficientScope  = "insufficient-scope"
	slugForbidden          = "forbidden"
	slugInternal           = "internal-error"
	slugBadRequest         = "bad-request"
	slugInvalidRequest     = "invalid-request"
	slugNotFound           = "not-found"
	slugPatientNotFound    = "patient-not-found"
	slugUserNotFound       = "user-not-found"
	slugMethodNotAllowed   = "method-not-allowed"
	slugPayloadTooLarge    = "payload-too-large"
	slugUnsupportedMedia   = "unsupported-media-type"
	slugConflict           = "conflict"
	slugServiceUnavailable = "service-unavailable"
	slugNotImplemented     = "not-implemented"
	slugMisdirected        = "misdirected-request"
	slugTooManyRequests    = "too-many-requests"
)

// Machine codes for the envelope's top-level code member (spec 7.2 lists
// SUCCESS, UNAUTHORIZED, FORBIDDEN, RESOURCE_NOT_FOUND and VALIDATION_ERROR;
// the others follow the same pattern).
const (
	codeSuccess          = "SUCCESS"
	codeCreated          = "CREATED"
	codeUnauthorized     = "UNAUTHORIZED"
	codeForbidden        = "FORBIDDEN"
	codeNotFound         = "RESOURCE_NOT_FOUND"
	codeValidation       = "VALIDATION_ERROR"
	codeBadRequest       = "BAD_REQUEST"
	codeMethodNotAllowed = "METHOD_NOT_ALLOWED"
	codeTooLarge         = "PAYLOAD_TOO_LARGE"
	codeUnsupportedMedia = "UNSUPPORTED_MEDIA_TYPE"
	codeConflict         = "CONFLICT"
	codeInternal         = "INTERNAL_ERROR"
	codeUnavailable      = "SERVICE_UNAVAILABLE"
	codeNotImplemented   = "NOT_IMPLEMENTED"
	codeMisdirected      = "MISDIRECTED_REQUEST"
	codeTooManyRequests  = "TOO_MANY_REQUESTS"
)

const (
	titleValidation  = "Validation failed"
	detailValidation = "There were some problems with your input."
	titleInternal    = "Internal server error"
	detailInternal   = "An unexpected error occurred. Quote the requestId when reporting it."
)

// maxFieldErrors is where decoding stops collecting a body's problems: the
// most entries http.max_validation_entries can ask the answer to list.
const maxFieldErrors = config.MaxValidationEntriesLimit

// FieldError is one entry of error.validation.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
	Code    string `json:"code"`
}

// Error is an API error: what the client is told. cause, when set, is what
// the operator's log is told; it never reaches the client.
type Error struct {
	Status     int
	Code       string
	Slug       string
	Title      string
	Detail     string
	Validation []FieldError
	// Data, when set, is sent as the envelope's data member (bulk create).
	Data  any
	cause error
}

func (e *Error) Error() string {
	if e.cause != nil {
		return e.Slug + ": " + e.Detail + ": " + e.cause.Error()
	}
	return e.Slug + ": " + e.Detail
}

func (e *Error) Unwrap() error { return e.cause }

// withCause returns a copy of e that logs cause.
func (e *Error) withCause(cause error) *Error {
	c := *e
	c.cause = cause
	return &c
}

func errUnauthorized(detail string) *Error {
	return &Error{Status: http.StatusUnauthorized, Code: codeUnauthorized, Slug: slugAuthentication, Title: "Unauthorized", Detail: detail}
}

// errScope is the missing-scope error: 403 on most operations, 401 with
// detail "Insufficient scope" on custom drug operations (spec 5.4).
func errScope(status int, scope string) *Error {
	if status == http.StatusUnauthorized {
		return &Error{Status: status, Code: codeUnauthorized, Slug: slugInsufficientScope, Title: "Insufficient permissions", Detail: "Insufficient scope"}
	}
	return &Error{Status: http.StatusForbidden, Code: codeForbidden, Slug: slugInsufficientScope, Title: "Insufficient permissions",
		Detail: "This operation requires the scope " + scope + "."}
}

func errForbidden(detail string) *Error {
	return &Error{Status: http.StatusForbidden, Code: codeForbidden, Slug: slugForbidden, Title: "Forbidden", Detail: detail}
}

func errNotFound(slug, detail string) *Error {
	return &Error{Status: http.StatusNotFound, Code: codeNotFound, Slug: slug, Title: "Not found", Detail: detail}
}

func errBadRequest(detail string) *Error {
	return &Error{Status: http.StatusBadRequest, Code: codeBadRequest, Slug: slugBadRequest, Title: "Bad request", Detail: detail}
}

func errConflict(detail string) *Error {
	return &Error{Status: http.StatusConflict, Code: codeConflict, Slug: slugConflict, Title: "Conflict", Detail: detail}
}

// errValidation is a validation failure answered with status (422 on the
// patient and operator operations, 400 on custom drugs and query
// parameters).
func errValidation(status int, fields []FieldError) *Error {
	return &Error{Status: status, Code: codeValidation, Slug: slugValidation, Title: titleValidation, Detail: detailValidation, Validation: fields}
}

// fieldErrors flattens invopop validation errors into sorted entries,
// naming nested members by path (australian_address.postcode).
func fieldErrors(err error) []FieldError {
	var out []FieldError
	var walk func(prefix string, errs validation.Errors)
	walk = func(prefix string, errs validation.Errors) {
		for name, e := range errs {
			field := name
			if prefix != "" {
				field = prefix + "." + name
			}
			var nested validation.Errors
			if errors.As(e, &nested) {
				walk(field, nested)
				continue
			}
			out = append(out, FieldError{Field: field, Message: e.Error(), Code: codeValidation})
		}
	}
	var errs validation.Errors
	if errors.As(err, &errs) {
		walk("", errs)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Field < out[j].Field })
	return out
}

// asValidation converts validation.Errors into an Error with status, and
// returns nil for anything else.
func asValidation(err error, status int) *Error {
	var errs validation.Errors
	if !errors.As(err, &errs) || len(errs) == 0 {
		return nil
	}
	return errValidation(status, fieldErrors(errs))
}

// errorStatusText maps the statuses Echo itself produces.
var echoErrors = map[int]*Error{
	http.StatusNotFound:              errNotFound(slugNotFound, "No route matches this path."),
	http.StatusMethodNotAllowed:      {Status: http.StatusMethodNotAllowed, Code: codeMethodNotAllowed, Slug: slugMethodNotAllowed, Title: "Method not allowed", Detail: "This path does not support the request method."},
	http.StatusRequestEntityTooLarge: {Status: http.StatusRequestEntityTooLarge, Code: codeTooLarge, Slug: slugPayloadTooLarge, Title: "Payload too large", Detail: "The request body exceeds the size limit."},
	http.StatusUnsupportedMediaType:  {Status: http.StatusUnsupportedMediaType, Code: codeUnsupportedMedia, Slug: slugUnsupportedMedia, Title: "Unsupported media type", Detail: "Send the request body as application/json."},
	http.StatusUnauthorized:          errUnauthorized("Authentication is required."),
	http.StatusServiceUnavailable:    {Status: http.StatusServiceUnavailable, Code: codeUnavailable, Slug: slugServiceUnavailable, Title: "Service unavailable", Detail: "The service is not ready."},
}

// errStoreUnavailable answers a request the store could not serve because
// its database cannot be reached now.
var errStoreUnavailable = &Error{Status: http.StatusServiceUnavailable, Code: codeUnavailable, Slug: slugServiceUnavailable,
	Title: "Service unavailable", Detail: "The service cannot reach its database now; try again later."}

// errStoreBusy answers a write that kept colliding with concurrent ones
// (storage.ErrConflict); nothing was written.
var errStoreBusy = &Error{Status: http.StatusServiceUnavailable, Code: codeUnavailable, Slug: slugServiceUnavailable,
	Title: "Service unavailable", Detail: "The service is busy with concurrent changes to the same records; nothing was changed: try again."}

// errMisdirected answers a request to the operator listener that names a
// host it does not answer for (adminHostMiddleware).
var errMisdirected = &Error{Status: http.StatusMisdirectedRequest, Code: codeMisdirected, Slug: slugMisdirected,
	Title: "Misdirected request", Detail: "This listener does not answer for that host name: use its IP address, localhost, or a name listed in admin.allowed_hosts."}

// errTooManyKeyFailures answers an operator credential, right or wrong,
// from a client address that presented too many wrong ones
// (checkOperatorKey); Retry-After says when to try again.
var errTooManyKeyFailures = &Error{Status: http.StatusTooManyRequests, Code: codeTooManyRequests, Slug: slugTooManyRequests,
	Title: "Too many requests", Detail: "Too many wrong operator keys came from this address: try again after the seconds in Retry-After."}

var (
	errTooLarge         = echoErrors[http.StatusRequestEntityTooLarge]
	errUnsupportedMedia = echoErrors[http.StatusUnsupportedMediaType]
)

// toAPIError decides what the client is told about err. Unknown errors,
// including storage failures and validation.InternalError, become a 500
// whose body holds a fixed message.
func toAPIError(err error, validationStatus int) *Error {
	var apiErr *Error
	if errors.As(err, &apiErr) {
		return apiErr
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		if e, ok := echoErrors[he.Code]; ok {
			return e.withCause(err)
		}
		if he.Code >= 400 && he.Code < 500 {
			return errBadRequest(http.StatusText(he.Code)).withCause(err)
		}
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return errTooLarge.withCause(err)
	}
	var internal validation.InternalError
	if !errors.As(err, &internal) {
		if v := asValidation(err, validationStatus); v != nil {
			return v
		}
	}
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return errNotFound(slugNotFound, "The resource does not exist.").withCause(err)
	case errors.Is(err, storage.ErrAlreadyExists):
		return errConflict("The resource already exists.").withCause(err)
	case errors.Is(err, storage.ErrTooLarge):
		return errTooLarge.withCause(err)
	case errors.Is(err, storage.ErrUnavailable):
		return errStoreUnavailable.withCause(err)
	case errors.Is(err, storage.ErrConflict):
		// Concurrent writers kept colliding until the retries ran out:
		// nothing was written, and the same request may well pass now.
		return errStoreBusy.withCause(err)
	case errors.Is(err, storage.ErrBadCursor):
		return errValidation(http.StatusBadRequest, []FieldError{{Field: "lastKey", Message: "is not a cursor issued for this list", Code: codeValidation}}).withCause(err)
	}
	return &Error{Status: http.StatusInternalServerError, Code: codeInternal, Slug: slugInternal, Title: titleInternal, Detail: detailInternal, cause: err}
}

// errorEnvelope is the body of every error response (spec 2.2).
type errorEnvelope struct {
	Success    bool        `json:"success"`
	StatusCode int         `json:"statusCode"`
	Code       string      `json:"code,omitempty"`
	Error      errorDetail `json:"error"`
	Data       any         `json:"data,omitempty"`
	Timestamp  string      `json:"timestamp"`
	RequestID  string      `json:"requestId"`
	Meta       errorMeta   `json:"meta"`
}

type errorDetail struct {
	Type       string       `json:"type"`
	Title      string       `json:"title"`
	Detail     string       `json:"detail"`
	Instance   string       `json:"instance,omitempty"`
	Validation []FieldError `json:"validation,omitempty"`
}

type errorMeta struct {
	APIVersion string `json:"apiVersion"`
}

// errorHandler is the one place an error becomes a response. It logs the
// cause of server errors once, with the request id, and never the request
// body, headers or query.
func (s *App) errorHandler(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	if s.isConsole(c) {
		s.consoleError(c, err)
		return
	}
	e := toAPIError(err, s.validationStatus)
	validation := e.Validation
	if len(validation) > s.cfg.HTTP.MaxValidationEntries {
		validation = validation[:s.cfg.HTTP.MaxValidationEntries]
	}
	if e.Status >= 500 {
		s.log.Error("request failed", "requestId", requestID(c), "route", c.Path(), "error", e.cause)
	}
	body := errorEnvelope{
		StatusCode: e.Status,
		Code:       e.Code,
		Error: errorDetail{
			Type:       s.errorsBase + "/" + e.Slug,
			Title:      e.Title,
			Detail:     e.Detail,
			Instance:   instance(c),
			Validation: validation,
		},
		Data:      e.Data,
		Timestamp: timestamp(s.now()),
		RequestID: requestID(c),
		Meta:      errorMeta{APIVersion: apiVersion},
	}
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(e.Status)
		return
	}
	if err := c.JSON(e.Status, body); err != nil {
		s.log.Warn("writing error response failed", "requestId", requestID(c), "error", err)
	}
}

// instance is the request path without the query string, which may hold a
// cursor.
func instance(c echo.Context) string {
	p := c.Request().URL.EscapedPath()
	if !strings.HasPrefix(p, "/") {
		return "/"
	}
	return p
}
