package controller

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/strata-io/strata/internal/etcdnode"
	"github.com/strata-io/strata/internal/meta"
)

// TestDriverStopsWithoutTheStore: a driver still campaigning (another
// controller is active) stops when its context ends even though the store
// no longer answers (the other controllers stopped first, as the last
// controller of a cluster stopped node by node). etcd's Campaign withdraws
// the candidacy with the client's own context, which would block until the
// client closes; before the fix the node's shutdown waited for it forever
// (and exited at --shutdown-timeout without its clean-shutdown marker).
func TestDriverStopsWithoutTheStore(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	v := etcdnode.Voter{ID: 1, Host: "127.0.0.1", Port: ln.Addr().(*net.TCPAddr).Port}
	n, err := etcdnode.Start(context.Background(), etcdnode.Config{NodeID: 1, Dir: t.TempDir(), Listener: ln,
		Voters: []etcdnode.Voter{v}, ClusterToken: "stop-test", Timing: etcdnode.Timing{TickMs: 10, ElectionMs: 100}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{n.ClientEndpoint()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	st := meta.NewStore(cli, meta.DefaultKeys, etcdnode.DefaultMaxTxnOps)
	cache, err := meta.StartCache(context.Background(), st, quiet)
	if err != nil {
		t.Fatal(err)
	}
	policy := func(*meta.Topic) Policy { return Policy{MinISR: 1} }
	run := func(id int32, active chan struct{}) (context.CancelFunc, chan struct{}) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		d := &Driver{NodeID: id, Store: st, Cache: cache, SessionTTL: 2 * time.Second, Logger: quiet, Policy: policy,
			OnActive: func(on bool) {
				if on && active != nil {
					close(active)
					active = nil
				}
			}}
		go func() { defer close(done); d.Run(ctx) }() // owner: this test; ends when ctx ends
		return cancel, done
	}
	aActive := make(chan struct{})
	stopA, doneA := run(1, aActive)
	select {
	case <-aActive:
	case <-time.After(60 * time.Second):
		t.Fatal("driver 1 never became active")
	}
	stopB, doneB := run(2, nil)
	// Driver 2 is a candidate behind driver 1.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		resp, err := cli.Get(ctx, st.Keys().Controller(), clientv3.WithPrefix())
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) >= 2 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	cache.Close()
	if err := n.Close(); err != nil {
		t.Logf("store close: %v", err)
	}
	stopB()
	stopA()
	for i, done := range []chan struct{}{doneB, doneA} {
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			t.Fatalf("driver %d did not stop within 60 s of its context's end without the store", 2-i)
		}
	}
	cli.Close()
}
