package etcdnode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// freezeProxy forwards TCP connections to a member until frozen; from then
// on it behaves as the member's process stopped with SIGSTOP: connections
// stay open, new ones are accepted (the kernel's backlog), and not a byte
// is answered or passed on.
type freezeProxy struct {
	ln     net.Listener
	target string
	frozen chan struct{}
	held   atomic.Int64 // chunks that arrived for the member while frozen
	mu     sync.Mutex
	conns  []net.Conn
	wg     sync.WaitGroup
}

func newFreezeProxy(t *testing.T, target string) *freezeProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &freezeProxy{ln: ln, target: target, frozen: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *freezeProxy) URL() string { return "http://" + p.ln.Addr().String() }

func (p *freezeProxy) freeze() { close(p.frozen) }

func (p *freezeProxy) isFrozen() bool {
	select {
	case <-p.frozen:
		return true
	default:
		return false
	}
}

func (p *freezeProxy) track(c net.Conn) {
	p.mu.Lock()
	p.conns = append(p.conns, c)
	p.mu.Unlock()
}

func (p *freezeProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.track(c)
		if p.isFrozen() {
			continue // accepted, never answered
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.track(s)
		p.wg.Add(2)
		go p.pipe(s, c)
		go p.pipe(c, s)
	}
}

// pipe copies from src to dst until frozen; a chunk read once frozen is
// held (never written).
func (p *freezeProxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if p.isFrozen() {
				p.held.Add(1)
				continue
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *freezeProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// TestClientAbandonsFrozenMember: three members; a client (ClientConfig)
// reaches the third through a proxy that then freezes as a SIGSTOPped
// process does (TCP open, nothing answered). A watch established on the
// frozen member, and reads and writes sent after the freeze (round robin:
// one in three to the frozen member), all complete through the other two:
// the keepalive ping (ClientKeepAliveTime, ClientKeepAliveTimeout) closes
// the dead connection, reads are retried on another member by the client,
// a write caught there fails with Unavailable and its retry goes to a
// live member, and the watch resumes on a live member without losing an
// event. Without the keepalive every such call waits for its caller's
// deadline and the watch never delivers. The 2-minute deadlines are a
// safety net only (the ping settles it in about 13 s).
func TestClientAbandonsFrozenMember(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three etcd members")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	voters := startVoters(t, ctx, 3, "frozen")
	proxy := newFreezeProxy(t, voters[2].Addr())
	cli, err := clientv3.New(ClientConfig(nil, proxy.URL()))
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	// The watch goes to the member behind the proxy (the only endpoint
	// yet), then the client learns the other two.
	wch := cli.Watch(ctx, "w")
	if _, err := cli.Put(ctx, "w", "before"); err != nil {
		t.Fatal(err)
	}
	if ev := nextEvent(t, wch); ev != "before" {
		t.Fatalf("watch: %q, want before", ev)
	}
	cli.SetEndpoints(proxy.URL(), voters[0].URL(), voters[1].URL())
	for i := range 30 { // every member's connection in use
		if _, err := cli.Put(ctx, fmt.Sprint("warm", i), "v"); err != nil {
			t.Fatal(err)
		}
	}

	proxy.freeze()
	var wg sync.WaitGroup
	var retried atomic.Int64
	fail := make(chan error, 20)
	for i := range 9 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			if _, err := cli.Get(ctx, fmt.Sprint("warm", i)); err != nil {
				fail <- fmt.Errorf("get: %w", err)
			}
		}()
		go func() {
			defer wg.Done()
			for {
				_, err := cli.Put(ctx, fmt.Sprint("after", i), "v")
				if err == nil {
					return
				}
				// A write caught on the frozen member: its connection
				// closed (Unavailable), the retry goes elsewhere.
				if status.Code(err) != codes.Unavailable || ctx.Err() != nil {
					fail <- fmt.Errorf("put: %w", err)
					return
				}
				retried.Add(1)
			}
		}()
	}
	wg.Wait()
	close(fail)
	for err := range fail {
		t.Error(err)
	}
	// The watch resumes on a live member and sees a write made after the
	// freeze through another client.
	other := client(t, voters[0].URL())
	if _, err := other.Put(ctx, "w", "after"); err != nil {
		t.Fatal(err)
	}
	if ev := nextEvent(t, wch); ev != "after" {
		t.Fatalf("watch after the freeze: %q, want after", ev)
	}
	if proxy.held.Load() == 0 {
		t.Fatal("nothing was sent to the frozen member: the test tested nothing")
	}
	t.Logf("frozen member: %d chunks held, %d writes retried after Unavailable", proxy.held.Load(), retried.Load())
}

// nextEvent returns the value of the watch's next put.
func nextEvent(t *testing.T, wch clientv3.WatchChan) string {
	t.Helper()
	for resp := range wch {
		if err := resp.Err(); err != nil {
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.EOF) {
				t.Fatalf("watch: %v", err)
			}
			continue
		}
		for _, ev := range resp.Events {
			return string(ev.Kv.Value)
		}
	}
	t.Fatal("watch channel closed")
	return ""
}
