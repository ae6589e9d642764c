package cli

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/config"
	"github.com/rxgate/rxgate/storage"
	"github.com/rxgate/rxgate/storage/badger"
)

// TestAuditVerifyCommandTampered runs a server on a disk store with an
// audit key file, makes audited partner reads and writes and operator
// requests, and stops it. Then, on the stopped store, it changes the
// trail below the chain and restarts the server each time: a changed
// byte, a deleted value and two swapped values each make
// `rxgate audit verify --key-file` exit 1 naming the first affected seq,
// and the untouched store verifies. Every byte of every stored value,
// each flipped two ways, is checked with the same verifier the command
// runs, on the stopped store: a restart for each would not fit the time
// budget.
func TestAuditVerifyCommandTampered(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(t.TempDir(), "audit.key")
	t.Setenv("RXGATE_AUDIT__KEY_FILE", keyFile)
	t.Setenv("RXGATE_AUDIT__CHECKPOINT_EVERY", "3")
	facts, _, stop := startSandbox(t, "--data-dir", dir)
	var token string
	for _, u := range facts.Users {
		if u.UserID == facts.RxUserID {
			token = u.Token
		}
	}
	require.NotEmpty(t, token)
	partner := map[string]string{"Authorization": "Bearer " + token, "x-organization-secret": facts.OrganizationSecret}
	user := facts.BaseURL + "/v1/organizations/" + facts.OrganizationID + "/users/" + facts.RxUserID
	admin := map[string]string{"Authorization": "Bearer " + facts.AdminAPIKey}
	for range 3 {
		for _, r := range []struct{ method, url string }{
			{http.MethodGet, user + "/patients/" + facts.RxPatientID + "/prescriptions"},
			{http.MethodGet, user},
			{http.MethodPut, user + "/enable"},
		} {
			status, body := do(t, r.method, r.url, partner, "")
			require.Less(t, status, 300, "%s %s: %s", r.method, r.url, body)
		}
		status, body := do(t, http.MethodGet, facts.AdminURL+"/admin/v1/organizations", admin, "")
		require.Equal(t, http.StatusOK, status, body)
	}
	require.Equal(t, 0, stop())

	seed, err := config.ReadKeyFile("key", keyFile)
	require.NoError(t, err)
	pub := ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)
	ctx := context.Background()

	// onStore opens the stopped store, runs fn on it and closes it.
	onStore := func(t *testing.T, fn func(s *badger.Store)) {
		t.Helper()
		s, err := badger.Open(badger.Options{Dir: dir})
		require.NoError(t, err)
		defer func() { require.NoError(t, s.Close()) }()
		fn(s)
	}
	// onCopy runs fn on a copy of the stopped store, opened as onStore
	// opens it.
	onCopy := func(t *testing.T, fn func(s *badger.Store)) {
		t.Helper()
		cp := filepath.Join(t.TempDir(), "data")
		require.NoError(t, os.CopyFS(cp, os.DirFS(dir)))
		s, err := badger.Open(badger.Options{Dir: cp})
		require.NoError(t, err)
		defer func() { require.NoError(t, s.Close()) }()
		fn(s)
	}
	// verifyStored is what the command does, on the stopped store: nil
	// findings means whole. A value that no longer decodes is listed as a
	// corrupt entry, never an error, and verify names its seq.
	verifyStored := func(t *testing.T, s *badger.Store) []storage.AuditFinding {
		t.Helper()
		entries, _, err := s.ListAudit(ctx, storage.AuditFilter{}, storage.PageRequest{Limit: 100000})
		require.NoError(t, err, "a damaged value is listed, not an error")
		cps, err := s.ListAuditCheckpoints(ctx)
		require.NoError(t, err)
		return storage.VerifyAudit(entries, cps, pub)
	}
	// verify restarts the server on the store and runs the command.
	verify := func(t *testing.T) (string, int) {
		t.Helper()
		facts, _, stop := startSandbox(t, "--data-dir", dir)
		defer func() { require.Equal(t, 0, stop()) }()
		t.Setenv("RXGATE_ADMIN__API_KEY", facts.AdminAPIKey)
		var out, errOut bytes.Buffer
		code := run(ctx, Audit, []string{"verify", "--admin-url", facts.AdminURL, "--key-file", keyFile}, &out, &errOut)
		return out.String() + errOut.String(), code
	}

	out, code := verify(t)
	require.Equal(t, 0, code, "the untouched store verifies: %s", out)
	require.Contains(t, out, "audit trail whole")

	// The stored values in key order, and the first seq each holds.
	var keys []uint64
	var values map[uint64][]byte
	onStore(t, func(s *badger.Store) {
		values, err = s.RawAuditValues(ctx)
		require.NoError(t, err)
		require.Empty(t, verifyStored(t, s))
	})
	for k := range values {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	require.GreaterOrEqual(t, len(keys), 6, "enough stored values to tamper with")
	firstSeq := func(i int) uint64 {
		if i == 0 {
			return 1
		}
		return keys[i-1] + 1
	}

	t.Run("every byte", func(t *testing.T) {
		// Each change is a new version of its key, which every later
		// listing steps over until a compaction drops it: thousands of
		// changes on one store make the run quadratic. So the changes
		// run on fresh copies of the stopped store, a bounded number
		// on each; every change is still written, listed and verified
		// on a store as the command reads it.
		const changesPerCopy = 256
		caught := 0
		for _, k := range keys {
			orig := values[k]
			for start := 0; start < len(orig); start += changesPerCopy / 2 {
				onCopy(t, func(s *badger.Store) {
					for off := start; off < min(start+changesPerCopy/2, len(orig)); off++ {
						for _, flip := range []byte{0x01, 0x80} {
							b := bytes.Clone(orig)
							b[off] ^= flip
							require.NoError(t, s.SetRawAuditValue(ctx, k, b))
							// Which seq is named depends on the byte: a
							// changed seq field names the seq it now claims.
							require.NotEmpty(t, verifyStored(t, s), "value %d byte %d ^ %#x went unnoticed", k, off, flip)
							caught++
						}
					}
					require.NoError(t, s.SetRawAuditValue(ctx, k, orig))
					require.Empty(t, verifyStored(t, s), "restored")
				})
			}
		}
		t.Logf("%d single-byte changes across %d values caught", caught, len(keys))
	})

	// Each case tampers, restarts the server and runs the command, which
	// must name the seq the storage-level verifier names first, within
	// the affected values; then the store is restored.
	for _, tc := range []struct {
		name   string
		tamper func(s *badger.Store) (from, to uint64)
	}{
		{"changed byte", func(s *badger.Store) (uint64, uint64) {
			// A byte near the value's end (its last record's hash):
			// the record still decodes, so the chain, not the
			// decoder, must catch it.
			k := keys[1]
			b := bytes.Clone(values[k])
			b[len(b)-5] ^= 0x01
			require.NoError(t, s.SetRawAuditValue(ctx, k, b))
			return firstSeq(1), k + 1
		}},
		{"undecodable", func(s *badger.Store) (uint64, uint64) {
			// Damaged past decoding: the API lists a corrupt entry at
			// the first seq the value covered, and verify names it.
			require.NoError(t, s.SetRawAuditValue(ctx, keys[2], values[keys[2]][:7]))
			return firstSeq(2), firstSeq(2)
		}},
		{"deleted", func(s *badger.Store) (uint64, uint64) {
			require.NoError(t, s.SetRawAuditValue(ctx, keys[2], nil))
			return firstSeq(2), keys[2] + 1
		}},
		{"swapped", func(s *badger.Store) (uint64, uint64) {
			require.NoError(t, s.SetRawAuditValue(ctx, keys[3], values[keys[4]]))
			require.NoError(t, s.SetRawAuditValue(ctx, keys[4], values[keys[3]]))
			return firstSeq(3), keys[4]
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var from, to uint64
			var want []storage.AuditFinding
			onStore(t, func(s *badger.Store) {
				from, to = tc.tamper(s)
				want = verifyStored(t, s)
			})
			require.NotEmpty(t, want)
			require.True(t, want[0].Seq >= from && want[0].Seq <= to, "first finding %v outside seqs %d-%d", want, from, to)
			out, code := verify(t)
			assert.Equal(t, 1, code, out)
			assert.Contains(t, out, fmt.Sprintf("seq %d: ", want[0].Seq), "the first affected seq is named")
			onStore(t, func(s *badger.Store) {
				for _, k := range keys {
					require.NoError(t, s.SetRawAuditValue(ctx, k, values[k]))
				}
				require.Empty(t, verifyStored(t, s), "restored")
			})
		})
	}
	out, code = verify(t)
	require.Equal(t, 0, code, "restored, the store verifies again: %s", out)
}
