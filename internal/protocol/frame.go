package protocol

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// minFrame is the smallest request body: api key, version, correlation id
// and a client id length.
const minFrame = 2 + 2 + 4 + 2

// errFrame marks a framing or decoding failure: the connection is closed.
var errFrame = errors.New("malformed request")

// frameChunk is the most readFrame allocates for a frame before any of its
// body has arrived, and the size of the pooled chunks that stage the first
// half of larger frames.
const frameChunk = 1 << 20

// Frame buffers of more than frameClass/2 and up to maxRecycledFrame bytes
// are allocated with their capacity rounded up to a multiple of frameClass,
// so that the buffer of a fully handled produce request can be recycled
// (recycleFrame) for a later frame of the same class, sparing the
// allocation, its page faults and the staging copy.
const (
	frameClass       = 1 << 20
	maxRecycledFrame = 16 << 20
)

// maxPooledFrames bounds the recycled frame buffers one server keeps (the
// sum of their capacities): enough for the requests in flight of a few
// fast producers (five 6 MiB frames each), while a buffer handed back
// beyond it is left to the garbage collector. A sync.Pool per class (the
// earlier design) kept every buffer handed back, of every class a burst
// used, until two collections had passed, without a bound on the total;
// and a quiet broker collects seldom (issue 18: the heap of a produce
// burst stayed resident). The broker's idle-heap releaser empties the
// pool once a burst is over (DropRecycledFrames).
const maxPooledFrames = 32 << 20

// framePool holds one server's recyclable frame buffers and staging chunks.
// The zero value is ready to use.
type framePool struct {
	mu sync.Mutex
	// free[k] holds recycled frame buffers of capacity (k+1)*frameClass,
	// the last handed back on top; pooled is their capacities' sum, at
	// most maxPooledFrames.
	free   [maxRecycledFrame / frameClass][][]byte
	pooled int
	// chunks recycles staging chunks (*[frameChunk]byte). Staged bytes are
	// always copied out before a chunk goes back, so no request aliases one.
	chunks sync.Pool
	// onRecycle, when set (tests only, before serving), sees each frame
	// buffer about to be recycled.
	onRecycle func([]byte)
}

// frameCap is the capacity to allocate for an n-byte frame: n rounded up
// to its class when frames of that size are recycled.
func frameCap(n int) int {
	if n <= frameClass/2 || n > maxRecycledFrame {
		return n
	}
	return (n + frameClass - 1) / frameClass * frameClass
}

// recycledFrame returns a recycled buffer for an n-byte frame, or nil.
func (p *framePool) recycledFrame(n int) []byte {
	if n <= frameClass/2 || n > maxRecycledFrame {
		return nil
	}
	k := frameCap(n)/frameClass - 1
	p.mu.Lock()
	defer p.mu.Unlock()
	l := len(p.free[k])
	if l == 0 {
		return nil
	}
	b := p.free[k][l-1]
	p.free[k][l-1] = nil
	p.free[k] = p.free[k][:l-1]
	p.pooled -= cap(b)
	return b[:n]
}

// recycleFrame makes buf available to a later frame, unless the pool
// already holds maxPooledFrames. The caller guarantees nothing references
// buf any more: the request decoded from it (whose fields may alias it)
// has been handled and answered.
func (p *framePool) recycleFrame(buf []byte) {
	c := cap(buf)
	if c%frameClass != 0 || c > maxRecycledFrame || c <= frameClass/2 {
		return
	}
	buf = buf[:c]
	if p.onRecycle != nil {
		p.onRecycle(buf)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pooled+c > maxPooledFrames {
		return
	}
	k := c/frameClass - 1
	p.free[k] = append(p.free[k], buf)
	p.pooled += c
}

// drop empties the pool of frame buffers (the collector frees them).
func (p *framePool) drop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.free[:])
	p.pooled = 0
}

// DropRecycledFrames lets the collector free the produce frame buffers the
// server keeps for reuse (at most maxPooledFrames): the broker's idle-heap
// releaser calls it once a burst of load is over.
func (s *Server) DropRecycledFrames() { s.frames.drop() }

