package badger

import (
	"encoding/binary"
	"encoding/hex"
	"strings"
	"time"

	"github.com/rxgate/rxgate/storage"
)

// Key layout. This file is the only place that builds key bytes.
//
//	pa/{partner}                            partner
//	or/{org}                                organization
//	us/{org}/{user}                         user
//	ue/{org}/{lower(email)}                 -> user id (unique e-mail per organization)
//	pt/{org}/{user}/{patient}               patient
//	pp/{org}/{partner_patient_id}           -> {user}/{patient} (unique per organization)
//	rx/{org}/{user}/{patient}/{position}    prescription; position is
//	                                        storage.PrescriptionPosition (16 hex
//	                                        digits of MaxUint64 - created_date
//	                                        in ns, then the scid), so a forward
//	                                        scan is newest first
//	rs/{org}/{scid}                         -> the prescription's rx key
//	do/{org}/{drug}                         organization-level custom drug
//	du/{org}/{user}/{drug}                  user-level custom drug
//	mt/{name}                               internal metadata (keys, secrets)
//	we/{endpoint}                           webhook endpoint
//	wp/{partner}/{endpoint}                 -> nothing (a partner's endpoints)
//	ev/{event}                              event; ids are time-ordered uuids, so
//	                                        a scan lists events oldest first
//	ep/{event}                              the event's payload, as delivered
//	eo/{org}/{event}                        -> nothing (events by organization)
//	es/{status}/{event}                     -> nothing (events by status)
//	et/{org}/{status}/{event}               -> nothing (both filters at once)
//	jp/{endpoint}/{due}{job}                pending delivery job; due = 16 hex
//	                                        digits of the due time in unix ns, so
//	                                        each endpoint's due work is one
//	                                        prefix scan from its start
//	ok/{key}                                operator key
//	on/{name}                               -> key id (unique operator key name)
//	ah                                      the audit chain's head (seq, hash)
//	al/{seq}                                audit entries: a batch's records, one
//	                                        after another, seq its last one's in 16
//	                                        hex digits, so a scan lists the chain
//	                                        in order
//	ac/{seq}                                audit checkpoint (signed seq, hash)
//	jl/{job}                                a lease written by rxgate versions that
//	                                        kept leases on disk; Open moves its job
//	                                        back to pending (leases live in memory)
//
// Every id placed in a key is checked by storage.ValidID first: an id
// holding the separator could otherwise address another record's prefix.
// A list's key is its prefix followed by the item's position in the list
// (storage.PrescriptionPosition, or the id for users and events), so a
// cursor's position is the key's suffix.
const (
	prefixPartner        = "pa/"
	prefixOrganization   = "or/"
	prefixUser           = "us/"
	prefixUserEmail      = "ue/"
	prefixPatient        = "pt/"
	prefixPartnerPatient = "pp/"
	prefixPrescription   = "rx/"
	prefixScid           = "rs/"
	prefixOrgDrug        = "do/"
	prefixUserDrug       = "du/"
	prefixMeta           = "mt/"
	prefixEndpoint       = "we/"
	prefixPartnerHook    = "wp/"
	prefixEvent          = "ev/"
	prefixEventPayload   = "ep/"
	prefixEventOrg       = "eo/"
	prefixEventStatus    = "es/"
	prefixEventOrgStatus = "et/"
	// One partner's events, and by status (format 3).
	prefixEventPartner       = "ea/"
	prefixEventPartnerStatus = "eb/"
	prefixJobPending         = "jp/"
	prefixJobLeased          = "jl/"
	prefixOperatorKey        = "ok/"
	prefixOperatorName       = "on/"
	prefixAuditEntry         = "al/"
	prefixAuditCheckpoint    = "ac/"
	keyAuditHead             = "ah"
)

func join(prefix string, parts ...string) []byte {
	n := len(prefix)
	for _, p := range parts {
		n += len(p) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, prefix...)
	for i, p := range parts {
		if i > 0 {
			b = append(b, '/')
		}
		b = append(b, p...)
	}
	return b
}

func partnerKey(id string) []byte      { return join(prefixPartner, id) }
func partnersPrefix() []byte           { return []byte(prefixPartner) }
func organizationKey(id string) []byte { return join(prefixOrganization, id) }
func organizationsPrefix() []byte      { return []byte(prefixOrganization) }
func userKey(org, user string) []byte  { return join(prefixUser, org, user) }
func usersPrefix(org string) []byte    { return join(prefixUser, org, "") }
func userEmailKey(org, email string) []byte {
	return join(prefixUserEmail, org, strings.ToLower(email))
}
func patientKey(org, user, id string) []byte    { return join(prefixPatient, org, user, id) }
func partnerPatientKey(org, ppid string) []byte { return join(prefixPartnerPatient, org, ppid) }
func scidKey(org, scid string) []byte           { return join(prefixScid, org, scid) }
func orgDrugKey(org, id string) []byte          { return join(prefixOrgDrug, org, id) }
func orgDrugsPrefix(org string) []byte          { return join(prefixOrgDrug, org, "") }
func userDrugKey(org, user, id string) []byte   { return join(prefixUserDrug, org, user, id) }
func userDrugsPrefix(org, user string) []byte   { return join(prefixUserDrug, org, user, "") }
func metaKey(name string) []byte                { return join(prefixMeta, name) }
func operatorKeyKey(id string) []byte           { return join(prefixOperatorKey, id) }
func operatorKeysPrefix() []byte                { return []byte(prefixOperatorKey) }
func auditHeadKey() []byte                      { return []byte(keyAuditHead) }
func auditEntryKey(seq uint64) []byte           { return join(prefixAuditEntry, auditSeqKey(seq)) }
func auditCheckpointKey(seq uint64) []byte      { return join(prefixAuditCheckpoint, auditSeqKey(seq)) }

