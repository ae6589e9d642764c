package auth

// CacheLen reports how many tokens v remembers, for tests of the cache bound.
func CacheLen(v *Verifier) int {
	if v.cache == nil {
		return 0
	}
	return v.cache.len()
}

// SetFastPath turns v's fast path of a token's first use on or off, so
// that a test can compare it with the full path.
func SetFastPath(v *Verifier, on bool) { v.fast = on }

// PlainString is plainString, for the external tests.
var PlainString = plainString

// CheckCompact is checkCompact, for the external tests.
var CheckCompact = checkCompact
