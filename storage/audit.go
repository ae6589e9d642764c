package storage

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"
)

// The audit trail (issue 27): who read or changed what, and when. Entries
// form a hash chain: each entry's hash covers the hash of the entry before
// it and the entry's own canonical encoding, so a changed, removed or
// reordered entry breaks the chain at that point. The chain alone does not
// show a truncated tail, nor a chain rewritten from some point on by
// someone who recomputes the hashes: checkpoints do, each an Ed25519
// signature by a key the store does not hold over an entry's (seq, hash).
//
// Patient values never enter an entry; ids do.

// Audit actor kinds.
const (
	AuditActorPartner  = "partner"
	AuditActorOperator = "operator"
	// AuditActorUnknown is the actor of a corrupt entry's placeholder
	// (CorruptAuditEntry): who acted cannot be read.
	AuditActorUnknown = "unknown"
)

// AuditCommitted is the outcome of an entry appended in the transaction of
// the change it records: the change committed, and the entry with it,
// before the response's status was known. Every other entry records the
// HTTP status answered.
const AuditCommitted = 0

// AuditEntry is one entry of the audit trail.
type AuditEntry struct {
	// Seq numbers the entries from 1 without gaps, in chain order; the
	// store assigns it when it appends the entry.
	Seq  uint64    `json:"seq"`
	Time time.Time `json:"time"`
	// ActorKind is AuditActorPartner (PartnerID, OrgID and UserID) or
	// AuditActorOperator (OperatorName and OperatorRole).
	ActorKind    string `json:"actor_kind"`
	PartnerID    string `json:"partner_id,omitempty"`
	OrgID        string `json:"organization_id,omitempty"`
	UserID       string `json:"user_id,omitempty"`
	OperatorName string `json:"operator,omitempty"`
	OperatorRole string `json:"operator_role,omitempty"`
	// Operation is a short fixed name of the route or action, such as
	// "patient.update" or "operator.tokens.mint".
	Operation string `json:"operation"`
	// PatientID is the patient read or changed, if any; Resource names
	// another resource (an endpoint, an event, a key, a user) by id.
	PatientID string `json:"patient_id,omitempty"`
	Resource  string `json:"resource,omitempty"`
	RequestID string `json:"request_id,omitempty"`
	// Outcome is the HTTP status answered, or AuditCommitted.
	Outcome  int    `json:"outcome"`
	PrevHash []byte `json:"prev_hash"`
	Hash     []byte `json:"hash"`
	// Corrupt marks a placeholder for stored entries that no longer
	// decode: Seq is the first seq the damaged value covers, the fields
	// the store could not read are zero, and VerifyAudit reports it as a
	// break. A store lists it whatever the filter (what it held is
	// unknown) and goes on past it. It is not part of the hash.
	Corrupt bool `json:"corrupt,omitempty"`
}

// CorruptAuditEntry is the placeholder a store lists for a stored value
// that no longer decodes, whose entries start at seq.
func CorruptAuditEntry(seq uint64) AuditEntry {
	return AuditEntry{Seq: seq, ActorKind: AuditActorUnknown, PrevHash: []byte{}, Hash: []byte{}, Corrupt: true}
}

// AuditCheckpoint commits to the chain up to Seq: the Ed25519 signature of
// AuditCheckpointMessage(Seq, Hash, Start) by the audit key. A checkpoint
// with Start set marks where a retained chain starts after a purge: the
// entries before Seq+1 were deleted on purpose and Hash is the hash of the
// last deleted one, which the first kept entry's PrevHash must be.
type AuditCheckpoint struct {
	Seq       uint64    `json:"seq"`
	Hash      []byte    `json:"hash"`
	Time      time.Time `json:"time"`
	Start     bool      `json:"start,omitempty"`
	Signature []byte    `json:"signature"`
}

// AuditFilter selects entries. Zero fields select everything.
type AuditFilter struct {
	PatientID string
	UserID    string
	// Operator is an operator key's name.
	Operator string
	// From and To bound the entry's time: From <= Time < To.
	From, To time.Time
}

// Match reports whether e passes f. A corrupt entry's placeholder passes
// every filter: what it held is unknown, so it cannot be shown not to
// match, and a damaged entry must not hide from a search for it.
func (f AuditFilter) Match(e *AuditEntry) bool {
	switch {
	case e.Corrupt:
		return true
	case f.PatientID != "" && e.PatientID != f.PatientID,
		f.UserID != "" && e.UserID != f.UserID,
		f.Operator != "" && e.OperatorName != f.Operator,
		!f.From.IsZero() && e.Time.Before(f.From),
		!f.To.IsZero() && !e.Time.Before(f.To):
		return false
	}
	return true
}

