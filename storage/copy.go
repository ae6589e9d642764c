package storage

import (
	"context"
	"iter"
	"time"
)

// Record is one record of a copy of a whole store, as an Exporter reads it
// and an Importer writes it: exactly one member is set. Records come
// parents first (meta, partners, organizations, users, patients,
// prescriptions, custom drugs, endpoints, events, jobs, operator keys,
// then the audit trail: its entries in seq order, its checkpoints with
// any start marker, and its head), so an importer with foreign keys can
// write them as they come. The trail is copied as stored, hashes and
// signatures included, so it verifies after the copy as before it.
type Record struct {
	Meta         *MetaEntry
	Partner      *Partner
	Organization *Organization
	User         *User
	Patient      *Patient
	Prescription *StoredPrescription
	CustomDrug   *StoredCustomDrug
	Endpoint     *WebhookEndpoint
	Event        *Event
	Job          *Job
	OperatorKey  *OperatorKey
	// AuditEntry, AuditCheckpoint and AuditHead are the audit trail.
	AuditEntry      *AuditEntry
	AuditCheckpoint *AuditCheckpoint
	AuditHead       *AuditChainHead
}

// AuditChainHead is the audit chain's head: the last seq appended and its
// hash, which the next append chains after. It is copied on its own, as
// a purge may have removed the entry it names.
type AuditChainHead struct {
	Seq  uint64
	Hash []byte
}

// MetaEntry is one internal value (LoadOrCreateMeta): the cursor key, the
// built-in issuer's signing key. Copying them keeps every cursor and
// token issued before the copy valid after it.
type MetaEntry struct {
	Name  string
	Value []byte
}

// StoredPrescription is a prescription as stored: its keys, its creation
// time and the spec 2.5 object's bytes, copied as they are served.
type StoredPrescription struct {
	OrgID, UserID, PatientID, SCID string
	CreatedAt                      time.Time
	JSON                           []byte
}

// StoredCustomDrug is a custom drug as stored: its keys (UserID is empty
// for an organization-level drug) and the spec 2.4 object's bytes.
type StoredCustomDrug struct {
	OrgID, UserID, ID string
	JSON              []byte
}

// Exporter reads a whole store at one point in time. A job comes pending,
// whatever its lease: a copy is taken of a stopped store, and an attempt
// in flight is made again after it (at least once).
type Exporter interface {
	Export(ctx context.Context) iter.Seq2[Record, error]
}

// Importer writes a copy of a whole store into an empty one: all of it, or
// nothing. It returns how many records it wrote.
type Importer interface {
	Import(ctx context.Context, records iter.Seq2[Record, error]) (int, error)
}
