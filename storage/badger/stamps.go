package badger

import (
	"bytes"
	"sync/atomic"

	"github.com/cespare/xxhash/v2"
)

// changeStamps are the stamps of storage.ChangeStamper: a fixed table of
// slots, each the commit timestamp of the last landed write of a user's
// records (us/, pt/ and rx/ keys) whose organization and user hash to it,
// or of an organization's own record (or/ keys; the user "").
// Users sharing a slot only cost each other a page read; a slot never
// goes back, since commit timestamps only grow, so a stamp once changed
// never reads as its old value again.
type changeStamps [1 << 12]atomic.Uint64

// userRecordPrefixes are the key prefixes under which a user's records
// live, each followed by organization/user.
var userRecordPrefixes = [][]byte{[]byte(prefixUser), []byte(prefixPatient), []byte(prefixPrescription)}

func stampSlot(orgID, userID string) uint64 {
	var d xxhash.Digest
	d.Reset()
	_, _ = d.WriteString(orgID)
	_, _ = d.Write([]byte{'/'})
	_, _ = d.WriteString(userID)
	return d.Sum64() % uint64(len(changeStamps{}))
}

// ChangeStamp implements storage.ChangeStamper.
func (s *Store) ChangeStamp(orgID, userID string) uint64 {
	return s.stamps[stampSlot(orgID, userID)].Load()
}

// stampWrites moves the stamp of every user whose records keys (a landed
// commit's) hold to ts. land calls it once the commit is visible to reads:
// a stamp read before a read then vouches for what the read saw.
func (s *Store) stampWrites(keys map[string]pendingWrite, ts uint64) {
	for k := range keys {
		key := []byte(k)
		if org, ok := bytes.CutPrefix(key, []byte(prefixOrganization)); ok {
			s.stamps[stampSlot(string(org), "")].Store(ts)
			continue
		}
		for _, p := range userRecordPrefixes {
			if !bytes.HasPrefix(key, p) {
				continue
			}
			rest := key[len(p):]
			org, rest, ok := bytes.Cut(rest, []byte{'/'})
			if !ok {
				break
			}
			user, _, _ := bytes.Cut(rest, []byte{'/'})
			s.stamps[stampSlot(string(org), string(user))].Store(ts)
			break
		}
	}
}
