package testsuite_test

import (
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/testsuite"
)

// etagPattern is the weak tag of a partner list page.
var etagPattern = regexp.MustCompile(`^W/"[0-9a-f]{16}"$`)

// timestampMember matches an envelope's timestamp member, the one byte
// range two answers of an unchanged page with the same X-Request-Id may
// differ in.
var timestampMember = regexp.MustCompile(`"timestamp":"[^"]*"`)

// poll sends a partner GET of path with tn's organization secret and the
// extra headers. Go's transport asks for gzip (and decodes it) unless the
// request names an Accept-Encoding itself.
func poll(t testing.TB, env *testsuite.Env, tn *testsuite.Tenant, token, path string, headers map[string]string) *testsuite.Response {
	t.Helper()
	h := tn.Headers()
	maps.Copy(h, headers)
	return env.Do(t, testsuite.Request{URL: path, Token: token, Headers: h})
}

// requirePage requires a 200 page with a well-formed tag and returns the
// tag.
func requirePage(t testing.TB, env *testsuite.Env, r *testsuite.Response) string {
	t.Helper()
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.True(t, env.CheckEnvelope(t, r), "malformed envelope")
	tag := r.Header.Get("ETag")
	require.Regexp(t, etagPattern, tag)
	assert.Contains(t, r.Header.Values("Vary"), "Accept-Encoding")
	assert.Equal(t, "no-store", r.Header.Get("Cache-Control"))
	return tag
}

// requireNotModified requires a 304 for the page with tag: no body, and
// the headers a 200 would carry.
func requireNotModified(t testing.TB, r *testsuite.Response, tag string) {
	t.Helper()
	require.Equal(t, http.StatusNotModified, r.Status, "%s", r.Body)
	assert.Empty(t, r.Body, "a 304 has no body")
	assert.Equal(t, tag, r.Header.Get("ETag"))
	assert.Contains(t, r.Header.Values("Vary"), "Accept-Encoding")
	assert.Equal(t, "no-store", r.Header.Get("Cache-Control"), "no-store is kept on a 304")
	assert.NotEmpty(t, r.Header.Get("X-Request-Id"))
	assert.Empty(t, r.Header.Get("Content-Type"))
	assert.Empty(t, r.Header.Get("Content-Encoding"))
}

