package app

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestEnvelopeHead: the remembered heads are the bytes json.Marshal
// encodes, on the first call and on the later ones.
func TestEnvelopeHead(t *testing.T) {
	for _, tc := range []struct {
		status        int
		message, code string
	}{
		{http.StatusOK, "Prescriptions retrieved successfully", codeSuccess},
		{http.StatusCreated, "Created <&> \"quoted\"", codeCreated},
		{http.StatusOK, "Retrieved 3 custom drugs", codeSuccess},
		{http.StatusOK, "", codeSuccess},
	} {
		want, err := json.Marshal(struct {
			Success    bool   `json:"success"`
			StatusCode int    `json:"statusCode"`
			Message    string `json:"message"`
			Code       string `json:"code"`
		}{true, tc.status, tc.message, tc.code})
		require.NoError(t, err)
		for range 3 {
			got, err := envelopeHead(tc.status, tc.message, tc.code)
			require.NoError(t, err)
			require.Equal(t, string(want), string(got))
		}
	}
}
