package protocol

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-io/strata/internal/authz"
)

// pipelineDepth is how many decoded requests a connection reads ahead of
// the one being handled.
const pipelineDepth = 32

// readAheadBytes bounds the request bytes a connection holds that are not
// answered yet: the reader reads the next frame only below it (one frame
// may always be read, up to socket.request.max.bytes).
const readAheadBytes = 16 << 20

// conn is one client connection: a reader goroutine decodes frames ahead,
// the serve loop handles them one by one and writes answers in order.
type conn struct {
	s      *Server
	l      *served // the listener the connection came in on
	nc     net.Conn
	remote string
	// clientID is the client id of the request being handled (set by
	// dispatch; requests are handled one at a time).
	clientID string
	w        *bufio.Writer
	buf      []byte
	stopOnce sync.Once
	// fetchBuf is reused framing scratch for fetch responses.
	fetchBuf []byte
	// sasl is the SASL authentication progress (SASL listeners).
	sasl saslState
	// rawNext tells the reader, after a SaslHandshake v0 and after each
	// unframed SASL token, whether the next frame is an unframed token
	// (true) or a Kafka request again (false). quit is closed when the
	// connection ends, releasing a reader waiting on rawNext.
	rawNext chan bool
	quit    chan struct{}
	// authed is set (by the serve loop) once SASL authentication
	// succeeds; the reader uses it to bound requests before that.
	authed atomic.Bool
	// principal and subject are who the connection acts as (set before
	// its first request is handled, and by SASL authentication); busyOff
	// is time the current request spent waiting (a fetch's long poll),
	// not counted against the request quota; throttleUntil is when a
	// throttled connection may be served again (security.go).
	principal authz.Principal
	subject   authz.Subject
	// itself marks the broker's own in-process connection
	// (ServeInProcessAsBroker): never authorized, never throttled.
	itself        bool
	busyOff       time.Duration
	throttleUntil time.Time

	// Unanswered request bytes, for the read-ahead bound.
	budgetMu sync.Mutex
	budget   *sync.Cond
	held     int64
	closed   bool

	// ip is the peer's address as the connection quotas count it.
	ip string
	// lastActive is when a request was last read or an answer started
	// (unix nanoseconds), for connections.max.idle.ms.
	lastActive atomic.Int64
}

// touch records activity on the connection.
func (c *conn) touch() { c.lastActive.Store(time.Now().UnixNano()) }

// idleSince is how long the connection has been idle at now: zero while a
// request is read or answered (held bytes), else the time since its last
// activity.
func (c *conn) idleSince(now time.Time) time.Duration {
	c.budgetMu.Lock()
	busy := c.held > 0
	c.budgetMu.Unlock()
	if busy {
		return 0
	}
	return now.Sub(time.Unix(0, c.lastActive.Load()))
}

// stopping reports whether the connection or the server is closing (a
// reader waiting for queued.max.request.bytes gives up).
func (c *conn) stopping() bool {
	c.budgetMu.Lock()
	closed := c.closed
	c.budgetMu.Unlock()
	return closed || c.s.closing.Load()
}

// acquire waits until the connection holds fewer than readAheadBytes of
// unanswered requests; false when the connection is closing.
func (c *conn) acquire() bool {
	c.budgetMu.Lock()
	defer c.budgetMu.Unlock()
	for c.held >= readAheadBytes && !c.closed {
		c.budget.Wait()
	}
	return !c.closed
}

// hold and release account one request's bytes.
func (c *conn) hold(n int) {
	c.budgetMu.Lock()
	c.held += int64(n)
	c.budgetMu.Unlock()
}

func (c *conn) release(n int) {
	c.budgetMu.Lock()
	c.held -= int64(n)
	c.budgetMu.Unlock()
	c.budget.Broadcast()
}

// closeBudget wakes a reader waiting for budget (the connection ends).
func (c *conn) closeBudget() {
	c.budgetMu.Lock()
	c.closed = true
	c.budgetMu.Unlock()
	c.budget.Broadcast()
	c.s.pool.wake()
}

func newConn(s *Server, nc net.Conn, l *served) *conn {
	raw := nc
	if tc, ok := nc.(*tls.Conn); ok {
		raw = tc.NetConn()
	}
	if tc, ok := raw.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	c := &conn{s: s, l: l, nc: nc, remote: nc.RemoteAddr().String(), w: bufio.NewWriterSize(nc, 64<<10),
		rawNext: make(chan bool, 1), quit: make(chan struct{}), ip: remoteIP(nc.RemoteAddr())}
	c.budget = sync.NewCond(&c.budgetMu)
	c.setPrincipal(authz.Anonymous)
	c.touch()
	return c
}

