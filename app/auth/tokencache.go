package auth

import (
	"crypto/sha256"
	"sync"
	"time"
	"unsafe"
)

// tokenKey identifies a token in the cache: its SHA-256. Hashing bounds every entry to a fixed
// size whatever the token length, and keeps live bearer tokens out of long-lived memory.
// Telling two tokens apart relies on SHA-256 collision resistance.
type tokenKey [sha256.Size]byte

func keyOf(token string) tokenKey {
	// Hash the string's bytes in place: converting to []byte would copy the token on every
	// request. sha256 neither modifies nor retains its input.
	return sha256.Sum256(unsafe.Slice(unsafe.StringData(token), len(token)))
}

// cacheEntry is a verified token. It is valid while from <= now < until; both bounds already
// include the leeway. The zero from means no lower bound.
type cacheEntry struct {
	p     *Principal
	from  time.Time
	until time.Time
	gen   uint64 // keyState.gen the token was verified under
}

type lookup int

const (
	cacheMiss lookup = iota
	cacheHit
	cacheExpired     // the token was verified once and has expired since
	cacheNotYetValid // only when the clock went backwards
)

// tokenCache remembers verified tokens until they expire. It holds at most
// len(shards)*perShard <= the configured size entries; expired entries are dropped when
// looked up or when their shard is full.
type tokenCache struct {
	perShard int
	shards   []cacheShard
}

type cacheShard struct {
	mu sync.RWMutex
	m  map[tokenKey]cacheEntry // guarded by mu
}

const (
	cacheShardCount   = 16
	cacheMinSharded   = 256 // below this size one shard keeps the bound exact and eviction fair
	cacheEvictDivisor = 8   // a full shard with nothing expired drops 1/8 of its entries
)

func newTokenCache(size int) *tokenCache {
	n := 1
	if size >= cacheMinSharded {
		n = cacheShardCount
	}
	c := &tokenCache{perShard: size / n, shards: make([]cacheShard, n)}
	for i := range c.shards {
		c.shards[i].m = make(map[tokenKey]cacheEntry)
	}
	return c
}

func (c *tokenCache) shard(k tokenKey) *cacheShard {
	return &c.shards[int(k[0])%len(c.shards)]
}

// get returns the principal cached for k when it is still valid at now and was verified under
// key generation gen. Stale entries are removed.
func (c *tokenCache) get(k tokenKey, now time.Time, gen uint64) (*Principal, lookup) {
	s := c.shard(k)
	s.mu.RLock()
	e, ok := s.m[k]
	s.mu.RUnlock()
	switch {
	case !ok:
		return nil, cacheMiss
	case e.gen != gen:
		// A key was removed or replaced since: verify the token again against the new set.
		s.remove(k, e.p)
		return nil, cacheMiss
	case !now.Before(e.until):
		s.remove(k, e.p)
		return nil, cacheExpired
	case now.Before(e.from):
		return nil, cacheNotYetValid
	}
	return e.p, cacheHit
}

// put remembers e under k, making room when the shard is full.
func (c *tokenCache) put(k tokenKey, e cacheEntry, now time.Time) {
	s := c.shard(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[k]; !ok && len(s.m) >= c.perShard {
		s.evict(now, c.perShard)
	}
	s.m[k] = e
}

// forget drops k.
func (c *tokenCache) forget(k tokenKey) {
	s := c.shard(k)
	s.mu.Lock()
	delete(s.m, k)
	s.mu.Unlock()
}

func (c *tokenCache) len() int {
	n := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.RLock()
		n += len(s.m)
		s.mu.RUnlock()
	}
	return n
}

// remove deletes k unless it was replaced by another verification in the meantime.
func (s *cacheShard) remove(k tokenKey, p *Principal) {
	s.mu.Lock()
	if cur, ok := s.m[k]; ok && cur.p == p {
		delete(s.m, k)
	}
	s.mu.Unlock()
}

// evict drops expired entries and, when that is not enough, an arbitrary chunk.
// The caller holds s.mu.
func (s *cacheShard) evict(now time.Time, limit int) {
	for k, e := range s.m {
		if !now.Before(e.until) {
			delete(s.m, k)
		}
	}
	if len(s.m) < limit {
		return
	}
	drop := max(1, limit/cacheEvictDivisor)
	for k := range s.m { // map iteration order is unspecified: this drops arbitrary entries
		delete(s.m, k)
		drop--
		if drop == 0 {
			return
		}
	}
}
