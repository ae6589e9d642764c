package cli

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/rxgate/rxgate/config"
)

// The server's log is buffered (issue 31): with one JSON line per request
// written straight to stderr, every partner request paid a write(2) of its
// own, the largest cost the authenticated page had beyond a bare handler
// that its own code did not need (make bench-read, server CPU per
// request). Lines now go to a buffer that an owned goroutine writes out
// every logFlushEvery, and at once when it passes logBufferMax, when a
// record at warn or above is logged, and when the server stops. A crash
// loses at most the info lines of the last logFlushEvery; a warning or an
// error is never held back.

// logFlushEvery is the longest an info line waits in the buffer.
const logFlushEvery = 100 * time.Millisecond

// logBufferMax is the buffered bytes that are written at once, without
// waiting for the tick.
const logBufferMax = 64 << 10

// logBuffer is an io.Writer that holds what it is given until Flush, the
// tick or Close. The slog handlers write each record in one Write, so a
// line is never split between two writes to w.
type logBuffer struct {
	w io.Writer

	mu     sync.Mutex
	buf    []byte
	closed bool // after Close, writes go straight to w

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// newLogBuffer returns a buffer in front of w and starts its goroutine,
// which Close stops.
func newLogBuffer(w io.Writer, every time.Duration) *logBuffer {
	b := &logBuffer{w: w, buf: make([]byte, 0, logBufferMax), stop: make(chan struct{}), done: make(chan struct{})}
	go b.run(every)
	return b
}

func (b *logBuffer) run(every time.Duration) {
	defer close(b.done)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-tick.C:
			b.Flush()
		}
	}
}

// Write buffers p; it writes the buffer out first when p would take it
// past logBufferMax.
func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		_, _ = b.w.Write(p)
		return len(p), nil
	}
	if len(b.buf)+len(p) > logBufferMax {
		b.flushLocked()
		if len(p) > logBufferMax {
			_, _ = b.w.Write(p)
			return len(p), nil
		}
	}
	b.buf = append(b.buf, p...)
	return len(p), nil
}

// Flush writes out what is buffered.
func (b *logBuffer) Flush() {
	b.mu.Lock()
	b.flushLocked()
	b.mu.Unlock()
}

func (b *logBuffer) flushLocked() {
	if len(b.buf) == 0 {
		return
	}
	// A failed write of the log has nowhere to be reported: the lines are
	// dropped, as the unbuffered handler's would have been.
	_, _ = b.w.Write(b.buf)
	b.buf = b.buf[:0]
}

// Close stops the goroutine and writes out what is buffered; what is
// written after it goes straight to w.
func (b *logBuffer) Close() {
	b.once.Do(func() { close(b.stop) })
	<-b.done
	b.mu.Lock()
	b.flushLocked()
	b.closed = true
	b.mu.Unlock()
}

// flushingHandler writes the buffer out after each record at warn or
// above, so that only info and debug lines wait for the tick.
type flushingHandler struct {
	slog.Handler
	b *logBuffer
}

func (h flushingHandler) Handle(ctx context.Context, r slog.Record) error {
	err := h.Handler.Handle(ctx, r)
	if r.Level >= slog.LevelWarn {
		h.b.Flush()
	}
	return err
}

func (h flushingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return flushingHandler{h.Handler.WithAttrs(as), h.b}
}

func (h flushingHandler) WithGroup(name string) slog.Handler {
	return flushingHandler{h.Handler.WithGroup(name), h.b}
}

// newBufferedLogger is newLogger writing through a logBuffer, which the
// caller closes (writing out what is buffered, stopping its goroutine).
func newBufferedLogger(cfg *config.Config, w io.Writer) (*slog.Logger, *logBuffer) {
	return newBufferedLoggerEvery(cfg, w, logFlushEvery)
}

// newBufferedLoggerEvery is newBufferedLogger with the tick given.
func newBufferedLoggerEvery(cfg *config.Config, w io.Writer, every time.Duration) (*slog.Logger, *logBuffer) {
	b := newLogBuffer(w, every)
	return slog.New(flushingHandler{newLogger(cfg, b).Handler(), b}), b
}
