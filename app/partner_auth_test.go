package app

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/rxgate/rxgate/app/auth"
	"github.com/rxgate/rxgate/storage"
)

func TestIssuedBeforeDisable(t *testing.T) {
	t.Parallel()
	disabled := time.Date(2026, 11, 24, 10, 0, 5, 400_000_000, time.UTC) // 10:00:05.4
	at := func(h, m, s int) time.Time { return time.Date(2026, 11, 24, h, m, s, 0, time.UTC) }
	tests := []struct {
		name       string
		issuedAt   time.Time
		disabledAt time.Time
		leeway     time.Duration
		want       bool
	}{
		{name: "never disabled", issuedAt: at(9, 0, 0), want: false},
		{name: "never disabled, no iat", want: false},
		{name: "issued before the disable", issuedAt: at(10, 0, 4), disabledAt: disabled, want: true},
		{name: "issued long before", issuedAt: at(8, 0, 0), disabledAt: disabled, want: true},
		// iat has whole seconds: 10:00:05 may be before or after 10:00:05.4.
		{name: "issued in the second of the disable", issuedAt: at(10, 0, 5), disabledAt: disabled, want: true},
		{name: "issued the second after", issuedAt: at(10, 0, 6), disabledAt: disabled, want: false},
		{name: "no iat, once disabled", disabledAt: disabled, want: true},
		// The verifier accepts an iat up to the leeway in the future: a
		// token from an issuer whose clock runs 25 s ahead, minted before
		// the disable, must not pass after an enable.
		{name: "ahead by 25 s, minted before the disable", issuedAt: at(10, 0, 30), disabledAt: disabled, leeway: 30 * time.Second, want: true},
		{name: "at the end of the leeway", issuedAt: at(10, 0, 35), disabledAt: disabled, leeway: 30 * time.Second, want: true},
		{name: "past the leeway", issuedAt: at(10, 0, 36), disabledAt: disabled, leeway: 30 * time.Second, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := &auth.Principal{UserID: "u", IssuedAt: tt.issuedAt}
			u := &storage.User{ID: "u", DisabledAt: tt.disabledAt}
			assert.Equal(t, tt.want, issuedBeforeDisable(p, u, tt.leeway))
		})
	}
}
