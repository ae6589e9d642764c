package app_test

import (
	"net/http"
	"testing"
)

// BenchmarkPrescriptionPageConditional drives the prescription page
// through the real partner handler as a polling partner sends it: with
// the page's own ETag in If-None-Match (a 304), and asking for gzip.
// BenchmarkPrescriptionPage measures the request that asks for neither.
func BenchmarkPrescriptionPageConditional(b *testing.B) {
	rx, _, req := pageHandlers(b)
	w := &discardWriter{h: http.Header{}}
	rx.ServeHTTP(w, req())
	tag := w.h.Get("ETag")
	if w.status != http.StatusOK || tag == "" {
		b.Fatalf("status %d, ETag %q", w.status, tag)
	}
	run := func(header, value string, want int) func(b *testing.B) {
		return func(b *testing.B) {
			b.ReportAllocs()
			r := req()
			r.Header.Set(header, value)
			w := &discardWriter{h: http.Header{}}
			for b.Loop() {
				clear(w.h)
				rx.ServeHTTP(w, r)
				if w.status != want {
					b.Fatalf("status %d", w.status)
				}
			}
		}
	}
	b.Run("handler/not-modified", run("If-None-Match", tag, http.StatusNotModified))
	b.Run("handler/gzip", run("Accept-Encoding", "gzip", http.StatusOK))
}
