package app

import (
	"bytes"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/cespare/xxhash/v2"
	"github.com/klauspost/compress/gzip"
	"github.com/labstack/echo/v4"
)

// Conditional and compressed list pages (issue 31, item 4).
//
// Partners poll their list pages. Every page (a 200 answer to a GET or
// HEAD of a partner list) carries an ETag; a request whose If-None-Match
// matches it is answered 304 with no body, and a request that accepts gzip
// gets a compressed body. A request that asks for neither gets the bytes
// and status it always got, plus the ETag, Vary and Content-Length
// headers.
//
// The tag is weak (W/"..."), because two answers of an unchanged page are
// not byte-identical: every envelope carries its own timestamp and
// requestId. It is a hash of the page's bytes without those two members
// (the rest of the envelope, data and pagination included, so any other
// byte that changes changes the tag) and of the organization the caller
// acts in, so that equal bytes of two tenants (two empty lists) never
// share a tag. A tag is only ever sent to a caller the page itself may be
// sent to, and a hash of bytes the caller receives anyway tells it
// nothing more; unlike a store version counter, it says nothing of the
// writes of other tenants. Being computed from the bytes, it is the same
// on every replica and across restarts.
//
// The identity and gzip answers of one page share the tag: weak tags may
// be shared by semantically equivalent representations (RFC 9110 8.8.1),
// and a client revalidates with either. Every page answer carries
// Vary: Accept-Encoding, 304s included.

// gzipMinBytes is the smallest body worth compressing: below it, the gzip
// header and the CPU buy next to nothing.
const gzipMinBytes = 1024

// HTTP header names (echo has no constants for these), in the canonical
// form net/http keys them by: headerETag is used as a map key directly.
const (
	headerETag        = "Etag"
	headerIfNoneMatch = "If-None-Match"
)

// sendPage writes body, a success envelope with the given status, as the
// answer. A 200 answer to GET or HEAD is a page: it gets an ETag bound to
// scope (the caller's organization), 304 when If-None-Match matches it,
// and gzip when the client accepts it. Any other answer is written as
// is.
func sendPage(c echo.Context, status int, scope string, body []byte) error {
	req := c.Request()
	if status != http.StatusOK || (req.Method != http.MethodGet && req.Method != http.MethodHead) {
		return c.Blob(status, echo.MIMEApplicationJSON, body)
	}
	h := c.Response().Header()
	tag, _ := c.Get(ctxKnownPageTag).(string)
	if tag == "" {
		tag = pageETag(scope, body)
	}
	h[headerETag] = []string{tag}
	addVaryAcceptEncoding(h)
	if inm := req.Header.Values(headerIfNoneMatch); len(inm) > 0 && noneMatch(inm, tag) {
		// RFC 9110 15.4.5: the 304 carries the ETag, Vary and
		// Cache-Control a 200 would, and no representation metadata.
		return c.NoContent(http.StatusNotModified)
	}
	if len(body) >= gzipMinBytes {
		if ae := req.Header.Values(echo.HeaderAcceptEncoding); len(ae) > 0 && acceptsGzip(ae) {
			return sendGzip(c, body)
		}
	}
	h.Set(echo.HeaderContentLength, strconv.Itoa(len(body)))
	if _, ok := h[echo.HeaderContentType]; !ok {
		h[echo.HeaderContentType] = jsonContentTypeValue // what Blob would set
	}
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, body)
}

// Header values every page answer carries, shared by all of them instead
// of a fresh []string per answer (BenchmarkPrescriptionPage, alloc
// profile). Each has length and capacity 1, so that an Add copies rather
// than writes into it; nothing writes a header value in place.
var (
	jsonContentTypeValue    = []string{echo.MIMEApplicationJSON}
	varyAcceptEncodingValue = []string{echo.HeaderAcceptEncoding}
	deprecationValue        = []string{deprecationHeader}
	noStoreValue            = []string{"no-store"}
)

// addVaryAcceptEncoding is h.Add(Vary, Accept-Encoding).
func addVaryAcceptEncoding(h http.Header) {
	if _, ok := h[echo.HeaderVary]; ok {
		h.Add(echo.HeaderVary, echo.HeaderAcceptEncoding)
		return
	}
	h[echo.HeaderVary] = varyAcceptEncodingValue
}

// Envelope members that differ between two answers of one page.
var (
	timestampMember  = []byte(`"timestamp":`)
	paginationMember = []byte(`"pagination":`)
)

// pageETag is the weak entity tag of the envelope body for scope: an
// xxhash of scope and of body without its timestamp and requestId
// members.
func pageETag(scope string, body []byte) string {
	head, tail := stableParts(body)
	var d xxhash.Digest
	d.Reset()
	_, _ = d.WriteString(scope)
	_, _ = d.Write([]byte{0})
	_, _ = d.Write(head)
	_, _ = d.Write(tail)
	var sum [8]byte
	var tag [3 + 16 + 1]byte
	copy(tag[:], `W/"`)
	hex.Encode(tag[3:], d.Sum(sum[:0]))
	tag[len(tag)-1] = '"'
	return string(tag[:])
}

