package journal

import (
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
)

// FS is what the journal does to files: every create, write, sync,
// rename, remove and read of its segments, and what it reads of Badger's
// directory, goes through it. OS, the default, is the operating system's;
// tests use one that holds writes until they are synced and loses the
// rest at a simulated crash (crashfs_test.go), so that what a power cut
// leaves can be replayed deterministically.
type FS interface {
	// OpenFile opens a file as os.OpenFile does.
	OpenFile(name string, flag int, perm fs.FileMode) (File, error)
	// ReadFile reads a whole file as os.ReadFile does.
	ReadFile(name string) ([]byte, error)
	// ReadDir lists a directory, sorted by name, as os.ReadDir does.
	ReadDir(name string) ([]fs.DirEntry, error)
	// Stat describes a file as os.Stat does.
	Stat(name string) (fs.FileInfo, error)
	// MkdirAll makes a directory and its parents as os.MkdirAll does.
	MkdirAll(name string, perm fs.FileMode) error
	// Rename renames a file as os.Rename does; the new name is durable
	// once the directory is synced (SyncDir).
	Rename(oldName, newName string) error
	// Remove removes a file as os.Remove does; durable once the
	// directory is synced.
	Remove(name string) error
	// SyncDir makes the entries of a directory durable: the names created,
	// renamed and removed in it.
	SyncDir(name string) error
}

// File is an open file of an FS.
type File interface {
	// Write writes at the file's offset.
	Write(p []byte) (int, error)
	// WriteAt writes at off.
	WriteAt(p []byte, off int64) (int, error)
	// Sync makes the file's data and metadata durable (fsync).
	Sync() error
	// Datasync makes the file's data durable, and the metadata needed to
	// read it (fdatasync).
	Datasync() error
	// Stat describes the file.
	Stat() (fs.FileInfo, error)
	// Close closes the file.
	Close() error
}

// OS is the operating system's file system, the journal's unless
// Options.FS says otherwise.
var OS FS = osFS{}

type osFS struct{}

func (osFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) ReadFile(name string) ([]byte, error)         { return os.ReadFile(name) }
func (osFS) ReadDir(name string) ([]fs.DirEntry, error)   { return os.ReadDir(name) }
func (osFS) Stat(name string) (fs.FileInfo, error)        { return os.Stat(name) }
func (osFS) MkdirAll(name string, perm fs.FileMode) error { return os.MkdirAll(name, perm) }
func (osFS) Rename(oldName, newName string) error         { return os.Rename(oldName, newName) }
func (osFS) Remove(name string) error                     { return os.Remove(name) }

// SyncDir fsyncs the directory. Windows has no such call for a directory.
func (osFS) SyncDir(name string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(name)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// osFile is an operating system's file: a pointer, so that passing it as
// a File allocates nothing.
type osFile struct{ *os.File }

func (f osFile) Datasync() error { return fdatasync(f.File) }

// dropCache drops the file's pages from the page cache (makeSegmentFile).
func (f osFile) dropCache() { dropCache(f.File) }

// MkdirAll makes dir and its parents where they are missing, durably:
// each new directory's parent is synced, so that a power cut cannot lose
// it with what is then written in it. The store makes its directory with
// it before Badger does (Badger syncs no parent).
func MkdirAll(dir string) error { return mkdirDurable(OS, dir) }

// mkdirDurable makes dir, when it is not there, and syncs the directory
// that holds it (and so on up to the first that existed), so that a crash
// cannot lose it with what is then written in it.
func mkdirDurable(fsys FS, dir string) error {
	if _, err := fsys.Stat(dir); err == nil {
		return nil
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := mkdirDurable(fsys, parent); err != nil {
			return err
		}
	}
	if err := fsys.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return fsys.SyncDir(parent)
}
