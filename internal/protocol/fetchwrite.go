package protocol

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"

	"golang.org/x/sys/unix"

	"github.com/strata-io/strata/internal/broker"
	"github.com/strata-io/strata/internal/replica"
)

// fetchEncoder writes the Fetch response framing (v4-15) into a buffer;
// record bytes are not copied: each partition's chunks are noted as a
// "hole" to fill from the segment files while writing.
type fetchEncoder struct {
	flexible bool
	version  int16
	buf      []byte
	holes    []fetchHole
}

// fetchHole marks where in buf a partition's record bytes go.
type fetchHole struct {
	at     int // offset in buf after which the chunks are written
	chunks []broker.Chunk
}

func (e *fetchEncoder) i16(v int16) { e.buf = binary.BigEndian.AppendUint16(e.buf, uint16(v)) }
func (e *fetchEncoder) i32(v int32) { e.buf = binary.BigEndian.AppendUint32(e.buf, uint32(v)) }
func (e *fetchEncoder) i64(v int64) { e.buf = binary.BigEndian.AppendUint64(e.buf, uint64(v)) }
func (e *fetchEncoder) uvarint(v uint64) {
	e.buf = binary.AppendUvarint(e.buf, v)
}

// arrayLen writes an array length (compact on flexible versions).
func (e *fetchEncoder) arrayLen(n int) {
	if e.flexible {
		e.uvarint(uint64(n) + 1)
	} else {
		e.i32(int32(n))
	}
}

func (e *fetchEncoder) str(s string) {
	if e.flexible {
		e.uvarint(uint64(len(s)) + 1)
	} else {
		e.i16(int16(len(s)))
	}
	e.buf = append(e.buf, s...)
}

// tags writes an empty tagged-field section on flexible versions.
func (e *fetchEncoder) tags() {
	if e.flexible {
		e.buf = append(e.buf, 0)
	}
}

// encode lays out the whole response frame for correlation id corr and
// returns the total frame length (size prefix excluded).
func (e *fetchEncoder) encode(corr int32, fr *fetchReply) (int64, error) {
	e.version = fr.version
	e.flexible = fr.version >= 12
	e.buf = append(e.buf[:0], 0, 0, 0, 0) // size, patched below
	e.i32(corr)
	e.tags() // response header v1
	e.i32(fr.throttleMs)
	if e.version >= 7 {
		e.i16(fr.errorCode)
		e.i32(fr.sessionID)
	}
	e.arrayLen(len(fr.topics))
	var records int64
	for _, t := range fr.topics {
		if e.version >= 13 {
			// v13+ names the topic by id (KIP-516).
			id := t.id
			if !t.hasID && fr.topicID != nil {
				id = fr.topicID(t.name)
			}
			e.buf = append(e.buf, id[:]...)
		} else {
			e.str(t.name)
		}
		e.arrayLen(len(t.parts))
		for _, p := range t.parts {
			e.i32(p.partition)
			e.i16(p.errorCode)
			e.i64(p.hw)
			e.i64(p.lso)
			if e.version >= 5 {
				e.i64(p.logStart)
			}
			// Aborted transactions: null for READ_UNCOMMITTED.
			if p.aborted == nil {
				if e.flexible {
					e.uvarint(0)
				} else {
					e.i32(-1)
				}
			} else {
				e.arrayLen(len(p.aborted))
				for _, a := range p.aborted {
					e.i64(a.ProducerID)
					e.i64(a.FirstOffset)
					e.tags()
				}
			}
			if e.version >= 11 {
				pref := int32(-1) // preferred read replica (KIP-392)
				if p.preferred != nil {
					pref = *p.preferred
				}
				e.i32(pref)
			}
			if e.flexible {
				e.uvarint(uint64(p.size) + 1)
			} else {
				e.i32(int32(p.size))
			}
			if p.size > 0 {
				e.holes = append(e.holes, fetchHole{at: len(e.buf), chunks: p.chunks})
				records += p.size
			}
			if e.flexible {
				n := 0
				if p.diverging != nil {
					n++
				}
				if p.leader != nil {
					n++
				}
				if p.durableEnd != nil {
					n++
				}
				e.uvarint(uint64(n))
				if d := p.diverging; d != nil {
					// Tagged field 0, DivergingEpoch (v12+): epoch int32,
					// end offset int64, its own empty tag section.
					e.uvarint(0)
					e.uvarint(13)
					e.i32(d.Epoch)
					e.i64(d.EndOffset)
					e.uvarint(0)
				}
				if l := p.leader; l != nil {
					// Tagged field 1, CurrentLeader (v12+, KIP-951): leader
					// id int32, leader epoch int32, empty tag section.
					e.uvarint(1)
					e.uvarint(9)
					e.i32(l[0])
					e.i32(l[1])
					e.uvarint(0)
				}
				if d := p.durableEnd; d != nil {
					// Strata's replica.DurableEndTag (tags go in
					// ascending order): the follower's fsynced end as
					// recorded, int64.
					e.uvarint(uint64(replica.DurableEndTag))
					e.uvarint(8)
					e.i64(*d)
				}
			}
		}
		e.tags()
	}
	e.tags()
	total := int64(len(e.buf)-4) + records
	if total > 1<<31-1 {
		return 0, fmt.Errorf("fetch response of %d bytes exceeds the frame limit", total)
	}
	binary.BigEndian.PutUint32(e.buf, uint32(total))
	return total, nil
}

