package auth_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"math/big"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/testsuite/fake"
)

// BenchmarkFirstUse is a token's first use (issue 31, item 3): for RS256
// and ES256, "verify" is Verifier.Verify of a token the cache does not
// hold (parsing, the header checks, the key lookup, the signature, the
// claims' validation and the cache insert; Forget drops the token again
// after each call), and "signature" is the floor: the signing input's
// SHA-256 and the signature check alone, with crypto/rsa or
// crypto/ecdsa. verify minus signature is what verification costs beyond
// the signature itself.
func BenchmarkFirstUse(b *testing.B) {
	for _, tc := range []struct {
		name string
		key  func(testing.TB) fake.Key
	}{
		{"RS256", func(t testing.TB) fake.Key { return fake.RSAKey(t, 3, "bench") }},
		{"ES256", func(t testing.TB) fake.Key { return fake.ECKey(t, "bench") }},
	} {
		key := tc.key(b)
		idp := fake.NewIdP(b, fake.WithKeys(key))
		v := newVerifier(b, idp.URL, newClock(), nil)
		require.NoError(b, v.Ready(b.Context()))
		token := key.Sign(b, claims("user-1"))
		b.Run(tc.name+"/verify", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.Verify(b.Context(), token); err != nil {
					b.Fatal(err)
				}
				v.Forget(token)
			}
		})
		b.Run(tc.name+"/signature", signatureOnly(key, token))
	}
}

// signatureOnly checks token's signature with the standard library alone.
func signatureOnly(key fake.Key, token string) func(*testing.B) {
	return func(b *testing.B) {
		i := strings.LastIndexByte(token, '.')
		input, encoded := token[:i], token[i+1:]
		sig, err := base64.RawURLEncoding.DecodeString(encoded)
		require.NoError(b, err)
		b.ReportAllocs()
		for b.Loop() {
			sum := sha256.Sum256([]byte(input))
			switch priv := key.Private.(type) {
			case *rsa.PrivateKey:
				if err := rsa.VerifyPKCS1v15(&priv.PublicKey, crypto.SHA256, sum[:], sig); err != nil {
					b.Fatal(err)
				}
			case *ecdsa.PrivateKey:
				r, s := new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])
				if !ecdsa.Verify(&priv.PublicKey, sum[:], r, s) {
					b.Fatal("ecdsa: signature does not verify")
				}
			}
		}
	}
}
