package cleaner

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/strata-io/strata/internal/record"
)

// batchReader iterates the batches of a byte range of a segment file with
// bounded memory. Where the file has a descriptor (the real disk) it maps
// mapWindow bytes at a time read-only and hands out batches in place (no
// copy); otherwise it reads len(buf) bytes at a time with ReadAt. Either
// way a window grows only to hold one batch larger than it.
type batchReader struct {
	r        io.ReaderAt
	mm       *fileMapper // nil: ReadAt mode
	window   int
	pos, end int64 // next file position to read, end of the range
	buf      []byte
	win      []byte // unconsumed bytes of buf
	throttle *throttler
	ctx      context.Context
	read     int64 // bytes read from the file
}

// mapWindow is the size of one mapped window of a segment.
const mapWindow = 4 << 20

func newBatchReader(ctx context.Context, r io.ReaderAt, start, end int64, buf []byte, t *throttler) *batchReader {
	return &batchReader{r: r, mm: newFileMapper(r), window: mapWindow, pos: start, end: end, buf: buf, throttle: t, ctx: ctx}
}

// close releases the mapped window.
func (br *batchReader) close() {
	if br.mm != nil {
		br.mm.close()
	}
}

// next returns the next batch (aliasing the reader's buffer until the next
// call) or io.EOF at the end of the range. A partial batch at the end of
// the range ends the iteration like the end of the file does.
func (br *batchReader) next() (record.Batch, error) {
	for {
		if len(br.win) > 0 {
			b, rest, err := record.Next(br.win)
			if err == nil {
				br.win = rest
				return b, nil
			}
			if !errors.Is(err, record.ErrTruncated) {
				return nil, fmt.Errorf("read batch at position %d: %w", br.pos-int64(len(br.win)), err)
			}
		}
		if br.pos >= br.end {
			return nil, io.EOF
		}
		if err := br.fill(); err != nil {
			return nil, err
		}
	}
}

// fill makes more bytes available: in ReadAt mode it moves the unconsumed
// bytes to the front of the buffer and reads more, growing the buffer if
// one batch does not fit; in mmap mode it maps the next window starting at
// the first unconsumed byte.
func (br *batchReader) fill() error {
	if br.mm != nil {
		return br.fillMapped()
	}
	need := len(br.buf)
	if len(br.win) >= record.LogOverhead {
		sz := int64(int32(beUint32(br.win[8:12]))) + record.LogOverhead
		if avail := int64(len(br.win)) + br.end - br.pos; sz > avail {
			sz = avail // a torn or corrupt length: read what is there
		}
		if sz > int64(need) {
			need = int(sz)
		}
	}
	if need > cap(br.buf) {
		nb := make([]byte, need)
		br.buf = nb
	}
	br.buf = br.buf[:cap(br.buf)]
	k := copy(br.buf, br.win)
	want := int64(len(br.buf) - k)
	if rem := br.end - br.pos; want > rem {
		want = rem
	}
	n, err := br.r.ReadAt(br.buf[k:k+int(want)], br.pos)
	if err != nil && !(errors.Is(err, io.EOF) && n > 0) {
		if errors.Is(err, io.EOF) {
			br.pos = br.end // file shorter than announced: stop
			br.win = br.buf[:k]
			return nil
		}
		return fmt.Errorf("read segment at position %d: %w", br.pos, err)
	}
	br.pos += int64(n)
	br.read += int64(n)
	br.win = br.buf[:k+n]
	if br.throttle != nil {
		return br.throttle.wait(br.ctx, n)
	}
	return nil
}

func beUint32(b []byte) uint32 {
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

const pageSize = 4096

func (br *batchReader) fillMapped() error {
	start := br.pos - int64(len(br.win)) // first unconsumed byte
	need := int64(br.window)
	if len(br.win) >= record.LogOverhead {
		need = max(need, int64(int32(beUint32(br.win[8:12])))+record.LogOverhead)
	}
	aligned := start &^ (pageSize - 1)
	length := need + start - aligned
	if aligned+length > br.end {
		length = br.end - aligned
	}
	data, err := br.mm.mapAt(aligned, int(length))
	if err != nil {
		return err
	}
	n := aligned + length - br.pos
	br.win = data[start-aligned:]
	br.pos = aligned + length
	br.read += n
	if br.throttle != nil {
		return br.throttle.wait(br.ctx, int(n))
	}
	return nil
}
