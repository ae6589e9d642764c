package app

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage"
)

// failingUpdates is a store whose patient updates fail with err.
type failingUpdates struct {
	storage.Store
	err error
}

func (s failingUpdates) UpdatePatient(context.Context, string, string, string, func(*storage.Patient) error) (*storage.Patient, error) {
	return nil, s.err
}

// TestUpdatePatientStoreUnavailable: a patient update the store could not
// serve now (a database switching its primary) is the 503 every other
// call answers then, in the envelope; a store error of another kind stays
// the update's own 500.
func TestUpdatePatientStoreUnavailable(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		status int
		code   string
	}{
		{"unavailable", fmt.Errorf("storage: update patient: %w: cannot reach the database", storage.ErrUnavailable), http.StatusServiceUnavailable, codeUnavailable},
		{"busy", fmt.Errorf("storage: update patient: %w", storage.ErrConflict), http.StatusServiceUnavailable, codeUnavailable},
		{"other", fmt.Errorf("storage: update patient: disk on fire"), http.StatusInternalServerError, codeInternal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newPatientFuzzApp(t)
			f.app.store = failingUpdates{Store: f.app.store, err: tt.err}
			rec := f.put([]byte(`{"given_name":"Away"}`))
			require.Equal(t, tt.status, rec.Code, rec.Body.String())
			var env struct {
				Code string `json:"code"`
			}
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &env))
			assert.Equal(t, tt.code, env.Code)
			assert.NotContains(t, rec.Body.String(), "storage:", "the cause stays in the log")
		})
	}
}
