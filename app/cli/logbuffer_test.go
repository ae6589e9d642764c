package cli

import (
	"bytes"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/config"
)

// lockedBuffer is a bytes.Buffer safe for the logBuffer's goroutine.
type lockedBuffer struct {
	mu     sync.Mutex
	b      bytes.Buffer
	writes int
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writes++
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestBufferedLogger(t *testing.T) {
	for _, tc := range []struct {
		name string
		// log logs through the logger and the buffer; want is what the
		// underlying writer holds after it, before any tick.
		log func(cfg *config.Config, out *lockedBuffer) (want []string, none []string)
	}{
		{"info waits for a flush", func(cfg *config.Config, out *lockedBuffer) ([]string, []string) {
			l, b := newBufferedLoggerEvery(cfg, out, time.Hour)
			defer b.Close()
			l.Info("request", "status", 200)
			require.Empty(t, out.String(), "an info line is buffered")
			b.Flush()
			return []string{`"msg":"request"`}, nil
		}},
		{"a warning writes out at once, with what came before", func(cfg *config.Config, out *lockedBuffer) ([]string, []string) {
			l, b := newBufferedLoggerEvery(cfg, out, time.Hour)
			defer b.Close()
			l.Info("request", "status", 200)
			l.With("component", "queue").Warn("slow")
			return []string{`"msg":"request"`, `"msg":"slow"`, `"component":"queue"`}, nil
		}},
		{"an error writes out at once", func(cfg *config.Config, out *lockedBuffer) ([]string, []string) {
			l, b := newBufferedLoggerEvery(cfg, out, time.Hour)
			defer b.Close()
			l.WithGroup("g").Error("boom")
			return []string{`"msg":"boom"`}, nil
		}},
		{"a full buffer writes out", func(cfg *config.Config, out *lockedBuffer) ([]string, []string) {
			l, b := newBufferedLoggerEvery(cfg, out, time.Hour)
			defer b.Close()
			n := logBufferMax / 20 // lines of more than 20 bytes each
			for i := range n {
				l.Info("request", "i", i)
			}
			got := out.String()
			require.True(t, strings.Contains(got, `"i":0}`), "the first lines are written")
			require.False(t, strings.Contains(got, `"i":`+strconv.Itoa(n-1)+`}`), "the last line waits")
			return []string{`"i":0}`}, nil
		}},
		{"close writes out, later lines go straight through", func(cfg *config.Config, out *lockedBuffer) ([]string, []string) {
			l, b := newBufferedLoggerEvery(cfg, out, time.Hour)
			l.Info("before")
			b.Close()
			require.Contains(t, out.String(), `"msg":"before"`)
			l.Info("after")
			return []string{`"msg":"before"`, `"msg":"after"`}, nil
		}},
		{"debug below the level is not written", func(cfg *config.Config, out *lockedBuffer) ([]string, []string) {
			l, b := newBufferedLoggerEvery(cfg, out, time.Hour)
			l.Debug("hidden")
			l.Info("shown")
			b.Close()
			return []string{`"msg":"shown"`}, []string{"hidden"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := &lockedBuffer{}
			want, none := tc.log(config.Defaults(), out)
			got := out.String()
			for _, w := range want {
				require.True(t, strings.Contains(got, w), "want %s", w)
			}
			for _, n := range none {
				require.False(t, strings.Contains(got, n), "want no %s", n)
			}
			for _, line := range strings.Split(strings.TrimSuffix(got, "\n"), "\n") {
				if line != "" {
					require.True(t, strings.HasPrefix(line, "{") && strings.HasSuffix(line, "}"), "whole lines: %q", line)
				}
			}
		})
	}
}

// TestLogBufferTick: the goroutine writes out what waits, without a flush
// asked for (no timing asserted: it waits until the line is there).
func TestLogBufferTick(t *testing.T) {
	out := &lockedBuffer{}
	b := newLogBuffer(out, time.Millisecond)
	defer b.Close()
	_, _ = b.Write([]byte("line\n"))
	for !strings.Contains(out.String(), "line\n") {
		time.Sleep(time.Millisecond)
	}
}