// Key returns the filter's canonical form, which binds a cursor to it.
func (f AuditFilter) Key() string {
	from, to := "", ""
	if !f.From.IsZero() {
		from = f.From.UTC().Format(time.RFC3339Nano)
	}
	if !f.To.IsZero() {
		to = f.To.UTC().Format(time.RFC3339Nano)
	}
	return fmt.Sprintf("audit|%q|%q|%q|%s|%s", f.PatientID, f.UserID, f.Operator, from, to)
}

// AuditLog is the audit trail's store. Both backends implement it.
type AuditLog interface {
	// AppendAudit appends entries, in order, in one transaction: each gets
	// the next seq, the previous entry's hash and its own (AuditHash). The
	// entries' Seq, PrevHash and Hash are set when it returns.
	AppendAudit(ctx context.Context, entries []AuditEntry) error
	// AuditHead returns the last entry's seq and hash; 0 and nil when the
	// chain is empty.
	AuditHead(ctx context.Context) (uint64, []byte, error)
	// ListAudit returns one page of the entries that pass f in seq order.
	// A stored entry that no longer decodes is listed as a placeholder
	// marked Corrupt (CorruptAuditEntry) and the listing goes on past it:
	// a damaged trail is reported by verify, never an error here.
	ListAudit(ctx context.Context, f AuditFilter, req PageRequest) ([]AuditEntry, PageInfo, error)
	// AddAuditCheckpoint stores c; a checkpoint for a seq already
	// checkpointed replaces it.
	AddAuditCheckpoint(ctx context.Context, c AuditCheckpoint) error
	// ListAuditCheckpoints returns every checkpoint in seq order.
	ListAuditCheckpoints(ctx context.Context) ([]AuditCheckpoint, error)
	// PurgeAudit deletes the entries before seq before (and the
	// checkpoints before it but start), storing start, which must mark
	// before-1, in the same transaction. It returns how many entries it
	// deleted.
	PurgeAudit(ctx context.Context, before uint64, start AuditCheckpoint) (int, error)
}

// AuditHash returns the hash of e chained to prev: SHA-256 over
// AppendAuditCanonical(prev, e), every field but Hash in a fixed order,
// each length-prefixed, so that no two entries encode alike.
func AuditHash(prev []byte, e *AuditEntry) []byte {
	var buf [512]byte
	sum := sha256.Sum256(AppendAuditCanonical(buf[:0], prev, e))
	return sum[:]
}

// auditFields is how many fields AppendAuditCanonical writes.
const auditFields = 14

// AppendAuditCanonical appends e's canonical encoding, chained to prev, to
// dst: prev, then Seq, Time (unix microseconds), the actor, operation,
// ids and Outcome, each as a 4-byte big-endian length and its bytes. It is
// what AuditHash hashes, and, followed by the hash, what the embedded
// store keeps (DecodeAuditRecord): no reflection on the append path.
func AppendAuditCanonical(dst, prev []byte, e *AuditEntry) []byte {
	strs := [...]string{e.ActorKind, e.PartnerID, e.OrgID, e.UserID, e.OperatorName, e.OperatorRole, e.Operation,
		e.PatientID, e.Resource, e.RequestID}
	n := 4 + len(prev) + 3*12
	for _, s := range strs {
		n += 4 + len(s)
	}
	dst = slices.Grow(dst, n)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(prev)))
	dst = append(dst, prev...)
	for _, v := range [...]uint64{e.Seq, uint64(e.Time.UnixMicro())} {
		dst = binary.BigEndian.AppendUint32(dst, 8)
		dst = binary.BigEndian.AppendUint64(dst, v)
	}
	for _, s := range strs {
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(s)))
		dst = append(dst, s...)
	}
	dst = binary.BigEndian.AppendUint32(dst, 8)
	return binary.BigEndian.AppendUint64(dst, uint64(int64(e.Outcome)))
}

// AppendAuditRecord appends the stored form of a chained entry: its
// canonical encoding (with e.PrevHash) followed by e.Hash, length-prefixed.
func AppendAuditRecord(dst []byte, e *AuditEntry) []byte {
	dst = AppendAuditCanonical(dst, e.PrevHash, e)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(e.Hash)))
	return append(dst, e.Hash...)
}

// errAuditRecord reports a stored entry that does not parse.
var errAuditRecord = errors.New("storage: malformed audit record")

// DecodeAuditRecord parses what AppendAuditRecord wrote; anything else,
// trailing bytes included, is an error.
func DecodeAuditRecord(b []byte) (AuditEntry, error) {
	e, rest, err := NextAuditRecord(b)
	if err == nil && len(rest) != 0 {
		return AuditEntry{}, errAuditRecord
	}
	return e, err
}

