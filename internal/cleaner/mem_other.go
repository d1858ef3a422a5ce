//go:build !linux

package cleaner

// tableMem is the offset map's memory: the Go heap on this platform.
type tableMem struct{}

func allocTable(words int) (*tableMem, []uint64, error) {
	return &tableMem{}, make([]uint64, words), nil
}

func (t *tableMem) reset(words []uint64) { clear(words) }

func (t *tableMem) free() {}

// fileMapper is unavailable on this platform: the cleaner copies with
// ReadAt.
type fileMapper struct{}

func newFileMapper(r any) *fileMapper { return nil }

func (m *fileMapper) mapAt(off int64, length int) ([]byte, error) { panic("unreachable") }

func (m *fileMapper) close() {}
