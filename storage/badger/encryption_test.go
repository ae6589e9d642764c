package badger_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage"
	"github.com/rxgate/rxgate/storage/badger"
)

func newKey(t *testing.T) []byte {
	t.Helper()
	k := make([]byte, 32)
	_, err := rand.Read(k)
	require.NoError(t, err)
	return k
}

// plantSecrets writes, through the store, a patient and a prescription
// with names no other test uses and a webhook endpoint (whose secret is
// kept in the clear, of necessity), closes the store, and returns the
// strings that must not be readable on disk.
func plantSecrets(t *testing.T, dir string, key []byte) [][]byte {
	t.Helper()
	s, err := badger.Open(badger.Options{Dir: dir, EncryptionKey: key})
	require.NoError(t, err)
	ctx := t.Context()
	p := &storage.Partner{Name: "Encryption partner", SecretHash: storage.HashSecret(storage.NewSecret())}
	require.NoError(t, s.CreatePartner(ctx, p))
	o := &storage.Organization{Name: "Encryption clinic", PartnerID: p.ID, SecretHash: storage.HashSecret(storage.NewSecret())}
	require.NoError(t, s.CreateOrganization(ctx, o))
	u := &storage.User{OrgID: o.ID, Email: "gp@encryption.example", GivenName: "Ada", FamilyName: "Byron", Role: storage.RolePrescriber}
	require.NoError(t, s.CreateUser(ctx, u))
	family, given, item := "Quokkafamily"+storage.NewSecret()[:8], "Zanzigiven"+storage.NewSecret()[:8], "Itemname"+storage.NewSecret()[:8]
	pt := &storage.Patient{OrgID: o.ID, UserID: u.ID, PartnerPatientID: "enc-1", PatientFields: storage.PatientFields{FamilyName: &family, GivenName: &given}}
	require.NoError(t, s.CreatePatient(ctx, pt))
	rx := &storage.Prescription{OrgID: o.ID, UserID: u.ID, PatientID: pt.ID}
	rx.ItemName = item
	require.NoError(t, s.CreatePrescription(ctx, rx))
	e := &storage.WebhookEndpoint{PartnerID: p.ID, URL: "https://hooks.example/rx", Secret: "whsec_" + storage.NewSecret()}
	require.NoError(t, s.CreateWebhookEndpoint(ctx, e))
	require.NoError(t, s.Close())
	return [][]byte{[]byte(family), []byte(given), []byte(item), []byte(e.Secret)}
}

// found lists the planted strings that some file of dir holds as bytes.
// It streams each file (Badger's logs are sparse files of up to 2 GiB),
// keeping the tail of each chunk so that a string across two is seen.
func found(t *testing.T, dir string, planted [][]byte) (hits []string) {
	t.Helper()
	longest := 0
	for _, p := range planted {
		longest = max(longest, len(p))
	}
	buf := make([]byte, 1<<20+longest)
	require.NoError(t, filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		hit := make([]bool, len(planted))
		kept := 0 // bytes carried over from the previous chunk
		for {
			n, err := io.ReadFull(f, buf[kept:])
			window := buf[:kept+n]
			for i, p := range planted {
				hit[i] = hit[i] || bytes.Contains(window, p)
			}
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				break
			}
			if err != nil {
				return err
			}
			kept = copy(buf, window[len(window)-max(longest-1, 0):])
		}
		for i, p := range planted {
			if hit[i] {
				hits = append(hits, string(p)+" in "+d.Name())
			}
		}
		return nil
	}))
	return hits
}

// TestEncryptionAtRest: with a key, no file of the store holds a patient's
// names, a prescription's item or a webhook secret; without one, they are
// there to read (so the check can fail).
func TestEncryptionAtRest(t *testing.T) {
	t.Parallel()
	plain := t.TempDir()
	require.NotEmpty(t, found(t, plain, plantSecrets(t, plain, nil)), "an unencrypted store holds its data in the clear")
	enc := t.TempDir()
	require.Empty(t, found(t, enc, plantSecrets(t, enc, newKey(t))), "an encrypted store holds nothing in the clear")
}

// digest is a hash of every file of dir, names and bytes.
func digest(t *testing.T, dir string) [32]byte {
	t.Helper()
	h := sha256.New()
	require.NoError(t, filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		h.Write([]byte(path))
		_, err = io.Copy(h, f)
		return err
	}))
	return [32]byte(h.Sum(nil))
}

// TestEncryptionKeyMismatch: an encrypted store without a key or with
// another, and an unencrypted store with a key, are each refused with
// their own error, and the directory is left byte for byte as it was; the
// right key still opens it.
func TestEncryptionKeyMismatch(t *testing.T) {
	t.Parallel()
	key := newKey(t)
	enc, plain := t.TempDir(), t.TempDir()
	plantSecrets(t, enc, key)
	plantSecrets(t, plain, nil)
	tests := []struct {
		name string
		dir  string
		key  []byte
		want error
	}{
		{"encrypted store, no key", enc, nil, badger.ErrEncrypted},
		{"encrypted store, another key", enc, newKey(t), badger.ErrWrongKey},
		{"unencrypted store, a key", plain, key, badger.ErrNotEncrypted},
	}
	for _, tt := range tests {
		before := digest(t, tt.dir)
		_, err := badger.Open(badger.Options{Dir: tt.dir, EncryptionKey: tt.key})
		require.ErrorIs(t, err, tt.want, tt.name)
		require.Equal(t, before, digest(t, tt.dir), "%s: the directory is untouched", tt.name)
	}
	_, err := badger.Open(badger.Options{Dir: t.TempDir(), EncryptionKey: key[:16]})
	require.ErrorContains(t, err, "32 bytes")
	for dir, k := range map[string][]byte{enc: key, plain: nil} {
		s := open(t, badger.Options{Dir: dir, EncryptionKey: k})
		require.NoError(t, s.Ping(t.Context()))
	}
}

