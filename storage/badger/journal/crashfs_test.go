package journal

import (
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

// crashFS is an FS in memory that knows what a power cut keeps, in the
// spirit of SQLite's crash-test file system: a file's writes are durable
// only once the file is synced, and a directory's entries (files and
// directories created, renamed, removed in it) only once the directory
// is. crash drops everything else, optionally keeping a prefix of the
// last write that was never synced (a torn write); corrupt damages bytes
// that were synced. Everything is under root, a directory that exists
// durably.
type crashFS struct {
	root string

	mu      sync.Mutex
	names   map[string]*memNode // what reads see, by path
	durable map[string]*memNode // what survives a crash, by path
	gen     int                 // crashes so far: files opened before one are dead
	// last is the most recent write not yet synced, for a torn crash.
	last *memWrite
	// failSync, when set, makes every file sync fail without syncing.
	failSync bool
	// ops counts the operations that change something (writes, syncs,
	// creates, renames, removes); past downAfter of them, when set, every
	// one fails without effect: the machine is going down.
	ops, downAfter int
}

var errDown = errors.New("the machine is going down")

// op counts an operation that changes something, and fails it past
// downAfter. The caller holds c.mu.
func (c *crashFS) op() error {
	c.ops++
	if c.downAfter > 0 && c.ops > c.downAfter {
		return errDown
	}
	return nil
}

// memNode is a file (its inode) or a directory.
type memNode struct {
	dir    bool
	data   []byte // what reads see
	synced []byte // what survives a crash
}

// memWrite is a write not yet synced; truncate means the file was
// truncated to off.
type memWrite struct {
	node     *memNode
	off      int64
	p        []byte
	truncate bool
}

func newCrashFS(root string) *crashFS {
	d := &memNode{dir: true}
	return &crashFS{root: root, names: map[string]*memNode{root: d}, durable: map[string]*memNode{root: d}}
}

// crashMode says what a crash keeps of the writes that were not synced.
type crashMode struct {
	// tornKeep, when positive, keeps that many bytes of the last write
	// that was not synced (every earlier one is lost, as every later
	// write is): a write torn by the power cut.
	tornKeep int
}

// crash is a power cut and a restart: each file holds what was synced
// (and, per mode, a prefix of the last write), each directory the
// entries it held when it was last synced, if its own entry survives.
// Files opened before it fail from then on.
func (c *crashFS) crash(mode crashMode) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	names := map[string]*memNode{}
	for path, n := range c.durable {
		if !c.durablyReachable(path) {
			continue
		}
		names[path] = n
	}
	for _, n := range names {
		if n.dir {
			continue
		}
		data := slices.Clone(n.synced)
		if l := c.last; l != nil && l.node == n && mode.tornKeep > 0 && !l.truncate {
			data = writeAt(data, l.p[:min(mode.tornKeep, len(l.p))], l.off)
		}
		n.data, n.synced = data, slices.Clone(data)
	}
	c.names, c.durable, c.last = names, maps.Clone(names), nil
	c.ops, c.downAfter = 0, 0
}

// durablyReachable reports whether every directory above path survives.
func (c *crashFS) durablyReachable(path string) bool {
	for path != c.root {
		parent := filepath.Dir(path)
		if parent == path {
			return false
		}
		if n := c.durable[parent]; n == nil || !n.dir {
			return false
		}
		path = parent
	}
	return true
}

// corrupt flips the bytes at off, n of them, of the file at path, synced
// as they are: damage the disk did after the write.
func (c *crashFS) corrupt(path string, off int64, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	node := c.names[path]
	for i := off; i < off+int64(n); i++ {
		node.data[i] ^= 0xa5
		node.synced[i] ^= 0xa5
	}
}

// setFailSync makes every later file sync fail (without syncing) or not.
func (c *crashFS) setFailSync(fail bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failSync = fail
}

func writeAt(data, p []byte, off int64) []byte {
	if end := off + int64(len(p)); end > int64(len(data)) {
		data = append(data, make([]byte, end-int64(len(data)))...)
	}
	copy(data[off:], p)
	return data
}

func pathErr(op, path string, err error) error { return &fs.PathError{Op: op, Path: path, Err: err} }

func (c *crashFS) OpenFile(name string, flag int, _ fs.FileMode) (File, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.names[name]
	if (n == nil && flag&os.O_CREATE != 0) || flag&os.O_TRUNC != 0 {
		if err := c.op(); err != nil {
			return nil, err
		}
	}
	switch {
	case n == nil && flag&os.O_CREATE == 0:
		return nil, pathErr("open", name, fs.ErrNotExist)
	case n == nil:
		if p := c.names[filepath.Dir(name)]; p == nil || !p.dir {
			return nil, pathErr("open", name, fs.ErrNotExist)
		}
		n = &memNode{}
		c.names[name] = n
	case n.dir:
		return nil, pathErr("open", name, errors.New("is a directory"))
	}
	if flag&os.O_TRUNC != 0 && len(n.data) > 0 {
		n.data = nil
		c.last = &memWrite{node: n, truncate: true}
	}
	return &memFile{fs: c, node: n, name: name, gen: c.gen}, nil
}

