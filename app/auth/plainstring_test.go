package auth_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/app/auth"
)

// TestPlainString: a string the fast path takes without encoding/json is
// one json.Unmarshal decodes to the same value, and every JSON string it
// declines (escapes, invalid UTF-8) or non-string is left to
// encoding/json.
func TestPlainString(t *testing.T) {
	taken := []string{`""`, `"rs"`, `"RS256"`, `"https://idp.example/"`, `"Zoë 日本"`, `"a b/c:d"`}
	for _, raw := range taken {
		got, ok := auth.PlainString([]byte(raw))
		require.True(t, ok, raw)
		var want string
		require.NoError(t, json.Unmarshal([]byte(raw), &want), raw)
		require.Equal(t, want, got, raw)
	}
	declined := []string{`"a\"b"`, `"a\\b"`, `"\u0041"`, "\"a\x01b\"", "\"\xff\"", "\"\xc3\"", `"`, `"a`, `a"`, `123`, `true`, `null`,
		`["a"]`, `{"a":"b"}`, ``}
	for _, raw := range declined {
		_, ok := auth.PlainString([]byte(raw))
		require.False(t, ok, raw)
	}
}

// FuzzPlainString: whatever the fast path takes, json.Unmarshal takes
// too, with the same value.
func FuzzPlainString(f *testing.F) {
	for _, s := range []string{`"rs"`, `"a\"b"`, "\"\xff\"", `1`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, ok := auth.PlainString(raw)
		if !ok {
			return
		}
		var want string
		if err := json.Unmarshal(raw, &want); err != nil {
			t.Fatalf("taken %q, which json.Unmarshal refuses: %v", raw, err)
		}
		if got != want {
			t.Fatalf("%q: %q, json.Unmarshal %q", raw, got, want)
		}
	})
}
