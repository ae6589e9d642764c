package storage

import (
	"context"
	"os"

	"github.com/rxgate/rxgate/storage/backup"
)

// Backuper is a store that writes a backup of itself while it serves
// (storage/badger). A store a database keeps (storage/postgres) has none:
// its backups are the database's.
type Backuper interface {
	// WriteBackup writes a backup of the whole store to f, a new, empty
	// file; version is the rxgate version recorded in its header.
	WriteBackup(ctx context.Context, f *os.File, version string) (backup.Header, error)
}

// GarbageCollector is a store that gives disk space back on demand
// (Badger's value-log garbage collection).
type GarbageCollector interface {
	// CollectGarbage reclaims what it can and returns.
	CollectGarbage() error
}

// Sizer is a store that reports its size on disk, in two parts (Badger's
// LSM tree and value log).
type Sizer interface {
	// Size returns the bytes of the index and small values (lsm) and of
	// the value log (vlog).
	Size() (lsm, vlog int64)
}

// ChangeStamper is a store that tells, without reading them, whether a
// user's records (the user, its patients and their prescriptions) or an
// organization's own record may have changed (storage/badger, where one
// process owns the store). It lets the partner API answer a conditional
// page 304 without reading the page, and check a request's membership
// without reading the organization and the user.
type ChangeStamper interface {
	// ChangeStamp returns a stamp of the user's records, or with userID
	// "" of the organization's own record. A write of any of
	// them changes the stamp once it is visible to reads (a write to
	// another user's records may change it too); so when the stamp read
	// before a read equals the stamp read later, nothing the read saw
	// has changed since. Read it before the read it vouches for.
	ChangeStamp(orgID, userID string) uint64
}

// MemberPageReader is a store that reads a partner request's membership
// (GetMember) and the prescription page it asks for
// (ListPrescriptionsJSON) in one read, at one point in time
// (storage/postgres: one statement, where the two calls take two round
// trips). The partner API uses it on the prescription page, the hottest
// read, and checks the member before it sends any of the page.
type MemberPageReader interface {
	// GetMemberPrescriptionsJSON is GetMember(orgID, memberID) and, when
	// the member exists, ListPrescriptionsJSON(orgID, userID, patientID,
	// req, dst). An error of GetMember is returned as err with nothing
	// else; an error of the page, in MemberPage.PageErr.
	GetMemberPrescriptionsJSON(ctx context.Context, orgID, memberID, userID, patientID string, req PageRequest, dst []byte) (*MemberPage, error)
}

// MemberPage is a MemberPageReader's answer.
type MemberPage struct {
	Org  *Organization
	User *User
	// The page, as ListPrescriptionsJSON returns it, or its error.
	Patient *Patient
	Items   []byte
	Info    PageInfo
	PageErr error
}

// FailoverCounter is a store that follows a database primary through a
// switch (storage/postgres) and counts what it did about it, for the
// operator's metrics.
type FailoverCounter interface {
	// FailoverCounts returns the counts since the store opened.
	FailoverCounts() FailoverCounts
}

// FailoverCounts are a FailoverCounter's counts.
type FailoverCounts struct {
	// PoolResets counts the times every pooled connection was dropped
	// because one showed the primary had switched (at most one a second).
	PoolResets int64
	// UnconfirmedCommits counts the commits the synchronous standby did
	// not confirm, answered as unavailable rather than acknowledged.
	UnconfirmedCommits int64
}

// Capabilities are a store's optional capabilities; a nil field is one
// the store lacks.
type Capabilities struct {
	Backup   Backuper
	GC       GarbageCollector
	Size     Sizer
	Changes  ChangeStamper
	Failover FailoverCounter
	Pages    MemberPageReader
}

// CapabilitiesOf returns the optional capabilities of s, a Store, a
// JobStore or a Backend: the one place they are asserted, so that the
// metrics, the janitor and the backup handler agree on what a backend
// offers.
func CapabilitiesOf(s any) Capabilities {
	var c Capabilities
	c.Backup, _ = s.(Backuper)
	c.GC, _ = s.(GarbageCollector)
	c.Size, _ = s.(Sizer)
	c.Changes, _ = s.(ChangeStamper)
	c.Failover, _ = s.(FailoverCounter)
	c.Pages, _ = s.(MemberPageReader)
	return c
}
