package badger_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage"
	"github.com/rxgate/rxgate/storage/backup"
	"github.com/rxgate/rxgate/storage/badger"
)

// scidsOf walks the patient's prescriptions.
func scidsOf(t *testing.T, s *badger.Store, rx storage.Prescription) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	req := storage.PageRequest{Limit: 50}
	for {
		_, page, info, err := s.ListPrescriptionsJSON(t.Context(), rx.OrgID, rx.UserID, rx.PatientID, req, nil)
		require.NoError(t, err)
		var items []struct {
			SCID string `json:"scid"`
		}
		require.NoError(t, json.Unmarshal(page, &items))
		for _, it := range items {
			out[it.SCID] = true
		}
		if info.LastKey == "" {
			return out
		}
		req.Cursor = info.LastKey
	}
}

// eventsBySCID reads every event and maps its prescription's scid to it.
func eventsBySCID(t *testing.T, s *badger.Store) map[string]storage.Event {
	t.Helper()
	out := map[string]storage.Event{}
	req := storage.PageRequest{Limit: 100}
	for {
		page, info, err := s.ListEvents(t.Context(), storage.EventFilter{}, req)
		require.NoError(t, err)
		for _, ev := range page {
			var p struct {
				Data struct {
					SCID string `json:"scid"`
				} `json:"data"`
			}
			require.NoError(t, json.Unmarshal(ev.Payload, &p))
			out[p.Data.SCID] = ev
		}
		if info.LastKey == "" {
			return out
		}
		req.Cursor = info.LastKey
	}
}

