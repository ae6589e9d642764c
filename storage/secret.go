package storage

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
)

// Secrets (partner, organization, webhook) are 256-bit random strings made
// by NewSecret. Of partner and organization secrets only the SHA-256 is
// stored: a slow password hash buys nothing against guessing 256 random
// bits and would put milliseconds on every request, since the organization
// secret is checked on each one. Webhook secrets are stored as they are, of
// necessity: signing a delivery needs the secret itself.

// NewSecret returns a new random secret, 43 URL-safe characters.
func NewSecret() string {
	return base64.RawURLEncoding.EncodeToString(randomBytes(32))
}

// HashSecret returns the hash under which a secret is stored.
func HashSecret(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

// SecretMatches reports, in constant time, whether secret hashes to hash.
func SecretMatches(hash []byte, secret string) bool {
	h := sha256.Sum256([]byte(secret))
	return len(hash) == len(h) && subtle.ConstantTimeCompare(hash, h[:]) == 1
}
