package app

import (
	"bytes"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
)

// Optional is a request member that may be absent, null, or a value:
// partial updates change only what was supplied, and null clears a
// nullable member.
type Optional[T any] struct {
	Set  bool // the member was present
	Null bool // it was JSON null
	V    T    // the value when Set and not Null
}

// typeError is a JSON type mismatch whose message names the expected type.
type typeError struct{ msg string }

func (e typeError) Error() string { return e.msg }

// UnmarshalJSON records presence and decodes the value.
func (o *Optional[T]) UnmarshalJSON(b []byte) error {
	o.Set = true
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		o.Null = true
		return nil
	}
	if err := json.Unmarshal(b, &o.V); err != nil {
		var te typeError // the value's own type error says best what it takes
		if errors.As(err, &te) {
			return te
		}
		return typeError{typeMessage(reflect.TypeFor[T]())}
	}
	if s, ok := any(o.V).(string); ok && strings.ContainsRune(s, 0) {
		return typeError{"must not contain NUL characters"}
	}
	return nil
}

// Ptr returns the value as a pointer: nil when null.
func (o Optional[T]) Ptr() *T {
	if o.Null {
		return nil
	}
	v := o.V
	return &v
}

// apply sets *dst from o when the member was supplied.
func (o Optional[T]) apply(dst **T) {
	if o.Set {
		*dst = o.Ptr()
	}
}

// Value lets validation rules see the member's value: nil when absent or
// null, so that rules other than required pass over it.
func (o Optional[T]) Value() (driver.Value, error) {
	if !o.present() {
		return nil, nil
	}
	return o.V, nil
}

// isNull reports whether the member was sent as JSON null.
func (o Optional[T]) isNull() bool { return o.Null }

// present reports whether the member was supplied with a value.
func (o Optional[T]) present() bool { return o.Set && !o.Null }
