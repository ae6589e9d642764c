package app

import (
	"sync/atomic"

	"github.com/cespare/xxhash/v2"
	"github.com/labstack/echo/v4"

	"github.com/rxgate/rxgate/storage"
)

// Membership checks without a store read (issue 31, item 2; measured by
// make bench-read and BenchmarkPrescriptionPage in app).
//
// Every partner request reads its organization (the secret's hash, the
// allowed scopes) and its token's user (membership, disabled) from the
// store, so that a secret rotated or a user disabled a moment ago is
// refused at once. With a storage.ChangeStamper store (Badger, one
// process) the pair read is remembered with the stamps of the
// organization's record and the user's records, read before it; a request
// whose stamps are unchanged uses it. A rotation, a disable or any other
// write of either record moves its stamp once it is visible to reads, so
// the next request reads the store again: the rules stay exact. On
// PostgreSQL, where other replicas write, there are no stamps and every
// request reads both, as before.

// memberEntry is a remembered GetMember answer.
type memberEntry struct {
	orgID, userID      string
	orgStamp, usrStamp uint64
	org                storage.Organization
	user               storage.User
}

// memberCache is a fixed table of remembered members; two members sharing
// a slot evict each other.
type memberCache struct {
	slots [1 << 12]atomic.Pointer[memberEntry]
}

// getMember is store.GetMember, answered from the cache when the stamps
// say nothing changed. The records returned are the caller's own copies.
func (a *App) getMember(c echo.Context, orgID, userID string) (*storage.Organization, *storage.User, error) {
	ctx := c.Request().Context()
	if a.changes == nil {
		return a.store.GetMember(ctx, orgID, userID)
	}
	slot := &a.members.slots[memberSlot(orgID, userID)%uint64(len(a.members.slots))]
	// Read before the read they vouch for.
	os, us := a.changes.ChangeStamp(orgID, ""), a.changes.ChangeStamp(orgID, userID)
	if e := slot.Load(); e != nil && e.orgID == orgID && e.userID == userID && e.orgStamp == os && e.usrStamp == us {
		org, user := e.org, e.user
		return &org, &user, nil
	}
	org, user, err := a.store.GetMember(ctx, orgID, userID)
	if err != nil {
		return org, user, err
	}
	slot.Store(&memberEntry{orgID: orgID, userID: userID, orgStamp: os, usrStamp: us, org: *org, user: *user})
	return org, user, nil
}

// memberSlot hashes the pair without building orgID+"/"+userID: that
// string was an allocation on every partner request
// (BenchmarkPrescriptionPage, alloc profile).
func memberSlot(orgID, userID string) uint64 {
	var d xxhash.Digest
	d.Reset()
	_, _ = d.WriteString(orgID)
	_, _ = d.WriteString("/")
	_, _ = d.WriteString(userID)
	return d.Sum64()
}
