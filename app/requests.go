package app

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/invopop/validation"
	"github.com/invopop/validation/is"
	"github.com/labstack/echo/v4"
)

// Helpers every handler shares to bind and check a request: the body, the
// path ids, and the validation rules that several request types use.

// bindAdmin decodes an operator request body into dst and validates it:
// malformed JSON is 400, everything else 422 with every problem listed.
func bindAdmin(c echo.Context, dst interface{ Validate() error }) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	if body == nil {
		body = []byte("{}")
	}
	fields, err := decodeObject(body, dst)
	if err != nil {
		return err
	}
	return checkRequest(dst, fields)
}

// checkRequest validates a decoded operator request, adding the problems
// its decoding found: any problem is 422 with every one listed. The
// console checks its forms with it too.
func checkRequest(dst interface{ Validate() error }, fields []FieldError) error {
	if verr := dst.Validate(); verr != nil {
		var internal validation.InternalError
		if errors.As(verr, &internal) {
			return verr
		}
		fields = append(fields, fieldErrors(verr)...)
	}
	if len(fields) > 0 {
		return errValidation(http.StatusUnprocessableEntity, dedupe(fields))
	}
	return nil
}

// dedupe keeps the first entry per field: a member with the wrong JSON type
// is reported as such, not also as "is required".
func dedupe(fields []FieldError) []FieldError {
	seen := make(map[string]bool, len(fields))
	out := make([]FieldError, 0, len(fields))
	for _, f := range fields {
		if !seen[f.Field] {
			seen[f.Field] = true
			out = append(out, f)
		}
	}
	return out
}

// notBlank refuses a string that is empty or only spaces (validation.Required
// takes "   " as filled in).
var notBlank = validation.By(func(v any) error {
	if s, ok := v.(string); ok && strings.TrimSpace(s) == "" {
		return errors.New("cannot be blank")
	}
	return nil
})

// optionalUUID accepts an absent id or a valid uuid.
var optionalUUID = is.UUID.Error("must be a valid uuid")

// pathUUID refuses a path id that is not a uuid with 404: such a record
// cannot exist.
func pathUUID(c echo.Context, names ...string) error {
	for _, n := range names {
		if err := checkID(c.Param(n)); err != nil {
			return err
		}
	}
	return nil
}

// checkID refuses an id that is not a uuid with 404, as pathUUID does:
// the operations the operator API and the console share check the ids
// they are given with it.
func checkID(id string) error {
	if !isUUID(id) {
		return errNotFound(slugNotFound, "The resource does not exist.")
	}
	return nil
}

// isUUID reports whether s is a uuid as is.UUID has it (lower-case hex in
// groups of 8, 4, 4, 4 and 12), without its regular expression and
// reflection: every request checks its path's ids (FuzzIsUUID holds the
// two to the same answers).
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
				return false
			}
		}
	}
	return true
}

// anys converts strings for validation.In.
func anys(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// uniqueStrings returns in without repeats, in first-seen order.
func uniqueStrings(in []string) []string {
	seen := make(map[string]bool, len(in))
	out := make([]string, 0, len(in))
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// query parses the request's query strictly. url.Query drops a pair that
// is not correctly percent-encoded (?limit=%zz) or that uses ";" as a
// separator, so the request would run as if the parameter were absent;
// here such a pair is a 400 validation error naming its parameter.
func query(c echo.Context) (url.Values, error) {
	return parseQuery(c.Request().URL.RawQuery)
}

// parseQuery is query on a raw query string; the console reads its pages'
// queries with it.
func parseQuery(raw string) (url.Values, error) {
	v := url.Values{}
	for raw != "" {
		var pair string
		pair, raw, _ = strings.Cut(raw, "&")
		if pair == "" {
			continue
		}
		rawKey, rawValue, _ := strings.Cut(pair, "=")
		key, kerr := url.QueryUnescape(rawKey)
		value, verr := url.QueryUnescape(rawValue)
		if kerr != nil || verr != nil || strings.Contains(pair, ";") {
			if kerr != nil {
				key = rawKey
			}
			return nil, errValidation(http.StatusBadRequest, []FieldError{{
				Field: clipName(key), Message: "is not a correctly encoded query parameter", Code: codeValidation,
			}})
		}
		v[key] = append(v[key], value)
	}
	return v, nil
}

// clipName shortens a caller's name for an error body: at most 64
// characters, whole ones.
func clipName(s string) string {
	for i := range s {
		if utf8.RuneCountInString(s[:i]) == 64 {
			return s[:i] + "…"
		}
	}
	return s
}