// stopReading makes the reader stop at its next read (shutdown).
func (c *conn) stopReading() {
	c.stopOnce.Do(func() { _ = c.nc.SetReadDeadline(time.Now()) })
}

// pending is a handled request whose answer the writer still has to send.
type pending struct {
	req   request
	rep   reply
	start time.Time
}

// serve runs the connection until the client goes away, a request is
// malformed, or the server shuts down. Three goroutines: the reader decodes
// frames ahead, this one handles requests one at a time in order, the
// writer waits for each answer's durability (acks=all) and writes answers
// in order.
func (c *conn) serve() {
	c.s.metrics.connections.Inc()
	defer c.s.metrics.connections.Dec()
	reqs := make(chan request, pipelineDepth)
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		defer close(reqs)
		c.readLoop(reqs)
	}()
	out := make(chan pending, pipelineDepth)
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		c.writeLoop(out)
	}()
	defer func() {
		close(c.quit)
		close(out)
		<-writerDone
		c.nc.Close()
		c.closeBudget()
		for req := range reqs { // unblock the reader
			c.s.pool.release(req.pooled)
		}
		<-readerDone
	}()
	for req := range reqs {
		c.waitThrottle(readerDone)
		start := time.Now()
		c.busyOff = 0
		rep, err := c.dispatch(req)
		// queued.max.request.bytes counts requests until they are handled,
		// as Kafka frees a request's pooled buffer after handling it.
		c.s.pool.release(req.pooled)
		if err != nil {
			c.s.logger.Info("closing connection", "remote", c.remote, "api_key", req.key, "version", req.version, "err", err)
			return
		}
		c.applyQuotas(req, &rep, time.Since(start)-c.busyOff)
		select {
		case out <- pending{req, rep, start}:
		case <-writerDone:
			return
		}
		if rep.closeAfter { // the deferred close runs after the writer sent it
			return
		}
	}
}

// writeLoop writes answers in request order; on a write error it closes
// the connection (which stops the reader) and drains.
func (c *conn) writeLoop(out <-chan pending) {
	broken := false
	for p := range out {
		if p.rep.wait != nil {
			p.rep.wait()
		}
		c.release(p.req.size)
		if broken {
			if p.rep.fetch != nil {
				p.rep.fetch.release()
			}
			c.recycleProduce(p.req)
			continue
		}
		// Activity is recorded as the answer starts out, not after the
		// write returns: the client may act on the answer (and open or use
		// other connections) before this goroutine runs again, and a late
		// touch would make this connection look more recently active than
		// ones used after it (max.connections' least-recently-active
		// choice; TestListenerMaxConnectionsProtectedListener).
		c.touch()
		err := c.write(p.req, p.rep)
		c.recycleProduce(p.req)
		if err != nil {
			if !errors.Is(err, net.ErrClosed) && !errors.Is(err, io.EOF) {
				c.s.logger.Info("closing connection: write failed", "remote", c.remote, "api_key", p.req.key, "err", err)
			}
			broken = true
			c.nc.Close()
			continue
		}
		c.s.metrics.observe(p.req.key, time.Since(p.start))
	}
}

// recycleProduce recycles a produce request's frame once its answer is
// written (or dropped): the records, which alias the frame, have been
// written to the log by then and nothing keeps them (TestRecycledFrames
// checks). Other requests are left alone: some keep byte fields that alias
// their frame (a group's member metadata and assignments, for example).
func (c *conn) recycleProduce(req request) {
	if req.key == 0 && req.msg != nil {
		c.s.frames.recycleFrame(req.body)
	}
}

// handshake completes the TLS handshake of a connection to an SSL
// listener (nothing to do on PLAINTEXT), so that a failure (a plaintext
// client, an untrusted or missing client certificate, no common version
// or cipher suite) is logged as such; false closes the connection. It
// ends early when the server shuts down.
func (c *conn) handshake() bool {
	tc, ok := c.nc.(*tls.Conn)
	if !ok {
		return true
	}
	if err := tc.HandshakeContext(c.s.ctx); err != nil {
		if !c.s.closing.Load() {
			c.s.logger.Warn("closing connection: TLS handshake failed", "remote", c.remote, "err", err)
		}
		return false
	}
	return c.tlsPrincipal(tc)
}