// TestConditionalPrescriptionPage polls the prescription page as a partner
// does (issue 31, item 4): a tag on every page, 304 while it is unchanged,
// a new tag after a new prescription or a status change, and gzip that
// decodes to the identity bytes.
func TestConditionalPrescriptionPage(t *testing.T) {
	t.Parallel()
	env := testsuite.Start(t)
	tn := env.NewTenant(t)
	token := tn.Token(t, testsuite.RolePrescriber)
	for _, item := range []string{"Amoxicillin 500 mg capsule", "Cefalexin 500 mg capsule", "Doxycycline 100 mg tablet"} {
		newPrescription(t, env, tn, testsuite.RolePrescriber, tn.PatientID, fullPrescription(item))
	}
	path := prescriptionsPath(tn, testsuite.RolePrescriber, tn.PatientID, nil)
	identity := map[string]string{"Accept-Encoding": "identity"}

	first := poll(t, env, tn, token, path, identity)
	tag := requirePage(t, env, first)
	assert.Empty(t, first.Header.Get("Content-Encoding"), "not asked for gzip")
	assert.Equal(t, strconv.Itoa(len(first.Body)), first.Header.Get("Content-Length"))
	require.Greater(t, len(first.Body), 1024, "the page is large enough to be compressed")

	t.Run("unchanged page", func(t *testing.T) {
		r := poll(t, env, tn, token, path, map[string]string{"If-None-Match": tag})
		requireNotModified(t, r, tag)
		assert.Regexp(t, deprecationPattern, r.Header.Get("Deprecation"), "the 304 carries the 200's headers")
	})
	t.Run("another request id, same tag", func(t *testing.T) {
		r := poll(t, env, tn, token, path, map[string]string{"X-Request-Id": "poll-2", "Accept-Encoding": "identity"})
		assert.Equal(t, tag, requirePage(t, env, r))
		assert.Equal(t, "poll-2", r.RequestID())
	})
	for _, tt := range []struct{ name, header string }{
		{"strong form", strings.TrimPrefix(tag, "W/")},
		{"list with the tag", `"stale", ` + tag + `, W/"0000000000000000"`},
		{"star", "*"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			requireNotModified(t, poll(t, env, tn, token, path, map[string]string{"If-None-Match": tt.header}), tag)
		})
	}
	t.Run("stale tag", func(t *testing.T) {
		r := poll(t, env, tn, token, path, map[string]string{"If-None-Match": `W/"0000000000000000"`})
		assert.Equal(t, tag, requirePage(t, env, r))
		assert.NotEmpty(t, r.Body)
	})
	t.Run("gzip", func(t *testing.T) {
		gz := poll(t, env, tn, token, path, map[string]string{"Accept-Encoding": "gzip", "X-Request-Id": "poll-gzip"})
		assert.Equal(t, tag, requirePage(t, env, gz), "both encodings share the weak tag")
		require.Equal(t, "gzip", gz.Header.Get("Content-Encoding"))
		require.NotNil(t, gz.Encoded)
		assert.Equal(t, strconv.Itoa(len(gz.Encoded)), gz.Header.Get("Content-Length"))
		assert.Less(t, len(gz.Encoded), len(gz.Body))
		id := poll(t, env, tn, token, path, map[string]string{"Accept-Encoding": "identity", "X-Request-Id": "poll-gzip"})
		requirePage(t, env, id)
		strip := func(b []byte) string { return timestampMember.ReplaceAllString(string(b), `"timestamp":""`) }
		assert.Equal(t, strip(id.Body), strip(gz.Body), "the gzip answer decodes to the identity bytes")
	})
	t.Run("gzip refused", func(t *testing.T) {
		r := poll(t, env, tn, token, path, map[string]string{"Accept-Encoding": "gzip;q=0"})
		requirePage(t, env, r)
		assert.Empty(t, r.Header.Get("Content-Encoding"))
		assert.Nil(t, r.Encoded)
	})
	t.Run("gzip and an unchanged page", func(t *testing.T) {
		r := poll(t, env, tn, token, path, map[string]string{"Accept-Encoding": "gzip", "If-None-Match": tag})
		requireNotModified(t, r, tag)
	})
	t.Run("another page", func(t *testing.T) {
		r := poll(t, env, tn, token, prescriptionsPath(tn, testsuite.RolePrescriber, tn.PatientID, url.Values{"limit": {"2"}}),
			map[string]string{"If-None-Match": tag})
		assert.NotEqual(t, tag, requirePage(t, env, r), "a page of other bytes has another tag")
	})

	// After a new prescription the old tag no longer matches.
	scid := newPrescription(t, env, tn, testsuite.RolePrescriber, tn.PatientID, shortPrescription("Paracetamol 500 mg"))
	r := poll(t, env, tn, token, path, map[string]string{"If-None-Match": tag})
	changed := requirePage(t, env, r)
	assert.NotEqual(t, tag, changed, "a new prescription changes the tag")
	assert.Contains(t, string(r.Body), scid)
	requireNotModified(t, poll(t, env, tn, token, path, map[string]string{"If-None-Match": changed}), changed)

	// So does a status change.
	env.MustAdmin(t, http.MethodPatch, tn.PatientPath()+"/prescriptions/"+scid, map[string]any{"status": "Ceased"}, http.StatusOK)
	r = poll(t, env, tn, token, path, map[string]string{"If-None-Match": changed})
	assert.NotEqual(t, changed, requirePage(t, env, r), "a status change changes the tag")
}

// TestConditionalLists checks the other paginated partner lists, users and
// custom drugs: a tag, 304 while unchanged, a new tag after a write, and
// no tag shared between organizations even when their pages are equal.
func TestConditionalLists(t *testing.T) {
	t.Parallel()
	env := testsuite.Start(t)
	a, b := env.NewTenant(t), env.NewTenant(t)
	owner := a.Token(t, testsuite.RoleOwner)
	prescriber := a.Token(t, testsuite.RolePrescriber)

	t.Run("users", func(t *testing.T) {
		path := usersPath(a)
		tag := requirePage(t, env, poll(t, env, a, owner, path, nil))
		requireNotModified(t, poll(t, env, a, owner, path, map[string]string{"If-None-Match": tag}), tag)
		addUsers(t, env, a, 1)
		r := poll(t, env, a, owner, path, map[string]string{"If-None-Match": tag})
		assert.NotEqual(t, tag, requirePage(t, env, r), "a new user changes the tag")
	})
	t.Run("custom drugs", func(t *testing.T) {
		path := drugsPath(a, testsuite.RolePrescriber)
		tag := requirePage(t, env, poll(t, env, a, prescriber, path, nil))
		requireNotModified(t, poll(t, env, a, prescriber, path, map[string]string{"If-None-Match": tag}), tag)
		mustCreateDrug(t, env, a, prescriber, testsuite.RolePrescriber, sampleDrug("Amoxicillin"))
		r := poll(t, env, a, prescriber, path, map[string]string{"If-None-Match": tag})
		assert.NotEqual(t, tag, requirePage(t, env, r), "a new drug changes the tag")
	})
	t.Run("equal pages of two organizations", func(t *testing.T) {
		// Both prescribers of the new tenants have no drugs: the pages
		// differ only in timestamp and requestId.
		c := env.NewTenant(t)
		ra := poll(t, env, c, c.Token(t, testsuite.RoleMember), drugsPath(c, testsuite.RoleMember), nil)
		tagC := requirePage(t, env, ra)
		assert.Equal(t, "Retrieved 0 custom drugs", ra.String(t, "message"))
		r := poll(t, env, b, b.Token(t, testsuite.RoleMember), drugsPath(b, testsuite.RoleMember), map[string]string{"If-None-Match": tagC})
		tagB := requirePage(t, env, r)
		assert.Equal(t, "Retrieved 0 custom drugs", r.String(t, "message"))
		assert.NotEqual(t, tagC, tagB, "a tag is bound to its organization")
	})
}

