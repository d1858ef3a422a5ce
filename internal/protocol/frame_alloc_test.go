package protocol

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
	"testing"
)

// trickle serves a frame prefix that announces size bytes but delivers only
// sent bytes (in small reads, like a slow peer), then EOF.
type trickle struct {
	hdr  [4]byte
	pos  int // bytes of header + body handed out
	sent int
}

func newTrickle(size int32, sent int) *trickle {
	t := &trickle{sent: sent}
	binary.BigEndian.PutUint32(t.hdr[:], uint32(size))
	return t
}

func (t *trickle) Read(p []byte) (int, error) {
	if t.pos < 4 {
		n := copy(p, t.hdr[t.pos:])
		t.pos += n
		return n, nil
	}
	left := t.sent - (t.pos - 4)
	if left <= 0 {
		return 0, io.EOF
	}
	n := min(len(p), left, 4<<10)
	clear(p[:n])
	t.pos += n
	return n, nil
}

// allocatedBy reports the bytes the runtime allocated while f ran.
func allocatedBy(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestReadFrameTrickleBoundedAlloc: a peer that announces 100 MiB and then
// sends only part of it costs memory in proportion to what it sent (plus one
// modest first chunk), not to what it announced. The bound counts staging
// chunks as fresh allocations (a cold pool): at most the bytes sent plus a
// chunk while staging, then the frame buffer, at most twice the bytes sent.
func TestReadFrameTrickleBoundedAlloc(t *testing.T) {
	frames := new(framePool)
	const announced = 100 << 20
	for _, sent := range []int{0, 10 << 10, 3 << 20, 10 << 20, 50<<20 + 1} {
		t.Run(fmt.Sprintf("sent=%d", sent), func(t *testing.T) {
			var err error
			got := allocatedBy(func() {
				_, err = frames.readFrame(newTrickle(announced, sent), announced)
			})
			if !errors.Is(err, errFrame) {
				t.Fatalf("truncated frame: err %v", err)
			}
			limit := uint64(3*sent + 2*frameChunk + 64<<10) // slack: errors, test plumbing
			if got > limit {
				t.Errorf("announced %d, sent %d: allocated %d bytes, want <= %d", announced, sent, got, limit)
			}
		})
	}
}

// TestReadFrameContents checks frame bytes arrive intact across the sizes
// where the reader changes strategy.
func TestReadFrameContents(t *testing.T) {
	frames := new(framePool)
	for _, n := range []int{minFrame, 1000, 1<<20 - 1, 1 << 20, 1<<20 + 1, 3<<20 + 7, 6 << 20} {
		body := make([]byte, n)
		for i := range body {
			body[i] = byte(i*7 + i>>16)
		}
		stream := binary.BigEndian.AppendUint32(nil, uint32(n))
		stream = append(stream, body...)
		stream = append(stream, 0, 0, 0, 10) // next frame's prefix stays unread
		r := bytes.NewReader(stream)
		got, err := frames.readFrame(r, 8<<20)
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("size %d: err %v, equal %v", n, err, bytes.Equal(got, body))
		}
		if r.Len() != 4 {
			t.Fatalf("size %d: read past the frame (%d left)", n, r.Len())
		}
	}
}

// BenchmarkReadFrame reads one frame of each size from memory.
func BenchmarkReadFrame(b *testing.B) {
	frames := new(framePool)
	for _, size := range []int{1 << 10, 64 << 10, 1 << 20, 6 << 20} {
		b.Run(fmt.Sprintf("size=%dKiB", size>>10), func(b *testing.B) {
			stream := binary.BigEndian.AppendUint32(nil, uint32(size))
			stream = append(stream, make([]byte, size)...)
			r := bytes.NewReader(stream)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				r.Reset(stream)
				if _, err := frames.readFrame(r, 100<<20); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	// Steady state of a produce connection: each frame's buffer is
	// recycled once its request is answered.
	for _, size := range []int{1 << 20, 6 << 20} {
		b.Run(fmt.Sprintf("size=%dKiB/recycled", size>>10), func(b *testing.B) {
			stream := binary.BigEndian.AppendUint32(nil, uint32(size))
			stream = append(stream, make([]byte, size)...)
			r := bytes.NewReader(stream)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				r.Reset(stream)
				buf, err := frames.readFrame(r, 100<<20)
				if err != nil {
					b.Fatal(err)
				}
				frames.recycleFrame(buf)
			}
		})
	}
}

// TestFramePoolBound hands back more frame buffers than maxPooledFrames
// holds: only that many come back out, the rest are left to the
// collector, and drop empties the pool.
func TestFramePoolBound(t *testing.T) {
	frames := new(framePool)
	const size = 3 << 20 // class 3 MiB
	var bufs [][]byte
	for range 2 * maxPooledFrames / size {
		bufs = append(bufs, make([]byte, size, frameCap(size)))
	}
	for _, b := range bufs {
		frames.recycleFrame(b)
	}
	if frames.pooled > maxPooledFrames {
		t.Fatalf("pool holds %d bytes, bound %d", frames.pooled, maxPooledFrames)
	}
	got := 0
	for frames.recycledFrame(size) != nil {
		got++
	}
	if want := maxPooledFrames / size; got != want {
		t.Fatalf("%d buffers came back, want %d (the bound's worth)", got, want)
	}
	frames.recycleFrame(bufs[0])
	frames.drop()
	if b := frames.recycledFrame(size); b != nil || frames.pooled != 0 {
		t.Fatalf("after drop: buffer %v, %d bytes pooled", b != nil, frames.pooled)
	}
}