// NextAuditRecord parses the first of the records that AppendAuditRecord
// wrote one after another in b, and returns the bytes after it.
func NextAuditRecord(b []byte) (AuditEntry, []byte, error) {
	e, err := nextAuditRecord(&b)
	return e, b, err
}

func nextAuditRecord(bp *[]byte) (AuditEntry, error) {
	var e AuditEntry
	var fields [auditFields + 1][]byte
	b := *bp
	for i := range fields {
		if len(b) < 4 {
			return e, errAuditRecord
		}
		n := binary.BigEndian.Uint32(b)
		if uint64(n) > uint64(len(b)-4) {
			return e, errAuditRecord
		}
		fields[i], b = b[4:4+n], b[4+n:]
	}
	*bp = b
	for _, i := range []int{1, 2, 13} {
		if len(fields[i]) != 8 {
			return e, errAuditRecord
		}
	}
	e.PrevHash = bytes.Clone(fields[0])
	e.Seq = binary.BigEndian.Uint64(fields[1])
	e.Time = time.UnixMicro(int64(binary.BigEndian.Uint64(fields[2]))).UTC()
	strs := []*string{&e.ActorKind, &e.PartnerID, &e.OrgID, &e.UserID, &e.OperatorName, &e.OperatorRole, &e.Operation,
		&e.PatientID, &e.Resource, &e.RequestID}
	for i, p := range strs {
		*p = string(fields[3+i])
	}
	e.Outcome = int(int64(binary.BigEndian.Uint64(fields[13])))
	e.Hash = bytes.Clone(fields[14])
	return e, nil
}

// ChainAudit sets e's Seq, PrevHash and Hash to follow the head (seq,
// hash) and returns the new head.
func ChainAudit(seq uint64, hash []byte, e *AuditEntry) (uint64, []byte) {
	e.Seq = seq + 1
	// The previous entry's hash is shared, not copied: hashes are never
	// changed once made.
	e.PrevHash = hash
	if e.PrevHash == nil {
		e.PrevHash = []byte{}
	}
	e.Time = Timestamp(e.Time)
	e.Hash = AuditHash(e.PrevHash, e)
	return e.Seq, e.Hash
}

// AppendChainedAuditRecord chains e after the head (seq, hash) as
// ChainAudit does and appends its stored form (AppendAuditRecord) to dst,
// encoding the entry once: the hash is taken over the canonical bytes
// just appended, and e.Hash is the copy of it in dst, which must not be
// changed after. It returns dst; e.Seq and e.Hash are the new head.
// (The appender's cost per read competes with requests for CPU:
// BenchmarkPrescriptionPage's audited variants, profiled.)
func AppendChainedAuditRecord(dst []byte, seq uint64, hash []byte, e *AuditEntry) []byte {
	e.Seq = seq + 1
	e.PrevHash = hash
	if e.PrevHash == nil {
		e.PrevHash = []byte{}
	}
	e.Time = Timestamp(e.Time)
	start := len(dst)
	dst = AppendAuditCanonical(dst, e.PrevHash, e)
	sum := sha256.Sum256(dst[start:])
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(sum)))
	dst = append(dst, sum[:]...)
	e.Hash = dst[len(dst)-len(sum) : len(dst) : len(dst)]
	return dst
}

// AuditCheckpointMessage is what a checkpoint's signature signs.
func AuditCheckpointMessage(seq uint64, hash []byte, start bool) []byte {
	m := []byte("rxgate audit checkpoint v1\x00")
	if start {
		m = []byte("rxgate audit start v1\x00")
	}
	m = binary.BigEndian.AppendUint64(m, seq)
	return append(m, hash...)
}

// SignAuditCheckpoint returns the checkpoint of (seq, hash) signed by key.
func SignAuditCheckpoint(key ed25519.PrivateKey, seq uint64, hash []byte, start bool, now time.Time) AuditCheckpoint {
	return AuditCheckpoint{
		Seq: seq, Hash: bytes.Clone(hash), Time: Timestamp(now), Start: start,
		Signature: ed25519.Sign(key, AuditCheckpointMessage(seq, hash, start)),
	}
}

// AuditFinding is one thing VerifyAudit found wrong.
type AuditFinding struct {
	// Seq is the seq where the chain first breaks (the entry changed, the
	// first after a removed one, or the one out of order), or the
	// checkpoint's seq for a truncated tail or a bad checkpoint.
	Seq    uint64
	Reason string
}

func (f AuditFinding) String() string { return fmt.Sprintf("seq %d: %s", f.Seq, f.Reason) }

