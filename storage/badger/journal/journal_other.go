//go:build !linux

package journal

import "os"

func fdatasync(f *os.File) error { return f.Sync() }

func dropCache(*os.File) {}
