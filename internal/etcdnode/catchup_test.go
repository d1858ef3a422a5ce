package etcdnode

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestFollowerCatchesUpPastCompactedLog: with the small Raft log Strata
// keeps in memory (SnapshotCount, SnapshotCatchUpEntries: issue 18), a
// member that was down while the others wrote many times more entries
// than they keep comes back, receives the leader's snapshot (the entries
// it misses are compacted away) and serves every write, then follows new
// ones by entries again.
func TestFollowerCatchesUpPastCompactedLog(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three etcd members")
	}
	var lns []net.Listener
	var voters []Voter
	for i := 1; i <= 3; i++ {
		ln, v := listen(t)
		v.ID = int32(i)
		lns = append(lns, ln)
		voters = append(voters, v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	cfg := func(i int, ln net.Listener) Config {
		return Config{NodeID: int32(i + 1), Dir: dirs[i], Listener: ln, Voters: voters, ClusterToken: "cu", Logger: quiet()}
	}
	nodes := make([]*Node, 3)
	errs := make(chan error, 3)
	for i := range 3 {
		go func() {
			n, err := Start(ctx, cfg(i, lns[i]))
			nodes[i] = n
			errs <- err
		}()
	}
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		for _, n := range nodes {
			n.Close()
		}
	}()
	cli := client(t, voters[0].URL(), voters[1].URL())
	if _, err := cli.Put(ctx, "k", "0"); err != nil {
		t.Fatal(err)
	}
	nodes[2].Close()

	// Many times the entries a member keeps, each a few KiB.
	writes := 8 * (SnapshotCount + SnapshotCatchUpEntries)
	val := strings.Repeat("x", 4096)
	for i := 1; i <= writes; i++ {
		if _, err := cli.Put(ctx, fmt.Sprintf("k%03d", i), val); err != nil {
			t.Fatal(err)
		}
	}
	last, err := cli.Put(ctx, "k", "last")
	if err != nil {
		t.Fatal(err)
	}

	ln, err := net.Listen("tcp", voters[2].Addr())
	if err != nil {
		t.Fatal(err)
	}
	nodes[2], err = Start(ctx, cfg(2, ln))
	if err != nil {
		t.Fatal(err)
	}
	// A serializable read answers from member 3's own applied state.
	c3 := client(t, nodes[2].ClientEndpoint())
	waitRev := func(rev int64, key, want string) {
		t.Helper()
		for {
			r, err := c3.Get(ctx, key, clientv3.WithSerializable())
			if err == nil && r.Header.Revision >= rev {
				if len(r.Kvs) != 1 || string(r.Kvs[0].Value) != want {
					t.Fatalf("member 3 at revision %d: %s = %v, want %q", r.Header.Revision, key, r.Kvs, want)
				}
				return
			}
			if ctx.Err() != nil {
				t.Fatalf("member 3 did not reach revision %d: %v %v", rev, r, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitRev(last.Header.Revision, "k", "last")
	r, err := c3.Get(ctx, "k", clientv3.WithPrefix(), clientv3.WithCountOnly(), clientv3.WithSerializable())
	if err != nil || r.Count != int64(writes+1) {
		t.Fatalf("member 3 holds %v keys (%v), want %d", r.Count, err, writes+1)
	}
	next, err := cli.Put(ctx, "k", "next")
	if err != nil {
		t.Fatal(err)
	}
	waitRev(next.Header.Revision, "k", "next")
}