// TestBackupWhileWriting takes a backup while prescriptions are created
// and a patient updated, restores it into an empty directory, and checks
// the restored store: every write acknowledged before the backup began is
// there; every prescription has its event and every event its
// prescription; every pending event has its jobs; and it serves, also the
// cursors issued before the backup. Plain and encrypted.
func TestBackupWhileWriting(t *testing.T) {
	t.Parallel()
	for _, encrypted := range []bool{false, true} {
		t.Run("encrypted="+strconv.FormatBool(encrypted), func(t *testing.T) {
			t.Parallel()
			var key []byte
			if encrypted {
				key = newKey(t)
			}
			s := open(t, badger.Options{Dir: t.TempDir(), EncryptionKey: key})
			rx := benchWorld(t, s)
			ctx := t.Context()
			pt, err := s.GetPatient(ctx, rx.OrgID, rx.UserID, rx.PatientID)
			require.NoError(t, err)

			var mu sync.Mutex
			acked := map[string]bool{}
			lastName := 0
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for w := range 4 {
				wg.Go(func() {
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						p := rx
						p.ItemName = "Item " + strconv.Itoa(w) + "-" + strconv.Itoa(i)
						if err := s.CreatePrescription(context.Background(), &p); err != nil {
							t.Error(err)
							return
						}
						mu.Lock()
						acked[p.SCID] = true
						mu.Unlock()
					}
				})
			}
			wg.Go(func() {
				for i := 1; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					name := "Name" + strconv.Itoa(i)
					if _, err := s.UpdatePatient(context.Background(), pt.OrgID, pt.UserID, pt.ID, func(p *storage.Patient) error {
						p.GivenName = &name
						return nil
					}); err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					lastName = i
					mu.Unlock()
				}
			})
			// Deliveries: claim due jobs and record them delivered, as the
			// queue does.
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					res, err := s.ClaimJobs(context.Background(), storage.ClaimRequest{Owner: "backup-test", Now: time.Now().Add(time.Second), LeaseFor: time.Minute, Max: 16})
					if err != nil {
						t.Error(err)
						return
					}
					var outcomes []storage.Outcome
					for _, j := range res.Jobs {
						outcomes = append(outcomes, storage.Outcome{Job: j.Job, Attempt: storage.Attempt{AttemptedAt: time.Now(), EndpointID: j.EndpointID, StatusCode: 200}, Next: storage.EventDelivered})
					}
					if len(outcomes) > 0 {
						if _, err := s.RecordOutcomes(context.Background(), outcomes); err != nil {
							t.Error(err)
							return
						}
					}
				}
			})
			for { // let some writes through first
				mu.Lock()
				n := len(acked)
				mu.Unlock()
				if n >= 300 {
					break
				}
			}
			_, _, first, err := s.ListPrescriptionsJSON(ctx, rx.OrgID, rx.UserID, rx.PatientID, storage.PageRequest{Limit: 10}, nil)
			require.NoError(t, err)
			mu.Lock()
			before := make(map[string]bool, len(acked))
			for k := range acked {
				before[k] = true
			}
			nameBefore := lastName
			mu.Unlock()

			path := filepath.Join(t.TempDir(), "store.rxb")
			f, err := os.Create(path)
			require.NoError(t, err)
			h, err := s.WriteBackup(ctx, f, "test")
			require.NoError(t, err)
			require.NoError(t, f.Close())
			close(stop)
			wg.Wait()
			require.Equal(t, encrypted, h.Encrypted)
			require.Positive(t, h.Entries)

			dir := filepath.Join(t.TempDir(), "restored")
			_, err = badger.Restore(path, dir, key)
			require.NoError(t, err)
			r := open(t, badger.Options{Dir: dir, EncryptionKey: key})
			scids := scidsOf(t, r, rx)
			for scid := range before {
				require.True(t, scids[scid], "the acknowledged create %s is in the backup", scid)
			}
			events := eventsBySCID(t, r)
			delivered := 0
			require.Len(t, events, len(scids), "one event per prescription")
			pendingJobs, _, err := r.ListJobs(ctx)
			require.NoError(t, err)
			jobsOf := map[string]int{}
			for _, j := range pendingJobs {
				jobsOf[j.EventID]++
			}
			for scid := range scids {
				ev, ok := events[scid]
				require.True(t, ok, "the prescription %s has its event", scid)
				if ev.Status == storage.EventPending {
					require.Equal(t, 1, jobsOf[ev.ID], "the pending event of %s has its job", scid)
				} else {
					require.Zero(t, jobsOf[ev.ID], "the %s event of %s has no job left", ev.Status, scid)
				}
				delivered += map[bool]int{true: 1}[ev.Status == storage.EventDelivered]
			}
			require.Positive(t, delivered, "deliveries ran while the backup was taken")
			got, err := r.GetPatient(ctx, pt.OrgID, pt.UserID, pt.ID)
			require.NoError(t, err)
			n, err := strconv.Atoi((*got.GivenName)[len("Name"):])
			require.NoError(t, err)
			require.GreaterOrEqual(t, n, nameBefore, "the last update acknowledged before the backup is there")
			_, _, _, err = r.ListPrescriptionsJSON(ctx, rx.OrgID, rx.UserID, rx.PatientID, storage.PageRequest{Limit: 10, Cursor: first.LastKey}, nil)
			require.NoError(t, err, "a cursor issued before the backup works on the restored store")
		})
	}
}

// TestRestoreRefusals: a directory that is not empty is refused; a
// truncated file is refused before anything is written, and the target
// is left as it was.
func TestRestoreRefusals(t *testing.T) {
	t.Parallel()
	s := open(t, badger.Options{Dir: t.TempDir()})
	benchWorld(t, s)
	path := filepath.Join(t.TempDir(), "store.rxb")
	f, err := os.Create(path)
	require.NoError(t, err)
	_, err = s.WriteBackup(t.Context(), f, "test")
	require.NoError(t, err)
	require.NoError(t, f.Close())

	full := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(full, "keep"), []byte("x"), 0o600))
	_, err = badger.Restore(path, full, nil)
	require.ErrorContains(t, err, "not empty")

	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	cut := filepath.Join(t.TempDir(), "cut.rxb")
	require.NoError(t, os.WriteFile(cut, raw[:len(raw)-10], 0o600))
	empty := t.TempDir()
	_, err = badger.Restore(cut, empty, nil)
	require.ErrorIs(t, err, backup.ErrInvalid)
	entries, err := os.ReadDir(empty)
	require.NoError(t, err)
	require.Empty(t, entries, "the directory is left empty")
	absent := filepath.Join(t.TempDir(), "absent")
	_, err = badger.Restore(path, absent, newKey(t))
	require.Error(t, err, "a key for an unencrypted backup")
	_, err = os.Stat(absent)
	require.ErrorIs(t, err, os.ErrNotExist, "an absent directory stays absent")
}
