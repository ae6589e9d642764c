package app

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/labstack/echo/v4"
)

// readBody returns the request body, which must be JSON. An absent or empty
// body is returned as nil. It enforces the content type (415) and the size
// limit (413, through the body-limit middleware's MaxBytesReader).
func readBody(c echo.Context) ([]byte, error) {
	req := c.Request()
	body, err := io.ReadAll(req.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, errTooLarge.withCause(err)
		}
		return nil, errBadRequest("The request body could not be read.").withCause(err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, nil
	}
	if !utf8.Valid(body) {
		return nil, &Error{Status: http.StatusBadRequest, Code: codeBadRequest, Slug: slugInvalidRequest,
			Title: "Invalid request", Detail: "The request body is not valid UTF-8."}
	}
	if ct := req.Header.Get(echo.HeaderContentType); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != echo.MIMEApplicationJSON && !strings.HasSuffix(mt, "+json")) {
			return nil, errUnsupportedMedia
		}
	} else {
		return nil, errUnsupportedMedia
	}
	return body, nil
}

// errMalformedJSON is the answer to a body that is not JSON at all.
var errMalformedJSON = &Error{Status: http.StatusBadRequest, Code: codeBadRequest, Slug: slugInvalidRequest,
	Title: "Invalid request", Detail: "The request body is not valid JSON."}

// decodeObject decodes a JSON object into dst, a pointer to a struct whose
// members carry json tags. Unlike json.Unmarshal it reports every problem
// at once as field errors: members dst does not have ("is not a known
// field"), and members of the wrong JSON type ("must be a string"), naming
// nested members by path. A body that is not a JSON object is
// errMalformedJSON or, for valid JSON of another kind, a bad request.
func decodeObject(body []byte, dst any) ([]FieldError, error) {
	if !json.Valid(body) {
		return nil, errMalformedJSON
	}
	var fields []FieldError
	if !decodeInto(body, reflect.ValueOf(dst).Elem(), "", &fields) {
		return nil, errBadRequest("The request body must be a JSON object.")
	}
	return fields, nil
}

// decodeInto decodes the object in raw into the struct v, appending field
// errors. It returns false when raw is not an object.
func decodeInto(raw []byte, v reflect.Value, path string, fields *[]FieldError) bool {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil || members == nil {
		return false
	}
	index := jsonFields(v.Type())
	for name, value := range members {
		field := name
		if name == "" {
			field = `""` // an empty member name, shown so the entry names something
		}
		if path != "" {
			field = path + "." + field
		}
		if len(*fields) > maxFieldErrors {
			break // the answer is capped; stop looking
		}
		idx, ok := index[name]
		if !ok {
			*fields = append(*fields, FieldError{Field: field, Message: "is not a known field", Code: codeValidation})
			continue
		}
		f := fieldByIndex(v, idx)
		// A struct member (or pointer to one) is decoded member by member,
		// so that its problems are named by path.
		st := f.Type()
		if st.Kind() == reflect.Pointer {
			st = st.Elem()
		}
		if st.Kind() == reflect.Struct && !isOpaque(st) {
			if string(bytes.TrimSpace(value)) == "null" {
				*fields = append(*fields, FieldError{Field: field, Message: "must not be null", Code: codeValidation})
				continue
			}
			target := reflect.New(st).Elem()
			if !decodeInto(value, target, field, fields) {
				*fields = append(*fields, FieldError{Field: field, Message: "must be an object", Code: codeValidation})
				continue
			}
			if f.Kind() == reflect.Pointer {
				p := reflect.New(st)
				p.Elem().Set(target)
				f.Set(p)
			} else {
				f.Set(target)
			}
			continue
		}
		if err := json.Unmarshal(value, f.Addr().Interface()); err != nil {
			msg := typeMessage(f.Type())
			var te typeError
			if errors.As(err, &te) {
				msg = te.msg
			}
			*fields = append(*fields, FieldError{Field: field, Message: msg, Code: codeValidation})
		}
	}
	return true
}

// isOpaque reports struct types decoded whole by their own UnmarshalJSON.
func isOpaque(t reflect.Type) bool {
	return reflect.PointerTo(t).Implements(reflect.TypeFor[json.Unmarshaler]())
}

// jsonFields maps a struct's JSON member names to field index paths,
// flattening embedded structs as encoding/json does: a member of the outer
// struct wins over an embedded one of the same name. Results are cached
// per type.
func jsonFields(t reflect.Type) map[string][]int {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string][]int)
	}
	out := make(map[string][]int, t.NumField())
	var embedded [][2]any
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			embedded = append(embedded, [2]any{i, ft})
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = []int{i}
	}
	for _, e := range embedded {
		for n, idx := range jsonFields(e[1].(reflect.Type)) {
			if _, taken := out[n]; !taken {
				out[n] = append([]int{e[0].(int)}, idx...)
			}
		}
	}
	fieldCache.Store(t, out)
	return out
}

// fieldByIndex is reflect.Value.FieldByIndex that allocates nil embedded
// struct pointers on the way.
func fieldByIndex(v reflect.Value, index []int) reflect.Value {
	for i, x := range index {
		if i > 0 && v.Kind() == reflect.Pointer {
			if v.IsNil() {
				v.Set(reflect.New(v.Type().Elem()))
			}
			v = v.Elem()
		}
		v = v.Field(x)
	}
	return v
}

var fieldCache sync.Map // reflect.Type -> map[string][]int

// typeMessage says what JSON type a Go type expects.
func typeMessage(t reflect.Type) string {
	if t.Implements(reflect.TypeFor[json.Unmarshaler]()) || reflect.PointerTo(t).Implements(reflect.TypeFor[json.Unmarshaler]()) {
		return "has an invalid type"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "must be a string"
	case reflect.Bool:
		return "must be a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "must be an integer"
	case reflect.Float32, reflect.Float64:
		return "must be a number"
	case reflect.Slice, reflect.Array:
		return "must be an array"
	case reflect.Map, reflect.Struct:
		return "must be an object"
	}
	return "has an invalid type"
}
