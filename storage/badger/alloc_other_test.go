//go:build !unix

package badger

import "io/fs"

// allocated is the space a file takes on disk: its size, off Unix.
func allocated(info fs.FileInfo) int64 { return info.Size() }
