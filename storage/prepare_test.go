package storage

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPrepareCreate(t *testing.T) {
	now := time.Date(2026, 11, 25, 9, 0, 0, 123456789, time.FixedZone("AEDT", 11*3600))
	tests := []struct {
		name    string
		prepare func() (id string, err error)
		wantErr bool
	}{
		{name: "partner, id assigned", prepare: func() (string, error) { p := &Partner{}; err := p.PrepareCreate(now); return p.ID, err }},
		{name: "partner, id kept", prepare: func() (string, error) { p := &Partner{ID: "given"}; err := p.PrepareCreate(now); return p.ID, err }},
		{name: "partner, id with a slash", prepare: func() (string, error) { p := &Partner{ID: "a/b"}; return p.ID, p.PrepareCreate(now) }, wantErr: true},
		{name: "organization of a bad partner id", prepare: func() (string, error) {
			o := &Organization{PartnerID: ""}
			return o.ID, o.PrepareCreate(now)
		}, wantErr: true},
		{name: "user", prepare: func() (string, error) { u := &User{OrgID: "o"}; err := u.PrepareCreate(now); return u.ID, err }},
		{name: "user of a bad organization id", prepare: func() (string, error) { u := &User{OrgID: "o/x"}; return u.ID, u.PrepareCreate(now) }, wantErr: true},
		{name: "patient", prepare: func() (string, error) {
			p := &Patient{OrgID: "o", UserID: "u"}
			err := p.PrepareCreate(now)
			return p.ID, err
		}},
		{name: "patient without a user", prepare: func() (string, error) { p := &Patient{OrgID: "o"}; return p.ID, p.PrepareCreate(now) }, wantErr: true},
		{name: "endpoint", prepare: func() (string, error) {
			e := &WebhookEndpoint{PartnerID: "p"}
			err := e.PrepareCreate(now)
			return e.ID, err
		}},
		{name: "prescription", prepare: func() (string, error) {
			p := &Prescription{OrgID: "o", UserID: "u", PatientID: "p"}
			err := p.PrepareCreate(now)
			return p.SCID, err
		}},
		{name: "prescription with a bad scid", prepare: func() (string, error) {
			p := &Prescription{OrgID: "o", UserID: "u", PatientID: "p", SCID: "a/b"}
			return p.SCID, p.PrepareCreate(now)
		}, wantErr: true},
		{name: "prescription without a patient", prepare: func() (string, error) {
			p := &Prescription{OrgID: "o", UserID: "u"}
			return p.SCID, p.PrepareCreate(now)
		}, wantErr: true},
		{name: "organization drug", prepare: func() (string, error) { d := &CustomDrug{OrgID: "o"}; err := d.PrepareCreate(); return d.ID, err }},
		{name: "user drug of a bad user id", prepare: func() (string, error) { d := &CustomDrug{OrgID: "o", UserID: "u/x"}; return d.ID, d.PrepareCreate() }, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := tt.prepare()
			if tt.wantErr {
				require.ErrorIs(t, err, ErrNotFound)
				return
			}
			require.NoError(t, err)
			assert.True(t, ValidID(id), "id %q", id)
		})
	}
	u := &User{OrgID: "o"}
	require.NoError(t, u.PrepareCreate(now))
	assert.Equal(t, Timestamp(now), u.CreatedAt, "UTC, microseconds")
	assert.Equal(t, u.CreatedAt, u.UpdatedAt)
	assert.Equal(t, time.UTC, u.CreatedAt.Location())
}
