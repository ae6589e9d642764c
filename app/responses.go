package app

import (
	"encoding/json"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rxgate/rxgate/storage"
)

// apiVersion is meta.apiVersion on error responses (spec 9.2).
const apiVersion = "1.0"

// envelope is the body of every success response (spec 2.1).
type envelope struct {
	Success    bool        `json:"success"`
	StatusCode int         `json:"statusCode"`
	Message    string      `json:"message"`
	Code       string      `json:"code,omitempty"`
	Data       any         `json:"data"`
	Timestamp  string      `json:"timestamp"`
	RequestID  string      `json:"requestId"`
	Pagination *Pagination `json:"pagination,omitempty"`
}

// Pagination is the pagination object of spec 2.1. LastKey is null on the
// last page.
type Pagination struct {
	Count   int     `json:"count"`
	HasNext bool    `json:"hasNext"`
	Limit   int     `json:"limit"`
	Offset  int     `json:"offset"`
	LastKey *string `json:"lastKey"`
}

func pagination(info storage.PageInfo) *Pagination {
	p := &Pagination{Count: info.Count, HasNext: info.HasNext, Limit: info.Limit, Offset: info.Offset}
	if info.LastKey != "" {
		k := info.LastKey
		p.LastKey = &k
	}
	return p
}

// timestamp formats t as RFC 3339 in UTC with milliseconds.
func timestamp(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// ok writes a 200 success envelope.
func (s *App) ok(c echo.Context, message string, data any) error {
	return s.respond(c, http.StatusOK, message, data, nil)
}

// created writes a 201 success envelope.
func (s *App) created(c echo.Context, message string, data any) error {
	return s.respond(c, http.StatusCreated, message, data, nil)
}

// page writes a 200 success envelope with a pagination object.
func (s *App) page(c echo.Context, message string, data any, info storage.PageInfo) error {
	return s.respond(c, http.StatusOK, message, data, pagination(info))
}

func (s *App) respond(c echo.Context, status int, message string, data any, p *Pagination) error {
	code := codeSuccess
	if status == http.StatusCreated {
		code = codeCreated
	}
	return c.JSON(status, envelope{
		Success:    true,
		StatusCode: status,
		Message:    message,
		Code:       code,
		Data:       data,
		Timestamp:  timestamp(s.now()),
		RequestID:  requestID(c),
		Pagination: p,
	})
}

// respondRaw writes a success envelope whose data member is the
// concatenation of parts, JSON the caller guarantees is valid, without
// re-encoding it.
func (s *App) respondRaw(c echo.Context, status int, message string, p *Pagination, parts ...[]byte) error {
	code := codeSuccess
	if status == http.StatusCreated {
		code = codeCreated
	}
	head, err := envelopeHead(status, message, code)
	if err != nil {
		return err
	}
	tail, err := json.Marshal(struct {
		Timestamp  string      `json:"timestamp"`
		RequestID  string      `json:"requestId"`
		Pagination *Pagination `json:"pagination,omitempty"`
	}{timestamp(s.now()), requestID(c), p})
	if err != nil {
		return err
	}
	buf := getBuffer()
	defer putBuffer(buf)
	body := append((*buf)[:0], head[:len(head)-1]...)
	body = append(body, `,"data":`...)
	for _, part := range parts {
		body = append(body, part...)
	}
	body = append(body, ',')
	body = append(body, tail[1:]...)
	*buf = body
	return sendPage(c, status, pageScope(c), body)
}

// jsonPage writes a 200 success envelope with a pagination object, as page
// does, through sendPage: the bytes are those c.JSON writes (echo's
// DefaultJSONSerializer: a json.Encoder, indented by two spaces with
// ?pretty or in debug mode, and a final newline).
func (s *App) jsonPage(c echo.Context, message string, data any, info storage.PageInfo) error {
	buf := getBuffer()
	defer putBuffer(buf)
	out := &appendWriter{b: (*buf)[:0]}
	enc := json.NewEncoder(out)
	if _, pretty := c.QueryParams()["pretty"]; c.Echo().Debug || pretty {
		enc.SetIndent("", "  ")
	}
	err := enc.Encode(envelope{
		Success:    true,
		StatusCode: http.StatusOK,
		Message:    message,
		Code:       codeSuccess,
		Data:       data,
		Timestamp:  timestamp(s.now()),
		RequestID:  requestID(c),
		Pagination: pagination(info),
	})
	*buf = out.b
	if err != nil {
		return err
	}
	return sendPage(c, http.StatusOK, pageScope(c), out.b)
}

// pageScope is what a page's ETag is bound to: the organization the
// caller acts in.
func pageScope(c echo.Context) string {
	if cl := callerOf(c); cl != nil && cl.org != nil {
		return cl.org.ID
	}
	return ""
}

// envelopeHeads remembers the encoded first members of respondRaw's
// envelopes, which depend on the status and the message only: the
// prescription page encoded the same bytes on every request
// (BenchmarkPrescriptionPage, CPU and alloc profiles). At most
// maxEnvelopeHeads are kept, since a message may carry a count.
var (
	envelopeHeads  sync.Map // envelopeHeadKey -> []byte
	envelopeHeadsN atomic.Int32
)

const maxEnvelopeHeads = 256

type envelopeHeadKey struct {
	status  int
	message string
}

// envelopeHead is {"success":true,"statusCode":..,"message":..,"code":..}
// as json.Marshal encodes it; the caller must not modify it.
func envelopeHead(status int, message, code string) ([]byte, error) {
	key := envelopeHeadKey{status, message}
	if b, ok := envelopeHeads.Load(key); ok {
		return b.([]byte), nil
	}
	head, err := json.Marshal(struct {
		Success    bool   `json:"success"`
		StatusCode int    `json:"statusCode"`
		Message    string `json:"message"`
		Code       string `json:"code"`
	}{true, status, message, code})
	if err != nil {
		return nil, err
	}
	if envelopeHeadsN.Load() < maxEnvelopeHeads && envelopeHeadsN.Add(1) <= maxEnvelopeHeads {
		envelopeHeads.Store(key, head[:len(head):len(head)])
	}
	return head, nil
}

// Response buffers are pooled: a prescription page is about 30 KB.
var bufferPool = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

func getBuffer() *[]byte { return bufferPool.Get().(*[]byte) }

// putBuffer returns a buffer to the pool, unless it grew unusually large.
func putBuffer(b *[]byte) {
	if cap(*b) <= 1<<20 {
		bufferPool.Put(b)
	}
}
