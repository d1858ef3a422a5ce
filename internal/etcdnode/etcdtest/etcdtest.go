// Package etcdtest starts a one-member metadata store (an etcdnode with
// test timing) on a random port for tests, stopped when the test ends.
package etcdtest

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/strata-io/strata/internal/etcdnode"
)

// Start starts a one-member etcd in t.TempDir() with fast elections (10 ms
// ticks) and returns a client of it; both are closed when the test ends.
func Start(t testing.TB) *clientv3.Client {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	v := etcdnode.Voter{ID: 1, Host: "127.0.0.1", Port: ln.Addr().(*net.TCPAddr).Port}
	n, err := etcdnode.Start(context.Background(), etcdnode.Config{NodeID: 1, Dir: t.TempDir(), Listener: ln,
		Voters: []etcdnode.Voter{v}, ClusterToken: "etcdtest", Timing: etcdnode.Timing{TickMs: 10, ElectionMs: 100},
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	t.Cleanup(func() { n.Close() })
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{n.ClientEndpoint()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("etcdtest: client: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}
