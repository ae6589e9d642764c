package cli

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestVersionAndTokenCommands(t *testing.T) {
	var out bytes.Buffer
	require.Equal(t, 0, run(context.Background(), Version, nil, &out, io.Discard))
	assert.Equal(t, "rxgate dev\n", out.String())

	facts, _, stop := startSandbox(t)
	defer stop()
	t.Setenv("RXGATE_ADMIN__API_KEY", facts.AdminAPIKey)
	out.Reset()
	var errOut bytes.Buffer
	code := run(context.Background(), Token, []string{"--admin-url", facts.AdminURL, "--organization", facts.OrganizationID,
		"--user", facts.Users[2].UserID, "--scope", "read:patient_prescription", "--ttl", "10m"}, &out, &errOut)
	require.Equal(t, 0, code, errOut.String())
	tok := strings.TrimSpace(out.String())
	status, body := do(t, http.MethodGet, facts.BaseURL+"/v1/organizations/"+facts.OrganizationID+"/validate",
		map[string]string{"Authorization": "Bearer " + tok, "x-organization-secret": facts.OrganizationSecret}, "")
	assert.Equal(t, http.StatusOK, status, body)
}
