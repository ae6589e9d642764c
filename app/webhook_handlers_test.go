package app

import (
	"errors"
	"net/http"
	"net/netip"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/config"
	"github.com/rxgate/rxgate/storage"
)

// TestEventListParams: the event list's query, which GET /admin/v1/events
// and the console's events page both read, reports a bad limit alone and
// bad filters together.
func TestEventListParams(t *testing.T) {
	t.Parallel()
	const org = "00000000-0000-4000-8000-000000000000"
	tests := []struct {
		name       string
		query      string
		wantFields []string // nil: no error
		wantFilter storage.EventFilter
		wantPage   storage.PageRequest
	}{
		{name: "defaults", wantPage: storage.PageRequest{Limit: eventPageDefault}},
		{name: "every parameter", query: "organization_id=" + org + "&status=failed&limit=5&lastKey=k",
			wantFilter: storage.EventFilter{OrganizationID: org, Status: "failed"}, wantPage: storage.PageRequest{Limit: 5, Cursor: "k"}},
		{name: "bad filters together", query: "organization_id=nope&status=lost", wantFields: []string{"organization_id", "status"}},
		{name: "a bad limit alone", query: "status=lost&limit=0", wantFields: []string{"limit"}},
		{name: "a limit over the maximum", query: "limit=101", wantFields: []string{"limit"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			q, err := url.ParseQuery(tt.query)
			require.NoError(t, err)
			f, page, err := eventListParams(q)
			if tt.wantFields == nil {
				require.NoError(t, err)
				assert.Equal(t, tt.wantFilter, f)
				assert.Equal(t, tt.wantPage, page)
				return
			}
			var apiErr *Error
			require.True(t, errors.As(err, &apiErr), "%v", err)
			assert.Equal(t, http.StatusBadRequest, apiErr.Status)
			var fields []string
			for _, fe := range apiErr.Validation {
				fields = append(fields, fe.Field)
			}
			assert.Equal(t, tt.wantFields, fields)
		})
	}
}

// TestQueueOptionsCarryTheDestinationPolicy: the queue gets the loopback
// setting and the allowed networks it judges every dial by.
func TestQueueOptionsCarryTheDestinationPolicy(t *testing.T) {
	t.Parallel()
	cfg := config.Defaults()
	cfg.Webhooks.AllowInsecureLoopback = true
	cfg.Webhooks.AllowedNetworks = []string{"10.20.0.0/16", "fd00:1234::/32"}
	o := QueueOptions(cfg)
	assert.True(t, o.AllowInsecureLoopback)
	assert.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.20.0.0/16"), netip.MustParsePrefix("fd00:1234::/32")}, o.AllowedNetworks)
}
