package storage

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"time"
)

// PageRequest asks for one page of a list.
type PageRequest struct {
	// Limit is the page size; the caller has checked its bounds.
	Limit int
	// Cursor is the LastKey of the previous page, or "" for the first.
	Cursor string
}

// PageInfo describes a page that was read (spec 2.1, pagination object).
type PageInfo struct {
	Count   int
	HasNext bool
	Limit   int
	// Offset is the number of items before this page.
	Offset int
	// LastKey is the cursor of the next page; empty on the last page.
	LastKey string
}

// List names one paginated list. A cursor is bound to the list it was
// issued for: every other list refuses it.
//
// The names keep the spelling of the key prefixes rxgate's first store
// used, so that cursors issued before the storage contracts existed stay
// valid; to every backend they are opaque strings.
type List string

// PrescriptionList is the list of one patient's prescriptions.
func PrescriptionList(orgID, userID, patientID string) List {
	return List("rx/" + orgID + "/" + userID + "/" + patientID + "/")
}

// UserList is the list of one organization's users.
func UserList(orgID string) List { return List("us/" + orgID + "/") }

// EventList is the event log narrowed by f. A partner's narrowing is a
// list of its own, so that a cursor of the whole log (or of another
// partner's) is refused by it.
func EventList(f EventFilter) List {
	if f.PartnerID != "" {
		unscoped := f
		unscoped.PartnerID = ""
		return List("ea/"+f.PartnerID+"/") + EventList(unscoped)
	}
	switch {
	case f.OrganizationID != "" && f.Status != "":
		return List("et/" + f.OrganizationID + "/" + f.Status + "/")
	case f.OrganizationID != "":
		return List("eo/" + f.OrganizationID + "/")
	case f.Status != "":
		return List("es/" + f.Status + "/")
	}
	return "ev/"
}

// A position says where in its list a page ended; the next page starts
// after it. Positions sort in list order as bytes, so a backend can seek
// to one. A user's position is its id, an event's its id, and a
// prescription's PrescriptionPosition.

// PrescriptionPositionLen is the length of a prescription position before
// its scid.
const PrescriptionPositionLen = 16

// PrescriptionPosition is a prescription's position in its patient's list,
// which is newest first, ties broken by scid: 16 hex digits of MaxUint64
// less the creation time in unix nanoseconds, then the scid.
func PrescriptionPosition(created time.Time, scid string) []byte {
	var inv [8]byte
	binary.BigEndian.PutUint64(inv[:], ^uint64(created.UnixNano()))
	out := make([]byte, PrescriptionPositionLen, PrescriptionPositionLen+len(scid))
	hex.Encode(out, inv[:])
	return append(out, scid...)
}

// ParsePrescriptionPosition is the inverse of PrescriptionPosition.
func ParsePrescriptionPosition(pos []byte) (created time.Time, scid string, ok bool) {
	var inv [8]byte
	if len(pos) < PrescriptionPositionLen {
		return time.Time{}, "", false
	}
	if _, err := hex.Decode(inv[:], pos[:PrescriptionPositionLen]); err != nil {
		return time.Time{}, "", false
	}
	return time.Unix(0, int64(^binary.BigEndian.Uint64(inv[:]))).UTC(), string(pos[PrescriptionPositionLen:]), true
}

// MetaCursorKey is the name under which a backend keeps its cursor key
// (Store.LoadOrCreateMeta), so that cursors survive restarts and every
// replica sharing one database accepts the others' cursors.
const MetaCursorKey = "cursor-key"

// NewCursorKey returns a new random cursor key.
func NewCursorKey() ([]byte, error) { return randomBytes(32), nil }

// Cursor format, before base64url: version byte, uvarint offset, the
// position of the page's last item, and a truncated HMAC-SHA256 over (list
// name, a zero byte, everything before the MAC) keyed with the store's
// cursor key. The MAC binds a cursor to its list: one issued for another
// patient's prescriptions, another organization's users, or altered in any
// byte is refused with ErrBadCursor.
const (
	cursorV1     byte = 1
	cursorMACLen int  = 16
	// maxCursorOffset bounds the offset a cursor may carry.
	maxCursorOffset = 1 << 31
)

// Cursors makes and checks the cursors of one store. The zero value is not
// usable: every store has its own key (NewCursors).
type Cursors struct {
	key []byte
}

// NewCursors returns the codec keyed with key.
func NewCursors(key []byte) Cursors { return Cursors{key: key} }

func (c Cursors) mac(l List, payload []byte) []byte {
	m := hmac.New(sha256.New, c.key)
	m.Write([]byte(l))
	m.Write([]byte{0})
	m.Write(payload)
	return m.Sum(nil)[:cursorMACLen]
}

// Encode returns the cursor of the page of l that ends at pos, with offset
// items before the next page.
func (c Cursors) Encode(l List, pos []byte, offset int) string {
	payload := make([]byte, 0, 1+binary.MaxVarintLen64+len(pos)+cursorMACLen)
	payload = append(payload, cursorV1)
	payload = binary.AppendUvarint(payload, uint64(offset))
	payload = append(payload, pos...)
	payload = append(payload, c.mac(l, payload)...)
	return base64.RawURLEncoding.EncodeToString(payload)
}

// Decode returns the position and offset of a cursor issued for l, or
// ErrBadCursor.
func (c Cursors) Decode(l List, cursor string) (pos []byte, offset int, err error) {
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	// The decoder skips line breaks and ignores the last character's unused
	// bits; only the canonical spelling of the bytes is the cursor.
	if err != nil || base64.RawURLEncoding.EncodeToString(raw) != cursor ||
		len(raw) < 1+1+cursorMACLen || raw[0] != cursorV1 {
		return nil, 0, ErrBadCursor
	}
	body, mac := raw[:len(raw)-cursorMACLen], raw[len(raw)-cursorMACLen:]
	if !hmac.Equal(mac, c.mac(l, body)) {
		return nil, 0, ErrBadCursor
	}
	off, n := binary.Uvarint(body[1:])
	if n <= 0 || off > maxCursorOffset {
		return nil, 0, ErrBadCursor
	}
	return body[1+n:], int(off), nil
}
