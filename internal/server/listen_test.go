package server

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/strata-io/strata/internal/config"
	"github.com/strata-io/strata/internal/metrics"
	"golang.org/x/sys/unix"
)

// TestPortInUseBeforeDataDir checks that a taken port fails New before the
// data directory is created, with a message naming the setting to change,
// for the Kafka listener and for the HTTP listener.
func TestPortInUseBeforeDataDir(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	addr := taken.Addr().String()
	for _, c := range []struct {
		ov   map[string]string
		want string
	}{
		{map[string]string{"listeners": "PLAINTEXT://" + addr, "strata.metrics.listener": ""},
			"Kafka listener: " + addr + " is already in use (by another broker?): set listeners to a free address"},
		{map[string]string{"listeners": "PLAINTEXT://127.0.0.1:0", "strata.metrics.listener": addr},
			"HTTP listener (metrics and admin API): " + addr + " is already in use (by another broker?): set strata.metrics.listener to a free address"},
	} {
		dir := filepath.Join(t.TempDir(), "data")
		c.ov["log.dirs"] = dir
		cfg, err := config.LoadBroker("", nil, c.ov)
		if err != nil {
			t.Fatal(err)
		}
		srv, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err == nil {
			srv.Shutdown(context.Background())
			t.Fatalf("%v: New succeeded on a taken port", c.ov)
		}
		if err.Error() != c.want {
			t.Errorf("got %q\nwant %q", err, c.want)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("data directory created before the ports were bound: %v", err)
		}
	}
	// The Kafka port is released when the HTTP port fails.
	cfg, err := config.LoadBroker("", nil, map[string]string{"log.dirs": t.TempDir(), "listeners": "PLAINTEXT://127.0.0.1:0", "strata.metrics.listener": addr})
	if err != nil {
		t.Fatal(err)
	}
	lns, err := newClientListeners(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{cfg: cfg, reg: metrics.NewRegistry(), lns: lns}
	if err := s.bind(); err == nil || s.lns[0].ln != nil {
		t.Errorf("bind: %v, listener kept: %v", err, s.lns[0].ln)
	}
}

// TestSocketBuffers checks socket.send.buffer.bytes and
// socket.receive.buffer.bytes on the Kafka listener and on an accepted
// connection (Linux reports twice the size asked for), and that -1 leaves
// the OS default.
func TestSocketBuffers(t *testing.T) {
	srv := newBound(t, map[string]string{"socket.send.buffer.bytes": "65536", "socket.receive.buffer.bytes": "32768"})
	snd, rcv := sockBufs(t, srv.lns[0].ln.(*net.TCPListener))
	if snd != 2*65536 || rcv != 2*32768 {
		t.Errorf("listener: SO_SNDBUF %d SO_RCVBUF %d, want %d %d", snd, rcv, 2*65536, 2*32768)
	}
	// Accepted connections inherit the listener's sizes.
	lc := net.ListenConfig{Control: socketBuffers(65536, 32768)}
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	sc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	if snd, rcv := sockBufs(t, sc.(*net.TCPConn)); snd != 2*65536 || rcv != 2*32768 {
		t.Errorf("accepted: SO_SNDBUF %d SO_RCVBUF %d", snd, rcv)
	}
	// -1: the kernel's defaults, as an unconfigured socket has.
	plain, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	wantSnd, wantRcv := sockBufs(t, plain.(*net.TCPListener))
	srv = newBound(t, map[string]string{"socket.send.buffer.bytes": "-1", "socket.receive.buffer.bytes": "-1"})
	if snd, rcv := sockBufs(t, srv.lns[0].ln.(*net.TCPListener)); snd != wantSnd || rcv != wantRcv {
		t.Errorf("-1: SO_SNDBUF %d SO_RCVBUF %d, want the defaults %d %d", snd, rcv, wantSnd, wantRcv)
	}
}

// newBound builds a server (listeners bound, logs open, not serving) on
// random ports over a temporary directory; it is shut down when the test
// ends.
func newBound(t *testing.T, settings map[string]string) *Server {
	t.Helper()
	vals := map[string]string{"log.dirs": t.TempDir(), "listeners": "PLAINTEXT://127.0.0.1:0", "strata.metrics.listener": "",
		"offsets.topic.num.partitions": "1", "transaction.state.log.num.partitions": "1"}
	for k, v := range settings {
		vals[k] = v
	}
	cfg, err := config.LoadBroker("", nil, vals)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	return srv
}

// sockBufs reads SO_SNDBUF and SO_RCVBUF of a socket.
func sockBufs(t *testing.T, c syscall.Conn) (snd, rcv int) {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var serr, rerr error
	err = rc.Control(func(fd uintptr) {
		snd, serr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF)
		rcv, rerr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF)
	})
	if err != nil || serr != nil || rerr != nil {
		t.Fatal(err, serr, rerr)
	}
	return snd, rcv
}