// VerifyAudit checks entries, all of the stored chain in the order read
// (seq order), against checkpoints and the audit key's public half. It
// reports the first break of the chain (a changed, removed or reordered
// entry), then each checkpoint that is not signed by pub, that names an
// entry whose hash differs, or that lies beyond the last entry (a
// truncated tail). A chain may start after seq 1 only at a start
// checkpoint (a purge). No findings means the chain is whole.
func VerifyAudit(entries []AuditEntry, checkpoints []AuditCheckpoint, pub ed25519.PublicKey) []AuditFinding {
	var out []AuditFinding
	var start *AuditCheckpoint
	for i := range checkpoints {
		c := &checkpoints[i]
		if !ed25519.Verify(pub, AuditCheckpointMessage(c.Seq, c.Hash, c.Start), c.Signature) {
			out = append(out, AuditFinding{c.Seq, "checkpoint not signed by the audit key"})
			continue
		}
		if c.Start && (start == nil || c.Seq > start.Seq) {
			start = c
		}
	}
	// The chain's expected start: seq 1 after nothing, or the entry after
	// the newest start checkpoint.
	var seq uint64
	var prev []byte
	if start != nil {
		seq, prev = start.Seq, start.Hash
	}
	hashes := make(map[uint64][]byte, len(entries))
	broken := false
	for i := range entries {
		e := &entries[i]
		if !broken {
			switch {
			case e.Corrupt:
				out = append(out, AuditFinding{e.Seq, "entry unreadable: its stored value no longer decodes (changed or damaged)"})
				broken = true
			case e.Seq != seq+1:
				reason := "entry missing or out of order"
				if i == 0 && seq == 0 && e.Seq > 1 {
					reason = "chain starts after seq 1 without a start marker (entries removed)"
				}
				out = append(out, AuditFinding{min(e.Seq, seq+1), reason})
				broken = true
			case !bytes.Equal(e.PrevHash, prev) && !(len(prev) == 0 && len(e.PrevHash) == 0):
				out = append(out, AuditFinding{e.Seq, "previous hash does not match: an entry before it was changed, removed or reordered"})
				broken = true
			case !bytes.Equal(AuditHash(e.PrevHash, e), e.Hash):
				out = append(out, AuditFinding{e.Seq, "entry changed: its hash does not match its content"})
				broken = true
			}
		}
		seq, prev = e.Seq, e.Hash
		if !e.Corrupt {
			hashes[e.Seq] = e.Hash
		}
	}
	var last uint64
	lastCorrupt := false
	if n := len(entries); n > 0 {
		last, lastCorrupt = entries[n-1].Seq, entries[n-1].Corrupt
	}
	for i := range checkpoints {
		c := &checkpoints[i]
		if c.Start {
			continue
		}
		switch h, ok := hashes[c.Seq]; {
		case c.Seq >= last && lastCorrupt:
			// How far the unreadable value reached is unknown.
			out = append(out, AuditFinding{c.Seq, fmt.Sprintf("checkpoint not checked: it may lie in the unreadable entries from seq %d", last)})
		case c.Seq > last:
			out = append(out, AuditFinding{c.Seq, fmt.Sprintf("tail truncated: checkpoint at seq %d, last entry %d", c.Seq, last)})
		case ok && !bytes.Equal(h, c.Hash):
			out = append(out, AuditFinding{c.Seq, "entry differs from its signed checkpoint: the chain was rewritten"})
		}
	}
	return out
}

// auditKey is the context key of a pending audit entry.
type auditKey struct{}

// AuditPending is an entry to append with the change a request makes, in
// the change's transaction: the write path of a store that finds one in
// its context (WithAudit) appends it once, in the first write transaction
// that commits, and marks it Written.
type AuditPending struct {
	Entry   AuditEntry
	written atomic.Bool
}

// Written reports whether a transaction that committed appended the entry.
func (p *AuditPending) Written() bool { return p.written.Load() }

// MarkWritten records that the entry was committed; a backend calls it
// once its transaction has.
func (p *AuditPending) MarkWritten() { p.written.Store(true) }

// WithAudit returns ctx carrying p, for the write path to append.
func WithAudit(ctx context.Context, p *AuditPending) context.Context {
	return context.WithValue(ctx, auditKey{}, p)
}

// PendingAudit returns the entry of ctx not yet written, or nil.
func PendingAudit(ctx context.Context) *AuditPending {
	p, _ := ctx.Value(auditKey{}).(*AuditPending)
	if p == nil || p.Written() {
		return nil
	}
	return p
}

// ErrAuditDisabled reports a store or server with no audit trail.
var ErrAuditDisabled = errors.New("storage: audit trail disabled")