// readFrame reads one size-prefixed request body into a buffer of its own
// (decoded requests alias it; see recycleFrame for when it may be reused).
// Sizes below minFrame or above maxBytes are framing errors.
//
// A recycled buffer of the frame's class is used when one is available:
// no allocation, so nothing for a lying peer to exploit. Otherwise a frame
// of up to frameChunk bytes is read into one allocation of its size
// (rounded up to its class, see frameCap). A larger frame costs memory
// only in proportion to what the peer actually sends: its first half is
// staged in pooled chunks as it arrives, and only once half the frame is
// in hand is the whole frame allocated (at most twice what was received),
// the staged bytes copied in once and the rest read in place. A huge
// length prefix followed by nothing (or by a trickle) therefore costs at
// most two chunks plus three times the bytes sent, and once the chunk pool
// is warm, two chunks plus twice the bytes sent.
func (p *framePool) readFrame(r io.Reader, maxBytes int32) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < minFrame {
		return nil, fmt.Errorf("%w: frame size %d below minimum %d", errFrame, n, minFrame)
	}
	if n > maxBytes {
		return nil, fmt.Errorf("%w: frame size %d exceeds socket.request.max.bytes %d", errFrame, n, maxBytes)
	}
	if buf := p.recycledFrame(int(n)); buf != nil {
		if got, err := io.ReadFull(r, buf); err != nil {
			p.recycleFrame(buf)
			return nil, truncated(got, int(n), err)
		}
		return buf, nil
	}
	if n <= frameChunk {
		buf := make([]byte, n, frameCap(int(n)))
		if got, err := io.ReadFull(r, buf); err != nil {
			return nil, truncated(got, int(n), err)
		}
		return buf, nil
	}
	var room [8]*[frameChunk]byte
	staged := room[:0]
	defer func() { p.putChunks(staged) }()
	got := 0
	for 2*got < int(n) {
		c, _ := p.chunks.Get().(*[frameChunk]byte)
		if c == nil {
			c = new([frameChunk]byte)
		}
		staged = append(staged, c)
		m, err := io.ReadFull(r, c[:min(frameChunk, int(n)-got)])
		got += m
		if err != nil {
			return nil, truncated(got, int(n), err)
		}
	}
	buf := make([]byte, n, frameCap(int(n)))
	off := 0
	for _, c := range staged {
		off += copy(buf[off:got], c[:])
	}
	if m, err := io.ReadFull(r, buf[got:]); err != nil {
		return nil, truncated(got+m, int(n), err)
	}
	return buf, nil
}

// putChunks returns staging chunks to the pool.
func (p *framePool) putChunks(staged []*[frameChunk]byte) {
	for _, c := range staged {
		p.chunks.Put(c)
	}
}

// truncated is the error for a frame whose body ended early.
func truncated(got, n int, err error) error {
	return fmt.Errorf("%w: truncated frame: got %d of %d bytes: %v", errFrame, got, n, err)
}

// header is a decoded request header (v1 or v2).
type header struct {
	key      int16
	version  int16
	corr     int32
	clientID string
}

// request is one decoded request.
type request struct {
	header
	msg  kmsg.Request // nil when the version is unsupported (ApiVersions answers it anyway)
	size int          // frame bytes, held against the connection's read-ahead budget
	// pooled is what the request holds of queued.max.request.bytes,
	// returned once it is answered.
	pooled int64
	body   []byte // the frame msg was decoded from (its fields may alias it)
	// raw marks an unframed SASL token (after SaslHandshake v0): body is
	// the token, key is 36 (SaslAuthenticate) for metrics.
	raw bool
}

// decodeRequest parses a request body: header then the kmsg request of the
// given key and version. supported reports the version range served for a
// key; a key or version outside it is a decode error, except for
// ApiVersions, which is answered at v0 with UNSUPPORTED_VERSION (KIP-511).
func decodeRequest(body []byte, supported func(key int16) (lo, hi int16, ok bool)) (req request, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: decoder panic: %v", errFrame, p)
		}
	}()
	r := kbin.Reader{Src: body}
	req.key = r.Int16()
	req.version = r.Int16()
	req.corr = r.Int32()
	cid := r.NullableString()
	if !r.Ok() {
		return req, fmt.Errorf("%w: truncated request header", errFrame)
	}
	if cid != nil {
		req.clientID = *cid
	}
	lo, hi, ok := supported(req.key)
	if !ok {
		return req, fmt.Errorf("%w: unsupported api key %d (client %q)", errFrame, req.key, req.clientID)
	}
	if req.version < lo || req.version > hi {
		if req.key == 18 { // ApiVersions: answer anyway
			return req, nil
		}
		return req, fmt.Errorf("%w: api key %d version %d outside served range [%d,%d] (client %q)",
			errFrame, req.key, req.version, lo, hi, req.clientID)
	}
	msg := kmsg.RequestForKey(req.key)
	if msg == nil {
		return req, fmt.Errorf("%w: unknown api key %d", errFrame, req.key)
	}
	msg.SetVersion(req.version)
	if msg.IsFlexible() {
		kmsg.SkipTags(&r)
		if !r.Ok() {
			return req, fmt.Errorf("%w: bad header tags", errFrame)
		}
	}
	if err := msg.ReadFrom(r.Src); err != nil {
		return req, fmt.Errorf("%w: api key %d v%d: %v", errFrame, req.key, req.version, err)
	}
	req.msg = msg
	return req, nil
}

// appendResponse encodes a complete response frame (size, correlation id,
// header tags for flexible responses other than ApiVersions, body) to dst.
func appendResponse(dst []byte, corr int32, resp kmsg.Response) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(corr))
	if resp.IsFlexible() && resp.Key() != 18 {
		dst = append(dst, 0)
	}
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}