// TestConditionalPageNeverStale: a 304 for the first prescription page,
// which the server may answer from the tag it remembers without reading
// the page (app/page_tags.go), is never stale and never skips a check. A
// patient update (the page shows the patient), a new prescription and a
// status change each give the old tag the new page; a rotated
// organization secret and a disabled user are refused at once, tag or
// not.
func TestConditionalPageNeverStale(t *testing.T) {
	t.Parallel()
	env := testsuite.Start(t)
	tn := env.NewTenant(t)
	token := tn.Token(t, testsuite.RolePrescriber)
	newPrescription(t, env, tn, testsuite.RolePrescriber, tn.PatientID, fullPrescription("Amoxicillin 500 mg capsule"))
	path := prescriptionsPath(tn, testsuite.RolePrescriber, tn.PatientID, nil)
	ifNone := func(tag string) map[string]string { return map[string]string{"If-None-Match": tag} }
	// poll304 asks twice: the first 304 may read the page, the second may
	// come from the remembered tag.
	poll304 := func(tag string) {
		t.Helper()
		for range 2 {
			requireNotModified(t, poll(t, env, tn, token, path, ifNone(tag)), tag)
		}
	}
	tag := requirePage(t, env, poll(t, env, tn, token, path, nil))
	poll304(tag)

	r := env.Do(t, testsuite.Request{Method: http.MethodPut, URL: partnerPatientPath(tn, testsuite.RolePrescriber, tn.PatientID),
		Token: token, Headers: tn.Headers(), Body: map[string]any{"given_name": "Renamed"}})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	r = poll(t, env, tn, token, path, ifNone(tag))
	next := requirePage(t, env, r)
	assert.NotEqual(t, tag, next, "a patient update changes the tag")
	assert.Contains(t, string(r.Body), "Renamed")
	tag = next
	poll304(tag)

	scid := newPrescription(t, env, tn, testsuite.RolePrescriber, tn.PatientID, shortPrescription("Paracetamol 500 mg"))
	r = poll(t, env, tn, token, path, ifNone(tag))
	next = requirePage(t, env, r)
	assert.NotEqual(t, tag, next, "a new prescription changes the tag")
	assert.Contains(t, string(r.Body), scid)
	tag = next
	poll304(tag)

	env.MustAdmin(t, http.MethodPatch, tn.PatientPath()+"/prescriptions/"+scid, map[string]any{"status": "Ceased"}, http.StatusOK)
	next = requirePage(t, env, poll(t, env, tn, token, path, ifNone(tag)))
	assert.NotEqual(t, tag, next, "a status change changes the tag")
	tag = next
	poll304(tag)

	old := tn.RotateOrgSecret(t)
	r = poll(t, env, tn, token, path, map[string]string{"If-None-Match": tag, testsuite.HeaderOrganizationSecret: old})
	assert.Equal(t, http.StatusUnauthorized, r.Status, "the old secret, with a matching tag: %s", r.Body)
	poll304(tag)

	r = env.Do(t, testsuite.Request{Method: http.MethodPut, URL: strings.TrimPrefix(tn.UserPath(testsuite.RolePrescriber), "/admin") + "/disable",
		Token: token, Headers: tn.Headers()})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	r = poll(t, env, tn, token, path, ifNone(tag))
	assert.Equal(t, http.StatusUnauthorized, r.Status, "a disabled user, with a matching tag: %s", r.Body)
}
