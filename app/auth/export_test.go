package auth

// CacheLen reports how many tokens v remembers, for tests of the cache bound.
func CacheLen(v *Verifier) int {
	if v.cache == nil {
		return 0
	}
	return v.cache.len()
}
