package app

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestParseRole(t *testing.T) {
	const pid = "0b1c2d3e-4f5a-4b6c-9d7e-8f9a0b1c2d3e"
	tests := []struct {
		role, partner string
		ok            bool
	}{
		{"admin", "", true},
		{"operator", "", true},
		{"viewer", "", true},
		{"partner:" + pid, pid, true},
		{"partner:", "", false},
		{"partner:not-a-uuid", "", false},
		{"partner:" + pid + "/x", "", false},
		{"Admin", "", false},
		{"", "", false},
		{"partner", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.role, func(t *testing.T) {
			p, err := parseRole(tt.role)
			assert.Equal(t, tt.ok, err == nil, "%v", err)
			assert.Equal(t, tt.partner, p)
		})
	}
}

func TestParseOperatorKeyToken(t *testing.T) {
	const id = "0b1c2d3e-4f5a-4b6c-9d7e-8f9a0b1c2d3e"
	tests := []struct {
		name, token, id, secret string
		ok                      bool
	}{
		{"made", operatorKeyToken(id, "s_e-cret"), id, "s_e-cret", true},
		{"no prefix", id + "_secret", "", "", false},
		{"no secret", "rxk_" + id + "_", "", "", false},
		{"no separator", "rxk_" + id, "", "", false},
		{"id with a slash", "rxk_a/b_secret", "", "", false},
		{"config key", "some-admin-api-key", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, secret, ok := parseOperatorKeyToken(tt.token)
			assert.Equal(t, tt.ok, ok)
			if tt.ok {
				assert.Equal(t, tt.id, id)
				assert.Equal(t, tt.secret, secret)
			}
		})
	}
}

// TestRoleMatrix: admin holds every permission; the matrix names only
// known roles; nothing but admin touches patients, tokens, backups or keys.
func TestRoleMatrix(t *testing.T) {
	known := map[string]bool{roleOperator: true, roleViewer: true, rolePartner: true}
	for p, roles := range roleMatrix {
		assert.True(t, configIdentity.can(p), "admin holds %s", p)
		for _, r := range roles {
			assert.True(t, known[r], "%s names an unknown role %q", p, r)
		}
	}
	for _, p := range []permission{permPatients, permTokens, permBackup, permOperatorKeys, permPartnersWrite, permOrganizationsWrite} {
		for _, id := range []*operatorIdentity{{Role: roleOperator}, {Role: roleViewer}, {Role: "partner:x", PartnerID: "x"}} {
			assert.False(t, id.can(p), "%s may not hold %s", id.Role, p)
		}
	}
	assert.False(t, (*operatorIdentity)(nil).can(permSignedIn), "no identity holds nothing")
	assert.False(t, (&operatorIdentity{Role: "root"}).can(permSignedIn), "an unknown role holds nothing")
}