// operatorNameKey holds the name as it is: it is the key's last part and
// is never scanned as a prefix, so a "/" in it addresses nothing else.
func operatorNameKey(name string) []byte { return join(prefixOperatorName, name) }

func prescriptionsPrefix(org, user, patient string) []byte {
	return join(prefixPrescription, org, user, patient, "")
}

// prescriptionKey orders a patient's prescriptions newest first, with the
// scid as a stable tiebreak between equal creation times.
func prescriptionKey(org, user, patient string, created time.Time, scid string) []byte {
	return append(prescriptionsPrefix(org, user, patient), storage.PrescriptionPosition(created, scid)...)
}

func endpointKey(id string) []byte                { return join(prefixEndpoint, id) }
func endpointsPrefix() []byte                     { return []byte(prefixEndpoint) }
func partnerHookKey(partner, id string) []byte    { return join(prefixPartnerHook, partner, id) }
func partnerHooksPrefix(partner string) []byte    { return join(prefixPartnerHook, partner, "") }
func eventKey(id string) []byte                   { return join(prefixEvent, id) }
func eventPayloadKey(id string) []byte            { return join(prefixEventPayload, id) }
func eventOrgKey(org, id string) []byte           { return join(prefixEventOrg, org, id) }
func eventStatusKey(status, id string) []byte     { return join(prefixEventStatus, status, id) }
func eventOrgStatusKey(org, st, id string) []byte { return join(prefixEventOrgStatus, org, st, id) }
func eventPartnerKey(partner, id string) []byte   { return join(prefixEventPartner, partner, id) }
func eventPartnerStatusKey(partner, st, id string) []byte {
	return join(prefixEventPartnerStatus, partner, st, id)
}
func jobLeasedKey(id string) []byte             { return join(prefixJobLeased, id) }
func jobsLeasedPrefix() []byte                  { return []byte(prefixJobLeased) }
func jobsPendingPrefix() []byte                 { return []byte(prefixJobPending) }
func endpointJobsPrefix(endpoint string) []byte { return join(prefixJobPending, endpoint, "") }

// eventsPrefix is the list prefix for the filters given ("" = any).
func eventsPrefix(org, status string) []byte {
	switch {
	case org != "" && status != "":
		return join(prefixEventOrgStatus, org, status, "")
	case org != "":
		return join(prefixEventOrg, org, "")
	case status != "":
		return join(prefixEventStatus, status, "")
	}
	return []byte(prefixEvent)
}

// eventsPartnerPrefix is the list prefix of one partner's events, of
// any status ("") or of one.
func eventsPartnerPrefix(partner, status string) []byte {
	if status != "" {
		return join(prefixEventPartnerStatus, partner, status, "")
	}
	return join(prefixEventPartner, partner, "")
}

// eventIndexKeys are the index keys of an event of partner and org in
// status: every key but its record and payload that names it.
func eventIndexKeys(partner, org, status, id string) [][]byte {
	return [][]byte{eventOrgKey(org, id), eventStatusKey(status, id), eventOrgStatusKey(org, status, id),
		eventPartnerKey(partner, id), eventPartnerStatusKey(partner, status, id)}
}

// jobPendingKey orders an endpoint's pending jobs by due time, then job id.
// Due times before 1970 are stored as 1970: they are due either way.
func jobPendingKey(endpoint string, due time.Time, id string) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(max(due.UnixNano(), 0)))
	return append(endpointJobsPrefix(endpoint), hex.EncodeToString(b[:])+id...)
}

// dueFromJobKey recovers the due time from a pending job key under prefix.
func dueFromJobKey(key, prefix []byte) (time.Time, string, bool) {
	rest := key[len(prefix):]
	if len(rest) < 16 {
		return time.Time{}, "", false
	}
	var b [8]byte
	if _, err := hex.Decode(b[:], rest[:16]); err != nil {
		return time.Time{}, "", false
	}
	return time.Unix(0, int64(binary.BigEndian.Uint64(b[:]))).UTC(), string(rest[16:]), true
}

// nextEndpointSeek is the smallest key after every pending job of endpoint:
// "/" + 1 is "0", and no endpoint id holds "/".
func nextEndpointSeek(endpoint string) []byte {
	return append(join(prefixJobPending, endpoint), '0')
}
