package app

import (
	"testing"

	"github.com/invopop/validation"
	"github.com/invopop/validation/is"
)

// isUUIDByRule is what pathUUID asked before isUUID: the is.UUID rule.
func isUUIDByRule(s string) bool {
	return validation.Validate(s, validation.Required, is.UUID) == nil
}

func TestIsUUID(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{"0195f3a2-7c1e-7d4b-9a55-2f6c1e0b8a31", true},
		{"00000000-0000-0000-0000-000000000000", true},
		{"", false},
		{"0195F3A2-7C1E-7D4B-9A55-2F6C1E0B8A31", false}, // upper case
		{"0195f3a27c1e7d4b9a552f6c1e0b8a31", false},     // no dashes
		{"0195f3a2-7c1e-7d4b-9a55-2f6c1e0b8a3", false},  // short
		{"0195f3a2-7c1e-7d4b-9a55-2f6c1e0b8a311", false},
		{"0195f3a2_7c1e-7d4b-9a55-2f6c1e0b8a31", false},
		{"0195f3a2-7c1e-7d4b-9a55-2f6c1e0b8a3g", false},
		{"{0195f3a2-7c1e-7d4b-9a55-2f6c1e0b8a3}", false},
		{"0195f3a2-7c1e-7d4b-9a55-2f6c1e0b8a3\n", false},
	}
	for _, tt := range tests {
		if got := isUUID(tt.in); got != tt.want {
			t.Errorf("isUUID(%q) = %v, want %v", tt.in, got, tt.want)
		}
		if got := isUUIDByRule(tt.in); got != tt.want {
			t.Errorf("the is.UUID rule says %v for %q, the table %v", got, tt.in, tt.want)
		}
	}
}

// FuzzIsUUID holds isUUID to the is.UUID rule it replaced in pathUUID.
func FuzzIsUUID(f *testing.F) {
	for _, s := range []string{"0195f3a2-7c1e-7d4b-9a55-2f6c1e0b8a31", "0195f3a2-7c1e-7d4b-9a55-2f6c1e0b8a3\n", "", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := isUUID(s), isUUIDByRule(s); got != want {
			t.Fatalf("isUUID(%q) = %v, the is.UUID rule %v", s, got, want)
		}
	})
}