// TestRotateKey: after a rotation only the new key opens the store, and
// its data is all there; a wrong old key is refused and changes nothing.
func TestRotateKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	oldKey, newKey_ := newKey(t), newKey(t)
	planted := plantSecrets(t, dir, oldKey)
	before := digest(t, dir)
	require.Error(t, badger.RotateKey(dir, newKey(t), newKey_), "a wrong old key")
	require.Equal(t, before, digest(t, dir))
	require.NoError(t, badger.RotateKey(dir, oldKey, newKey_))
	_, err := badger.Open(badger.Options{Dir: dir, EncryptionKey: oldKey})
	require.ErrorIs(t, err, badger.ErrWrongKey, "the old key no longer opens it")
	s := open(t, badger.Options{Dir: dir, EncryptionKey: newKey_})
	page, _, err := s.ListEvents(t.Context(), storage.EventFilter{}, storage.PageRequest{Limit: 10})
	require.NoError(t, err)
	require.Len(t, page, 1, "the data is all there")
	require.Contains(t, string(page[0].Payload), "scid")
	require.Empty(t, found(t, dir, planted))
}

// BenchmarkEncryption compares, on a disk store, an unencrypted store with
// an encrypted one: the first page of a patient's 2,000 prescriptions read
// after a reopen (from the tables on disk), and durable prescription
// creates at concurrency 8 (each synced).
func BenchmarkEncryption(b *testing.B) {
	for _, mode := range []string{"off", "on"} {
		var key []byte
		if mode == "on" {
			key = make([]byte, 32)
			_, _ = rand.Read(key)
		}
		b.Run("page/encryption="+mode, func(b *testing.B) {
			dir := b.TempDir()
			s, err := badger.Open(badger.Options{Dir: dir, EncryptionKey: key})
			require.NoError(b, err)
			rx := benchWorld(b, s)
			for i := range 2000 {
				p := rx
				p.ItemName = "Amoxicillin " + strconv.Itoa(i)
				require.NoError(b, s.CreatePrescription(b.Context(), &p))
			}
			require.NoError(b, s.Close())
			s = open(b, badger.Options{Dir: dir, EncryptionKey: key})
			buf := make([]byte, 0, 64<<10)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				_, out, info, err := s.ListPrescriptionsJSON(b.Context(), rx.OrgID, rx.UserID, rx.PatientID, storage.PageRequest{Limit: 20}, buf[:0])
				if err != nil || info.Count != 20 || len(out) < 2 {
					b.Fatal(info.Count, err)
				}
			}
		})
		b.Run("create-c8/encryption="+mode, func(b *testing.B) {
			s := open(b, badger.Options{Dir: b.TempDir(), EncryptionKey: key})
			rx := benchWorld(b, s)
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			for range 8 {
				wg.Go(func() {
					for next.Add(1) <= int64(b.N) {
						p := rx
						p.ItemName = "Amoxicillin"
						if err := s.CreatePrescription(b.Context(), &p); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "creates/s")
		})
	}
}

// benchWorld makes a validated organization with a webhook endpoint, a
// prescriber and a patient (given name "Name0"), and returns a
// prescription to create for it.
func benchWorld(tb testing.TB, s *badger.Store) storage.Prescription {
	tb.Helper()
	ctx := context.Background()
	p := &storage.Partner{Name: "Bench"}
	require.NoError(tb, s.CreatePartner(ctx, p))
	o := &storage.Organization{PartnerID: p.ID, Name: "Clinic"}
	require.NoError(tb, s.CreateOrganization(ctx, o))
	_, err := s.ValidateOrganization(ctx, o.ID)
	require.NoError(tb, err)
	require.NoError(tb, s.CreateWebhookEndpoint(ctx, &storage.WebhookEndpoint{PartnerID: p.ID, URL: "https://hooks.example/rx"}))
	u := &storage.User{OrgID: o.ID, Email: "grace@example.com", GivenName: "Grace", FamilyName: "Hopper"}
	require.NoError(tb, s.CreateUser(ctx, u))
	name := "Name0"
	pt := &storage.Patient{OrgID: o.ID, UserID: u.ID, PatientFields: storage.PatientFields{GivenName: &name}}
	require.NoError(tb, s.CreatePatient(ctx, pt))
	return storage.Prescription{OrgID: o.ID, UserID: u.ID, PatientID: pt.ID,
		PrescriptionItem: storage.PrescriptionItem{Quantity: "20", ItemStrength: "500 mg", ItemForm: "capsule", PatientInstructions: "One capsule three times a day"}}
}
