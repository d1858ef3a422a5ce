package cleaner

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// tableMem is the offset map's memory. On Linux it is an anonymous mmap
// outside the Go heap: the garbage collector never scans it and, more
// importantly, does not count it as live heap, so the cleaner's other
// allocations are collected against a small heap goal instead of piling up
// to the size of the map. Reset returns the pages to the kernel
// (MADV_DONTNEED), which also zeroes them, so an idle cleaner holds no
// resident memory for its map and a round only pays for the pages it
// touches.
type tableMem struct {
	raw []byte
}

func allocTable(words int) (*tableMem, []uint64, error) {
	b, err := unix.Mmap(-1, 0, words*8, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, nil, fmt.Errorf("offset map: mmap %d bytes: %w", words*8, err)
	}
	// Huge pages: one fault per 2 MiB instead of per 4 KiB when a round
	// touches the table at random (best effort).
	_ = unix.Madvise(b, unix.MADV_HUGEPAGE)
	return &tableMem{raw: b}, unsafe.Slice((*uint64)(unsafe.Pointer(&b[0])), words), nil
}

// reset zeroes the table.
func (t *tableMem) reset(words []uint64) {
	if err := unix.Madvise(t.raw, unix.MADV_DONTNEED); err != nil {
		clear(words)
	}
}

// free unmaps the table; it must not be used afterwards.
func (t *tableMem) free() {
	if t.raw != nil {
		_ = unix.Munmap(t.raw)
		t.raw = nil
	}
}

// fileMapper maps read-only windows of a segment file, so the cleaner
// reads page-cache pages in place instead of copying them. One window is
// mapped at a time; resident memory stays bounded by the window size.
type fileMapper struct {
	fd  int
	cur []byte
}

// newFileMapper returns a mapper for r, or nil when r has no descriptor.
func newFileMapper(r any) *fileMapper {
	f, ok := r.(interface{ Fd() uintptr })
	if !ok {
		return nil
	}
	return &fileMapper{fd: int(f.Fd())}
}

// mapAt maps [off, off+length) (off page-aligned), unmapping the previous
// window.
func (m *fileMapper) mapAt(off int64, length int) ([]byte, error) {
	m.close()
	b, err := unix.Mmap(m.fd, off, length, unix.PROT_READ, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("mmap segment [%d,+%d): %w", off, length, err)
	}
	m.cur = b
	return b, nil
}

func (m *fileMapper) close() {
	if m.cur != nil {
		_ = unix.Munmap(m.cur)
		m.cur = nil
	}
}
