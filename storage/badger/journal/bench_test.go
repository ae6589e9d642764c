package journal

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// BenchmarkAppend measures the flusher's hot path on the operating
// system's files: encode, seal, write and sync one small batch.
func BenchmarkAppend(b *testing.B) {
	j, err := Open(Options{StoreDir: b.TempDir(), SyncStore: func() error { return nil }}, func(uint64, []Write) error { return nil })
	require.NoError(b, err)
	defer j.Close(false)
	j.Halt() // nothing retires segments: none is the benchmark's
	writes := map[string]Change{"key": {Value: make([]byte, 200)}}
	b.ReportAllocs()
	ts := uint64(0)
	for b.Loop() {
		ts++
		if err := j.Append(ts, writes); err != nil {
			b.Fatal(err)
		}
	}
}