// readLoop decodes requests until an error; malformed input is logged.
func (c *conn) readLoop(out chan<- request) {
	if !c.handshake() {
		return
	}
	br := bufio.NewReaderSize(c.nc, 64<<10)
	for {
		if !c.acquire() {
			return
		}
		if !c.preAuthSizeOK(br) {
			return
		}
		pooled, ok := c.takePool(br)
		if !ok {
			return
		}
		body, err := c.s.frames.readFrame(br, c.s.cfg.MaxRequestBytes)
		if err != nil {
			c.s.pool.release(pooled)
			if errors.Is(err, errFrame) {
				c.s.logger.Warn("closing connection: bad request frame", "remote", c.remote, "err", err)
			}
			return
		}
		c.touch()
		c.s.metrics.bytesReceived.Add(float64(len(body) + 4))
		req, err := decodeRequest(body, c.supported)
		if err != nil {
			c.s.pool.release(pooled)
			c.s.logger.Warn("closing connection: undecodable request", "remote", c.remote, "err", err)
			return
		}
		req.pooled = pooled
		req.size = len(body)
		req.body = body
		c.hold(req.size)
		out <- req
		if req.key == 17 && req.version == 0 && !c.readRawTokens(br, out) {
			return
		}
	}
}

// takePool waits until queued.max.request.bytes admits the next frame,
// whose size it peeks, and returns what it took (0 for a size readFrame
// refuses anyway). False when the connection or the server is closing.
func (c *conn) takePool(br *bufio.Reader) (int64, bool) {
	if c.s.pool.size <= 0 {
		return 0, true
	}
	hdr, err := br.Peek(4)
	if err != nil {
		return 0, true // readFrame sees the same error
	}
	n := int64(int32(binary.BigEndian.Uint32(hdr)))
	if n < minFrame || n > int64(c.s.cfg.MaxRequestBytes) {
		return 0, true
	}
	if !c.s.pool.acquire(n, c.stopping) {
		return 0, false
	}
	return n, true
}

// dispatch runs the handler for one request.
func (c *conn) dispatch(req request) (reply, error) {
	if req.raw { // an unframed SASL token (after SaslHandshake v0)
		return c.rawToken(req)
	}
	if req.msg == nil { // ApiVersions at an unsupported version
		return reply{msg: c.s.apiVersionsUnsupported()}, nil
	}
	c.clientID = req.clientID
	if err := c.checkAuthenticated(req); err != nil {
		return reply{}, err
	}
	return c.callHandler(c.s.handlers[req.key], req)
}

// listener is the listener c came in on (the default listener for a nil
// c: in-process callers).
func (c *conn) listener() *served {
	if c == nil {
		return &served{}
	}
	return c.l
}

// clientHost is the client's address as Kafka shows it in DescribeGroups
// ("/" and the IP).
func (c *conn) clientHost() string {
	host, _, err := net.SplitHostPort(c.remote)
	if err != nil {
		host = c.remote
	}
	return "/" + host
}

// write sends one answer.
func (c *conn) write(req request, rep reply) error {
	switch {
	case rep.none:
		return nil
	case rep.fetch != nil:
		return c.writeFetch(req.corr, rep.fetch)
	case req.raw: // an unframed SASL token: size and bytes only
		c.buf = binary.BigEndian.AppendUint32(c.buf[:0], uint32(len(rep.token)))
		c.buf = append(c.buf, rep.token...)
		_, err := c.w.Write(c.buf)
		if err == nil {
			err = c.w.Flush()
		}
		return err
	}
	c.buf = appendResponse(c.buf[:0], req.corr, rep.msg)
	_, err := c.w.Write(c.buf)
	if err == nil {
		err = c.w.Flush()
	}
	c.s.metrics.bytesSent.Add(float64(len(c.buf)))
	if cap(c.buf) > 1<<20 {
		c.buf = nil
	}
	return err
}

// callHandler runs a handler, turning a panic into a closed connection.
func (c *conn) callHandler(h handler, req request) (rep reply, err error) {
	defer func() {
		if p := recover(); p != nil {
			c.s.logger.Error("handler panic", "api_key", req.key, "version", req.version, "panic", p)
			err = fmt.Errorf("handler for api key %d panicked: %v", req.key, p)
		}
	}()
	return h.fn(c.s.ctx, c, req.msg)
}