func (c *crashFS) ReadFile(name string) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.names[name]
	if n == nil || n.dir {
		return nil, pathErr("read", name, fs.ErrNotExist)
	}
	return slices.Clone(n.data), nil
}

func (c *crashFS) ReadDir(name string) ([]fs.DirEntry, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := c.names[name]; n == nil || !n.dir {
		return nil, pathErr("readdir", name, fs.ErrNotExist)
	}
	var entries []fs.DirEntry
	for _, path := range slices.Sorted(maps.Keys(c.names)) {
		if path != name && filepath.Dir(path) == name {
			entries = append(entries, fs.FileInfoToDirEntry(newMemInfo(path, c.names[path])))
		}
	}
	return entries, nil
}

func (c *crashFS) Stat(name string) (fs.FileInfo, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.names[name]
	if n == nil {
		return nil, pathErr("stat", name, fs.ErrNotExist)
	}
	return newMemInfo(name, n), nil
}

func (c *crashFS) MkdirAll(name string, _ fs.FileMode) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.op(); err != nil {
		return err
	}
	for p := name; ; p = filepath.Dir(p) {
		if n := c.names[p]; n != nil {
			if !n.dir {
				return pathErr("mkdir", p, errors.New("not a directory"))
			}
			return nil
		}
		c.names[p] = &memNode{dir: true}
		if filepath.Dir(p) == p {
			return nil
		}
	}
}

func (c *crashFS) Rename(oldName, newName string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.op(); err != nil {
		return err
	}
	n := c.names[oldName]
	if n == nil {
		return pathErr("rename", oldName, fs.ErrNotExist)
	}
	delete(c.names, oldName)
	c.names[newName] = n
	return nil
}

func (c *crashFS) Remove(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.op(); err != nil {
		return err
	}
	if c.names[name] == nil {
		return pathErr("remove", name, fs.ErrNotExist)
	}
	delete(c.names, name)
	return nil
}

// SyncDir makes the entries of dir durable as they are.
func (c *crashFS) SyncDir(dir string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.op(); err != nil {
		return err
	}
	if n := c.names[dir]; n == nil || !n.dir {
		return pathErr("sync", dir, fs.ErrNotExist)
	}
	for _, m := range []map[string]*memNode{c.names, c.durable} {
		for path := range m {
			if path == dir || filepath.Dir(path) != dir {
				continue
			}
			if n := c.names[path]; n != nil {
				c.durable[path] = n
			} else {
				delete(c.durable, path)
			}
		}
	}
	return nil
}

// memFile is an open file of a crashFS.
type memFile struct {
	fs     *crashFS
	node   *memNode
	name   string
	gen    int
	off    int64
	closed bool
}

var errDead = errors.New("file opened before a crash")

func (f *memFile) check(op string) error {
	switch {
	case f.closed:
		return pathErr(op, f.name, os.ErrClosed)
	case f.gen != f.fs.gen:
		return pathErr(op, f.name, errDead)
	}
	return nil
}

func (f *memFile) Write(p []byte) (int, error) {
	n, err := f.WriteAt(p, f.off)
	f.off += int64(n)
	return n, err
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("write"); err != nil {
		return 0, err
	}
	if err := f.fs.op(); err != nil {
		return 0, err
	}
	f.node.data = writeAt(f.node.data, p, off)
	f.fs.last = &memWrite{node: f.node, off: off, p: slices.Clone(p)}
	return len(p), nil
}

func (f *memFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("sync"); err != nil {
		return err
	}
	if err := f.fs.op(); err != nil {
		return err
	}
	if f.fs.failSync {
		return pathErr("sync", f.name, errors.New("injected failure"))
	}
	f.node.synced = slices.Clone(f.node.data)
	if l := f.fs.last; l != nil && l.node == f.node {
		f.fs.last = nil
	}
	return nil
}

func (f *memFile) Datasync() error { return f.Sync() }

func (f *memFile) Stat() (fs.FileInfo, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("stat"); err != nil {
		return nil, err
	}
	return newMemInfo(f.name, f.node), nil
}

func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return pathErr("close", f.name, os.ErrClosed)
	}
	f.closed = true
	return nil
}

// memInfo describes a memNode as it was when described.
type memInfo struct {
	name string
	size int64
	dir  bool
}

func newMemInfo(path string, n *memNode) memInfo {
	return memInfo{name: filepath.Base(path), size: int64(len(n.data)), dir: n.dir}
}

func (i memInfo) Name() string       { return i.name }
func (i memInfo) Size() int64        { return i.size }
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return i.dir }
func (i memInfo) Sys() any           { return nil }

func (i memInfo) Mode() fs.FileMode {
	if i.dir {
		return fs.ModeDir | 0o700
	}
	return 0o600
}
