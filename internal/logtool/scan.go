package logtool

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/strata-io/strata/internal/record"
	"github.com/twmb/franz-go/pkg/kerr"
)

// windowSize is how much of a segment the Scanner reads per ReadAt.
const windowSize = 1 << 20

// Scanner reads a .log segment batch by batch through a read-ahead window
// (one ReadAt per MiB, not per batch), so memory use is bounded by the
// window or the largest batch, and a batch length is trusted only if the
// batch fits in the file (no allocation from a corrupt length field).
type Scanner struct {
	r      io.ReaderAt
	size   int64
	pos    int64
	win    []byte // file bytes [winPos, winPos+len(win))
	winPos int64
	batch  record.Batch
	bpos   int64
	err    error
}

// NewScanner scans the first size bytes of r.
func NewScanner(r io.ReaderAt, size int64) *Scanner {
	return &Scanner{r: r, size: size}
}

// Next advances to the next batch. It returns false at the end of the data
// or at the first error (see Err).
func (s *Scanner) Next() bool {
	if s.err != nil || s.pos >= s.size {
		return false
	}
	left := s.size - s.pos
	if left < record.LogOverhead {
		s.err = fmt.Errorf("%w: %d bytes at end of segment", record.ErrTruncated, left)
		return false
	}
	header, err := s.view(s.pos, record.LogOverhead)
	if err != nil {
		s.err = err
		return false
	}
	length := int64(int32(be32(header[8:])))
	if length < record.HeaderSize-record.LogOverhead {
		s.err = fmt.Errorf("batchLength %d below minimum %d: %w", length, record.HeaderSize-record.LogOverhead, kerr.CorruptMessage)
		return false
	}
	n := record.LogOverhead + length
	if n > left {
		s.err = fmt.Errorf("%w: batch of %d bytes, only %d left in segment", record.ErrTruncated, n, left)
		return false
	}
	buf, err := s.view(s.pos, n)
	if err != nil {
		s.err = err
		return false
	}
	b, _, err := record.Next(buf)
	if err != nil {
		s.err = err
		return false
	}
	s.batch, s.bpos = b, s.pos
	s.pos += n
	return true
}

// view returns file bytes [pos, pos+n), refilling the window if needed.
// The caller guarantees pos+n <= s.size.
func (s *Scanner) view(pos, n int64) ([]byte, error) {
	if pos >= s.winPos && pos+n <= s.winPos+int64(len(s.win)) {
		return s.win[pos-s.winPos : pos-s.winPos+n], nil
	}
	size := min(max(n, windowSize), s.size-pos)
	if int64(cap(s.win)) < size {
		s.win = make([]byte, size)
	}
	s.win = s.win[:size]
	if got, err := s.r.ReadAt(s.win, pos); int64(got) < size {
		s.win, s.winPos = s.win[:0], 0
		return nil, fmt.Errorf("read %d bytes at %d: %w", size, pos, err)
	}
	s.winPos = pos
	return s.win[:n], nil
}

// Batch is the current batch. Its bytes are reused by the next call to Next.
func (s *Scanner) Batch() record.Batch { return s.batch }

// Position is the byte position of the current batch in the segment.
func (s *Scanner) Position() int64 { return s.bpos }

// Offset is the position just after the last batch read (where a failing
// batch starts once Next has returned false).
func (s *Scanner) Offset() int64 { return s.pos }

// Err is the error that stopped the scan, nil at a clean end. A partial
// batch at the end wraps record.ErrTruncated.
func (s *Scanner) Err() error { return s.err }

// Truncated reports whether the scan stopped at a partial trailing batch.
func (s *Scanner) Truncated() bool { return errors.Is(s.err, record.ErrTruncated) }

func be32(b []byte) uint32 {
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

// openSized opens path and returns it with its size.
func openSized(path string) (*os.File, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, st.Size(), nil
}
