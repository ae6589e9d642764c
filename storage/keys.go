package storage

import (
	"encoding/binary"
	"encoding/hex"
	"strings"
	"time"
)

// Key layout. This file is the only place that builds key bytes.
//
//	pa/{partner}                            partner
//	or/{org}                                organization
//	us/{org}/{user}                         user
//	ue/{org}/{lower(email)}                 -> user id (unique e-mail per organization)
//	pt/{org}/{user}/{patient}               patient
//	pp/{org}/{partner_patient_id}           -> {user}/{patient} (unique per organization)
//	rx/{org}/{user}/{patient}/{inv}{scid}   prescription; inv = 16 hex digits of
//	                                        MaxUint64 - created_date in ns, so a
//	                                        forward scan is newest first
//	rs/{org}/{scid}                         -> the prescription's rx key
//	do/{org}/{drug}                         organization-level custom drug
//	du/{org}/{user}/{drug}                  user-level custom drug
//	mt/{name}                               internal metadata (keys, secrets)
//
// Every id placed in a key is checked by validID first: an id holding the
// separator could otherwise address another record's prefix.
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

	metaCursorKey = "cursor-key"
)

// validID reports whether id may be placed in a key.
func validID(id string) bool {
	return id != "" && len(id) <= 128 && !strings.ContainsAny(id, "/\x00")
}

// validIDs reports whether every id may be placed in a key.
func validIDs(ids ...string) bool {
	for _, id := range ids {
		if !validID(id) {
			return false
		}
	}
	return true
}

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

func prescriptionsPrefix(org, user, patient string) []byte {
	return join(prefixPrescription, org, user, patient, "")
}

// prescriptionKey orders a patient's prescriptions newest first, with the
// scid as a stable tiebreak between equal creation times.
func prescriptionKey(org, user, patient string, created time.Time, scid string) []byte {
	var inv [8]byte
	binary.BigEndian.PutUint64(inv[:], ^uint64(created.UnixNano()))
	return append(prescriptionsPrefix(org, user, patient), hex.EncodeToString(inv[:])+scid...)
}