// writeFetch encodes fr and writes it: framing from a small buffer, record
// bytes with sendfile(2) from the segment files (or ReadAt + write when
// sendfile is unavailable). Chunks are released afterwards.
func (c *conn) writeFetch(corr int32, fr *fetchReply) error {
	defer fr.release()
	e := fetchEncoder{buf: c.fetchBuf}
	total, err := e.encode(corr, fr)
	c.fetchBuf = e.buf[:0]
	if err != nil {
		return err
	}
	pos := 0
	for _, h := range e.holes {
		if _, err := c.w.Write(e.buf[pos:h.at]); err != nil {
			return err
		}
		pos = h.at
		for _, ch := range h.chunks {
			if err := c.writeChunk(ch); err != nil {
				return err
			}
		}
	}
	if _, err := c.w.Write(e.buf[pos:]); err != nil {
		return err
	}
	c.s.metrics.bytesSent.Add(float64(total + 4))
	return c.w.Flush()
}

// errShortFile means a segment file ended before the chunk did: the frame
// can no longer be completed, so the connection must close.
var errShortFile = errors.New("segment file shorter than the fetched chunk")

// writeChunk sends one chunk of a segment file to the client. A TLS
// connection (SSL listener) is a *tls.Conn, not a *net.TCPConn, so its
// record bytes take the copy path: they must be encrypted in user space
// (kernel TLS offload is not used).
func (c *conn) writeChunk(ch broker.Chunk) error {
	if ch.Len == 0 {
		return nil
	}
	f := ch.File.File()
	if fd, ok := f.(interface{ Fd() uintptr }); ok && !c.s.cfg.DisableSendfile {
		if tc, ok := c.nc.(*net.TCPConn); ok {
			if err := c.w.Flush(); err != nil {
				return err
			}
			return c.sendfile(tc, int(fd.Fd()), ch.Pos, ch.Len)
		}
	}
	return c.copyChunk(f, ch.Pos, ch.Len)
}

// sendfile copies n bytes at off of file descriptor src to the socket with
// sendfile(2), with an explicit offset (no shared file position), waiting
// for socket writability through the runtime poller.
func (c *conn) sendfile(tc *net.TCPConn, src int, off, n int64) error {
	rc, err := tc.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	werr := rc.Write(func(fd uintptr) bool {
		for n > 0 {
			chunk := int(min(n, 1<<30))
			m, err := unix.Sendfile(int(fd), src, &off, chunk)
			if m > 0 {
				n -= int64(m)
				c.s.sendfile.bytes.Add(int64(m))
			}
			c.s.sendfile.calls.Add(1)
			switch {
			case err == unix.EAGAIN:
				return false // wait until writable
			case err == unix.EINTR:
				continue
			case err != nil:
				serr = fmt.Errorf("sendfile: %w", err)
				return true
			case m == 0:
				serr = errShortFile
				return true
			}
		}
		return true
	})
	if werr != nil {
		return werr
	}
	return serr
}

// copyChunk is the copy-through-user-space path: ReadAt into a buffer and
// write it to the socket.
func (c *conn) copyChunk(f io.ReaderAt, off, n int64) error {
	buf := make([]byte, min(n, 256<<10))
	for n > 0 {
		m, err := f.ReadAt(buf[:min(n, int64(len(buf)))], off)
		if m > 0 {
			if _, werr := c.w.Write(buf[:m]); werr != nil {
				return werr
			}
			off += int64(m)
			n -= int64(m)
		}
		if err != nil && n > 0 {
			if errors.Is(err, io.EOF) {
				return errShortFile
			}
			return err
		}
	}
	return nil
}
