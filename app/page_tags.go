package app

import (
	"net/http"
	"strconv"
	"sync/atomic"

	"github.com/cespare/xxhash/v2"
	"github.com/labstack/echo/v4"

	"github.com/rxgate/rxgate/storage"
)

// A conditional first page answered without reading it (issue 31; make
// bench-read's 304 measure).
//
// A partner polling the first page of a patient's prescriptions with
// If-None-Match would otherwise have the page read and encoded, only to
// hash it and find it unchanged. When the store is a
// storage.ChangeStamper (Badger: one process owns the store, so its
// stamps see every write), the handler remembers the ETag of each first
// page it sends with the user's change stamp read before the page was
// read; a request whose stamp still equals it, after every check a page
// request makes (token, organization secret, membership, scope, user
// access), gets its 304 from the remembered tag. The stamp changes with
// any landed write of the user, its patients or their prescriptions
// (everything the page's bytes come from, besides the organization id
// the tag is bound to), so the answer is the one reading the page would
// give. On PostgreSQL, where other replicas write, there is no stamp and
// every conditional request reads its page.
//
// Only first pages (no lastKey) are remembered: they are what partners
// poll.

// ctxKnownPageTag holds, in a page request's context, the remembered ETag
// of the page it reads (conditionalFirstPage).
const ctxKnownPageTag = "rxgate.knownPageTag"

// pageTag is a remembered first page: its key (firstPageKey), its ETag and
// the change stamp read before it was read.
type pageTag struct {
	key   string
	etag  string
	stamp uint64
}

// pageTags is a fixed table of remembered first pages; two pages whose
// keys share a slot evict each other.
type pageTags struct {
	slots [1 << 12]atomic.Pointer[pageTag]
}

func (t *pageTags) slot(key string) *atomic.Pointer[pageTag] {
	return &t.slots[xxhash.Sum64String(key)%uint64(len(t.slots))]
}

// get returns the tag remembered for key with stamp, "" when none is.
func (t *pageTags) get(key string, stamp uint64) string {
	if p := t.slot(key).Load(); p != nil && p.key == key && p.stamp == stamp {
		return p.etag
	}
	return ""
}

func (t *pageTags) put(key, etag string, stamp uint64) {
	t.slot(key).Store(&pageTag{key: key, etag: etag, stamp: stamp})
}

// firstPageKey names the first page of a patient's prescriptions of limit
// items in an organization.
func firstPageKey(orgID, userID, patientID string, limit int) string {
	return orgID + "/" + userID + "/" + patientID + "/" + strconv.Itoa(limit)
}

// conditionalFirstPage is what listPrescriptions does before reading a
// first page: done is true when it answered 304 from a remembered tag;
// otherwise, with a ChangeStamper store, remember is called after the
// page is sent and remembers its tag.
func (a *App) conditionalFirstPage(c echo.Context, changes storage.ChangeStamper, orgID string, req storage.PageRequest) (done bool, remember func()) {
	if changes == nil || req.Cursor != "" {
		return false, func() {}
	}
	r := c.Request()
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false, func() {}
	}
	userID := c.Param("user_id")
	key := firstPageKey(orgID, userID, c.Param("patient_id"), req.Limit)
	stamp := changes.ChangeStamp(orgID, userID) // before the read it vouches for
	known := a.pageTags.get(key, stamp)
	if inm := r.Header.Values(headerIfNoneMatch); len(inm) > 0 {
		if tag := known; tag != "" && noneMatch(inm, tag) {
			h := c.Response().Header()
			// The headers the page's own 304 carries (sendPage).
			h["Deprecation"] = deprecationValue
			h[headerETag] = []string{tag}
			addVaryAcceptEncoding(h)
			return true, nil
		}
	}
	if known != "" {
		// The page read now is the one the tag was computed from, by the
		// rule the 304 above answers by: sendPage sends the tag without
		// hashing the page again (BenchmarkPrescriptionPage, CPU profile:
		// the hash was a tenth of the request), and it is already
		// remembered.
		c.Set(ctxKnownPageTag, known)
		return false, func() {}
	}
	return false, func() {
		res := c.Response()
		if tag := res.Header().Get(headerETag); tag != "" && (res.Status == http.StatusOK || res.Status == http.StatusNotModified) {
			a.pageTags.put(key, tag, stamp)
		}
	}
}