// stableParts splits a success envelope around its per-answer members:
// head is everything before "timestamp", tail is "pagination" to the end
// (nil when the envelope has none). The envelope's members come in the
// order success, statusCode, message, code, data, timestamp, requestId,
// pagination (respondRaw, envelope), compact or indented. Searching from
// the end finds the envelope's own "timestamp": nothing after it can hold
// one (a JSON string never holds an unescaped quote, and pagination has
// no such member), while data, before it, might.
func stableParts(body []byte) (head, tail []byte) {
	i := bytes.LastIndex(body, timestampMember)
	if i < 0 {
		return body, nil
	}
	j := bytes.Index(body[i:], paginationMember)
	if j < 0 {
		return body[:i], nil
	}
	return body[:i], body[i+j:]
}

// noneMatch reports whether the If-None-Match field values match tag, an
// entity tag of the current page, by weak comparison (RFC 9110 13.1.2):
// "*" matches any current representation, and W/"x" and "x" match each
// other. An element that is not an entity tag ends the parsing of its
// field value.
func noneMatch(values []string, tag string) bool {
	opaque := strings.TrimPrefix(tag, "W/")
	for _, v := range values {
		s := strings.TrimLeft(v, " \t")
		if strings.TrimRight(s, " \t") == "*" {
			return true
		}
		for {
			s = strings.TrimLeft(s, " \t,")
			if s == "" {
				break
			}
			etag, rest, ok := scanETag(s)
			if !ok {
				break
			}
			if strings.TrimPrefix(etag, "W/") == opaque {
				return true
			}
			s = rest
		}
	}
	return false
}

// scanETag reads the entity tag ([W/] quoted opaque-tag, RFC 9110 8.8.3)
// at the start of s and returns it and what follows.
func scanETag(s string) (etag, rest string, ok bool) {
	start := 0
	if strings.HasPrefix(s, "W/") {
		start = 2
	}
	if len(s) < start+2 || s[start] != '"' {
		return "", "", false
	}
	for i := start + 1; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			return s[:i+1], s[i+1:], true
		case c == 0x21 || c >= 0x23 && c <= 0x7e || c >= 0x80: // etagc
		default:
			return "", "", false
		}
	}
	return "", "", false
}

// acceptsGzip reports whether the Accept-Encoding field values accept gzip
// (RFC 9110 12.5.3): gzip (or its alias x-gzip) with a qvalue above 0, or,
// when neither is named, "*" with a qvalue above 0. An element with a
// malformed qvalue is ignored.
func acceptsGzip(values []string) bool {
	gz, star := -1, -1 // thousandths; -1 when not named
	for _, v := range values {
		for elem := range strings.SplitSeq(v, ",") {
			coding, params, _ := strings.Cut(elem, ";")
			coding = strings.TrimSpace(coding)
			q, ok := qvalue(params)
			if !ok {
				continue
			}
			switch {
			case strings.EqualFold(coding, "gzip"), strings.EqualFold(coding, "x-gzip"):
				gz = max(gz, q)
			case coding == "*":
				star = max(star, q)
			}
		}
	}
	if gz >= 0 {
		return gz > 0
	}
	return star > 0
}

// qvalue reads the weight among an element's parameters (";q=0.5"), in
// thousandths: 1000 when there is none. ok is false when it is malformed.
func qvalue(params string) (q int, ok bool) {
	q = 1000
	for p := range strings.SplitSeq(params, ";") {
		name, value, _ := strings.Cut(p, "=")
		if !strings.EqualFold(strings.TrimSpace(name), "q") {
			continue
		}
		value = strings.TrimSpace(value)
		// qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] )
		if value == "" || value[0] != '0' && value[0] != '1' {
			return 0, false
		}
		q = int(value[0]-'0') * 1000
		frac := value[1:]
		if frac != "" {
			if frac[0] != '.' || len(frac) > 4 {
				return 0, false
			}
			scale := 100
			for _, d := range []byte(frac[1:]) {
				if d < '0' || d > '9' {
					return 0, false
				}
				q += int(d-'0') * scale
				scale /= 10
			}
			if q > 1000 {
				return 0, false
			}
		}
	}
	return q, true
}

// gzipWriters holds gzip writers for reuse: a writer's state is hundreds
// of kilobytes, too much to allocate per answer.
var gzipWriters = sync.Pool{New: func() any {
	w, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed)
	return w
}}

// appendWriter is an io.Writer appending to b.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// sendGzip writes body gzip-compressed as a 200 page answer. BestSpeed:
// JSON pages compress almost as well as at the default level, at a
// fraction of the CPU.
func sendGzip(c echo.Context, body []byte) error {
	buf := getBuffer()
	defer putBuffer(buf)
	out := &appendWriter{b: (*buf)[:0]}
	zw := gzipWriters.Get().(*gzip.Writer)
	zw.Reset(out)
	_, err := zw.Write(body)
	if err == nil {
		err = zw.Close()
	}
	gzipWriters.Put(zw)
	*buf = out.b
	if err != nil {
		return err
	}
	h := c.Response().Header()
	h.Set(echo.HeaderContentEncoding, "gzip")
	h.Set(echo.HeaderContentLength, strconv.Itoa(len(out.b)))
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, out.b)
}
