package auth_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/rxgate/rxgate/app/auth"
)

// TestCheckCompact: only three non-empty segments of the base64url
// alphabet pass, whichever byte breaks the rule.
func TestCheckCompact(t *testing.T) {
	alphabet := "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	assert.NoError(t, auth.CheckCompact(alphabet+"."+alphabet+"."+alphabet))
	assert.NoError(t, auth.CheckCompact("a.b.c"))
	for _, bad := range []string{"", "a", "a.b", "a.b.c.d", "a.b.c.d.e", ".b.c", "a..c", "a.b.", "..",
		`{"payload":"a"}`, "a.b.c=", "a+b.c.d", "a/b.c.d", "a.b c.d", "a.b.c\n", "a.\x00.c", "a.é.c", "a.b.\xff"} {
		assert.Error(t, auth.CheckCompact(bad), "%q", bad)
	}
	// Every byte outside the alphabet and the dot, in every segment.
	for c := 0; c < 256; c++ {
		if strings.IndexByte(alphabet, byte(c)) >= 0 || c == '.' {
			continue
		}
		for _, tok := range []string{string(rune(0)) + ".b.c", "a." + "x" + ".c", "a.b." + "x"} {
			tok = strings.Replace(tok, "\x00", string([]byte{byte(c)}), 1)
			tok = strings.Replace(tok, "x", string([]byte{byte(c)}), 1)
			assert.Error(t, auth.CheckCompact(tok), "byte %#x in %q", c, tok)
		}
	}
}
