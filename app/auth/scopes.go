package auth

// Partner API scopes: those of spec 5.3, and create:patient and read:users,
// which rxgate adds (the patient create operation, and a lower-case alias
// of READ_USER). The route table, the operator API and the test kits all
// name them from here.
const (
	ScopeUpdatePatient     = "update:patient"
	ScopeCreatePatient     = "create:patient"
	ScopeReadCustomDrug    = "read:custom_drug"
	ScopeCreateCustomDrug  = "create:custom_drug"
	ScopeUpdateCustomDrug  = "update:custom_drug"
	ScopeReadPrescriptions = "read:patient_prescription"
	ScopeUpdateUser        = "update:user"
	ScopeDeleteUser        = "delete:user"
	ScopeReadUsers         = "READ_USER"
	ScopeReadUsersAlias    = "read:users"
)

// PartnerScopes are every partner scope, in the order the operator API
// lists them; an organization allows all of them unless the operator says
// otherwise. Callers must not modify it.
var PartnerScopes = []string{
	ScopeUpdatePatient, ScopeCreatePatient, ScopeReadCustomDrug, ScopeCreateCustomDrug, ScopeUpdateCustomDrug,
	ScopeReadPrescriptions, ScopeUpdateUser, ScopeDeleteUser, ScopeReadUsers, ScopeReadUsersAlias,
}
