//go:build linux

package journal

import (
	"os"

	"golang.org/x/sys/unix"
)

// fdatasync makes f's data durable, and the metadata needed to read it.
func fdatasync(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }

// dropCache drops f's pages from the page cache: a segment's blocks were
// just written as zeros in large folios, and a record written into one
// would make the next sync write the whole folio out again.
func dropCache(f *os.File) { _ = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED) }
