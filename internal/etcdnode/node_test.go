package etcdnode

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/parallel"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func listen(t *testing.T) (net.Listener, Voter) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	return ln, Voter{Host: "127.0.0.1", Port: port}
}

func client(t *testing.T, endpoints ...string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: newZapLogger(quiet(), 5)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// startVoters starts n members, node ids 1..n, each on its own listener
// (listen), at once (each Start waits for a quorum), and returns them as
// voters; t's cleanup closes them.
func startVoters(t *testing.T, ctx context.Context, n int, token string) []Voter {
	t.Helper()
	lns := make([]net.Listener, n)
	voters := make([]Voter, n)
	for i := range n {
		lns[i], voters[i] = listen(t)
		voters[i].ID = int32(i + 1)
	}
	nodes := make([]*Node, n)
	t.Cleanup(func() {
		for _, nd := range nodes {
			if nd != nil {
				nd.Close()
			}
		}
	})
	if err := parallel.ForEach(n, n, func(i int) error {
		var err error
		nodes[i], err = Start(ctx, Config{NodeID: int32(i + 1), Dir: t.TempDir(), Listener: lns[i], Voters: voters, ClusterToken: token, Logger: quiet()})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return voters
}

func TestParseVoters(t *testing.T) {
	vs, err := ParseVoters("1@127.0.0.1:19193, 2@[::1]:19293,3@h:1")
	if err != nil {
		t.Fatal(err)
	}
	if got := FormatVoters(vs); got != "1@127.0.0.1:19193,2@[::1]:19293,3@h:1" {
		t.Errorf("round trip: %s", got)
	}
	for _, bad := range []string{"1@h", "x@h:1", "1@h:0", "1@:5", "1@h:1,1@g:2", "h:1"} {
		if _, err := ParseVoters(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if id, ok := NodeIDOfMember(MemberName(42)); !ok || id != 42 {
		t.Errorf("member name round trip: %d %v", id, ok)
	}
}

// TestSingleMember starts a one-voter member, writes through the
// controller listener (gRPC routed by the front) and through the local
// endpoint, restarts it on the same data, and logs the start time (which
// every in-process broker start in the test suite pays).
func TestSingleMember(t *testing.T) {
	dir := t.TempDir()
	ln, v := listen(t)
	v.ID = 1
	start := time.Now()
	n, err := Start(context.Background(), Config{NodeID: 1, Dir: dir, Listener: ln, Voters: []Voter{v}, ClusterToken: "t", Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("single-member start (new data dir): %v", time.Since(start))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	remote := client(t, v.URL())
	if _, err := remote.Put(ctx, "k", "v1"); err != nil {
		t.Fatalf("put through the controller listener: %v", err)
	}
	local := client(t, n.ClientEndpoint())
	got, err := local.Get(ctx, "k")
	if err != nil || len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "v1" {
		t.Fatalf("get: %v %v", got, err)
	}
	st := n.Status()
	if !st.IsLeader || st.Members != 1 || st.DBSize == 0 {
		t.Errorf("status %+v", st)
	}
	n.Close()

	ln2, err := net.Listen("tcp", v.Addr())
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	n2, err := Start(context.Background(), Config{NodeID: 1, Dir: dir, Listener: ln2, Voters: []Voter{v}, ClusterToken: "t", Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer n2.Close()
	t.Logf("single-member restart: %v", time.Since(start))
	n2.Close()

	// The same data under another voter address: the only member records
	// its new address (zero configuration's controller port changes at
	// every start; no other member dials it). A member of a larger store
	// is refused instead (test/e2e TestClusterExactCommandLines).
	ln3, moved := listen(t)
	moved.ID = 1
	n3, err := Start(context.Background(), Config{NodeID: 1, Dir: dir, Listener: ln3, Voters: []Voter{moved}, ClusterToken: "t", Logger: quiet()})
	if err != nil {
		t.Fatalf("moved single voter: %v", err)
	}
	if _, err := client(t, moved.URL()).Put(ctx, "k2", "v2"); err != nil {
		t.Fatalf("put through the moved controller listener: %v", err)
	}
	ms, err := client(t, n3.ClientEndpoint()).MemberList(ctx)
	if err != nil || len(ms.Members) != 1 || len(ms.Members[0].PeerURLs) != 1 || ms.Members[0].PeerURLs[0] != moved.URL() {
		t.Fatalf("membership after the move: %v %v", ms, err)
	}
	n3.Close()
	ln4, err := net.Listen("tcp", v.Addr())
	if err != nil {
		t.Fatal(err)
	}
	n2, err = Start(context.Background(), Config{NodeID: 1, Dir: dir, Listener: ln4, Voters: []Voter{v}, ClusterToken: "t", Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer n2.Close()
	got, err = client(t, n2.ClientEndpoint()).Get(ctx, "k")
	if err != nil || len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "v1" {
		t.Fatalf("after restart: %v %v", got, err)
	}
}

// TestThreeMembersAndLearner starts three voters that reach each other
// only through their controller listeners, checks a write is visible on
// all, then adds a fourth as a learner, promotes it and removes it.
func TestThreeMembersAndLearner(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four etcd members")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	voters := startVoters(t, ctx, 3, "t3")
	var eps []string
	for _, v := range voters {
		eps = append(eps, v.URL())
	}
	cli := client(t, eps...)
	if _, err := cli.Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	for i, v := range voters {
		r, err := client(t, v.URL()).Get(ctx, "k")
		if err != nil || len(r.Kvs) != 1 {
			t.Fatalf("member %d: %v %v", i+1, r, err)
		}
	}
	ms, err := Members(ctx, cli)
	if err != nil || len(ms) != 3 || ms[0].NodeID != 1 || ms[2].NodeID != 3 {
		t.Fatalf("members %+v %v", ms, err)
	}

	ln4, v4 := listen(t)
	v4.ID = 4
	join, err := AddLearner(ctx, cli, v4)
	if err != nil {
		t.Fatal(err)
	}
	n4, err := Start(ctx, Config{NodeID: 4, Dir: t.TempDir(), Listener: ln4, Voters: []Voter{v4}, Join: join, ClusterToken: "t3", Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer n4.Close()
	if err := Promote(ctx, cli, 4); err != nil {
		t.Fatal(err)
	}
	ms, _ = Members(ctx, cli)
	if len(ms) != 4 || ms[3].IsLearner {
		t.Fatalf("after promote: %+v", ms)
	}
	// The promotion is applied by member 4 a moment after the leader
	// commits it; until then it refuses reads as a learner.
	c4 := client(t, v4.URL())
	for {
		r, err := c4.Get(ctx, "k")
		if err == nil && len(r.Kvs) == 1 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("member 4 read: %v %v", r, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := Remove(ctx, cli, 4); err != nil {
		t.Fatal(err)
	}
	ms, _ = Members(ctx, cli)
	if len(ms) != 3 {
		t.Fatalf("after remove: %+v", ms)
	}
}

// BenchmarkStart measures a new single-member start (the cost every
// in-process broker start pays).
func BenchmarkStart(b *testing.B) {
	for i := 0; i < b.N; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		n, err := Start(context.Background(), Config{NodeID: 1, Dir: b.TempDir(), Listener: ln,
			Voters: []Voter{{ID: 1, Host: "127.0.0.1", Port: port}}, ClusterToken: "b" + strconv.Itoa(i), Logger: quiet(), Timing: benchTiming})
		if err != nil {
			b.Fatal(fmt.Errorf("start: %w", err))
		}
		n.Close()
	}
}

var benchTiming = Timing{}
