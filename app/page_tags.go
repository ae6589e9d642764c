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

// A remembered first page also keeps its data member and pagination (the
// bytes respondRaw wraps in the envelope), so that a poll without
// If-None-Match whose stamp is unchanged is answered 200 from them,
// without reading or encoding the page either: the store read was a
// quarter of the page's CPU in the real binary, and its largest part
// besides writing the answer to the socket (make bench-read, perf
// profile). The rule is the 304's: the stamp read before the page was
// read still equals the one read now, after every check the request
// makes, so the bytes are those a read would give. The bytes of all
// remembered pages together stay within about maxRememberedPageBytes;
// past it, a page's tag is remembered without its bytes.

// ctxKnownPageTag holds, in a page request's context, the remembered ETag
// of the page it reads (conditionalFirstPage).
const ctxKnownPageTag = "rxgate.knownPageTag"

// maxRememberedPageBytes bounds the data members remembered (about: two
// requests remembering at once may each see room for one more page).
const maxRememberedPageBytes = 32 << 20

// pageTag is a remembered first page: its key (firstPageKey), its ETag,
// the change stamp read before it was read and, unless the budget was
// spent, its data member and pagination.
type pageTag struct {
	key   string
	etag  string
	stamp uint64
	data  []byte // nil: not remembered
	info  storage.PageInfo
}

// pageTags is a fixed table of remembered first pages; two pages whose
// keys share a slot evict each other. held is the length of the data
// members they hold.
type pageTags struct {
	slots [1 << 12]atomic.Pointer[pageTag]
	held  atomic.Int64
}

func (t *pageTags) slot(key string) *atomic.Pointer[pageTag] {
	return &t.slots[xxhash.Sum64String(key)%uint64(len(t.slots))]
}

// get returns the page remembered for key with stamp, nil when none is.
func (t *pageTags) get(key string, stamp uint64) *pageTag {
	if p := t.slot(key).Load(); p != nil && p.key == key && p.stamp == stamp {
		return p
	}
	return nil
}

// put remembers p, without its data when they would pass the budget.
func (t *pageTags) put(p *pageTag) {
	if p.data != nil && t.held.Load()+int64(len(p.data)) > maxRememberedPageBytes {
		p.data = nil
	}
	t.held.Add(int64(len(p.data)))
	if old := t.slot(p.key).Swap(p); old != nil {
		t.held.Add(-int64(len(old.data)))
	}
}

// firstPageKey names the first page of a patient's prescriptions of limit
// items in an organization.
func firstPageKey(orgID, userID, patientID string, limit int) string {
	return orgID + "/" + userID + "/" + patientID + "/" + strconv.Itoa(limit)
}

// conditionalFirstPage is what listPrescriptions does before reading a
// first page: done is true when it answered 304 from a remembered tag;
// known, when not nil, is the remembered page with its data, to be sent
// as it is; otherwise, with a ChangeStamper store, remember is called
// with the page's data parts and pagination after the page is sent, and
// remembers them.
func (a *App) conditionalFirstPage(c echo.Context, changes storage.ChangeStamper, orgID string, req storage.PageRequest) (done bool, known *pageTag, remember func(info storage.PageInfo, parts ...[]byte)) {
	forget := func(storage.PageInfo, ...[]byte) {}
	if changes == nil || req.Cursor != "" {
		return false, nil, forget
	}
	r := c.Request()
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false, nil, forget
	}
	userID := c.Param("user_id")
	key := firstPageKey(orgID, userID, c.Param("patient_id"), req.Limit)
	stamp := changes.ChangeStamp(orgID, userID) // before the read it vouches for
	p := a.pageTags.get(key, stamp)
	if inm := r.Header.Values(headerIfNoneMatch); len(inm) > 0 {
		if p != nil && noneMatch(inm, p.etag) {
			h := c.Response().Header()
			// The headers the page's own 304 carries (sendPage).
			h["Deprecation"] = deprecationValue
			h[headerETag] = []string{p.etag}
			addVaryAcceptEncoding(h)
			return true, nil, nil
		}
	}
	if p != nil {
		// The page read now is the one the tag was computed from, by the
		// rule the 304 above answers by: sendPage sends the tag without
		// hashing the page again (BenchmarkPrescriptionPage, CPU profile:
		// the hash was a tenth of the request).
		c.Set(ctxKnownPageTag, p.etag)
		if p.data != nil {
			return false, p, forget
		}
	}
	return false, nil, func(info storage.PageInfo, parts ...[]byte) {
		res := c.Response()
		tag := res.Header().Get(headerETag)
		if tag == "" || res.Status != http.StatusOK && res.Status != http.StatusNotModified {
			return
		}
		n := 0
		for _, part := range parts {
			n += len(part)
		}
		var data []byte
		if int64(n) <= maxRememberedPageBytes/16 {
			data = make([]byte, 0, n)
			for _, part := range parts {
				data = append(data, part...)
			}
		}
		a.pageTags.put(&pageTag{key: key, etag: tag, stamp: stamp, data: data, info: info})
	}
}
