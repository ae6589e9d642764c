package badger

import (
	"encoding/binary"
	"os"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// dirtyPages counts the pages of the file at path that the page cache
// holds dirty: written, and not yet written back to the disk (by a sync,
// or by the kernel's writeback, which waits vm.dirty_expire_centisecs).
// It maps the file, finds each page's frame in /proc/self/pagemap and its
// flags in /proc/kpageflags. ok is false where that cannot be read (not
// root, or a file system whose pages are never written back, as tmpfs).
func dirtyPages(path string) (n int, ok bool, err error) {
	if isTmpfs(path) {
		return 0, false, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return 0, false, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil || info.Size() == 0 {
		return 0, err == nil, err
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(info.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return 0, false, err
	}
	defer syscall.Munmap(data)
	pagemap, err := os.Open("/proc/self/pagemap")
	if err != nil {
		return 0, false, nil
	}
	defer pagemap.Close()
	flags, err := os.Open("/proc/kpageflags")
	if err != nil {
		return 0, false, nil
	}
	defer flags.Close()
	const (
		present = 1 << 63
		pfnMask = 1<<55 - 1
		dirty   = 1 << 4 // KPF_DIRTY
	)
	ps := os.Getpagesize()
	// A page the page cache does not hold cannot be dirty: only the pages
	// mincore reports resident are probed, which keeps a large sparse
	// file (a fresh value log or memtable) from being faulted in whole.
	// Where the kernel will not tell, it reports every page resident.
	resident := make([]byte, (len(data)+ps-1)/ps)
	if _, _, errno := syscall.Syscall(syscall.SYS_MINCORE, uintptrOf(data, 0), uintptr(len(data)), uintptr(unsafe.Pointer(&resident[0]))); errno != 0 {
		return 0, false, errno
	}
	var buf [8]byte
	for off := 0; off < len(data); off += ps {
		if resident[off/ps]&1 == 0 {
			continue
		}
		pageSink.Add(uint32(data[off])) // faults the page in: now it has a frame
		addr := uintptrOf(data, off)
		if _, err := pagemap.ReadAt(buf[:], int64(addr/uintptr(ps))*8); err != nil {
			return 0, false, nil
		}
		e := binary.LittleEndian.Uint64(buf[:])
		pfn := e & pfnMask
		if e&present == 0 || pfn == 0 {
			return 0, false, nil // frames are hidden without CAP_SYS_ADMIN
		}
		if _, err := flags.ReadAt(buf[:], int64(pfn)*8); err != nil {
			return 0, false, nil
		}
		if binary.LittleEndian.Uint64(buf[:])&dirty != 0 {
			n++
		}
	}
	return n, true, nil
}

// pageSink takes the bytes dirtyPages reads, so that the reads are made;
// atomic, since parallel tests read pages at once.
var pageSink atomic.Uint32

// isTmpfs reports whether path is on a tmpfs, whose pages stay dirty.
func isTmpfs(path string) bool {
	var st syscall.Statfs_t
	return syscall.Statfs(path, &st) == nil && st.Type == 0x01021994 // TMPFS_MAGIC
}

// uintptrOf is the address of data[off].
func uintptrOf(data []byte, off int) uintptr { return uintptr(unsafe.Pointer(&data[off])) }
