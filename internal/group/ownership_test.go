package group

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// partitionedPair is two coordinators of a cluster ("brokers" 1 and 2) over
// one __consumer_offsets store, as the leader and a follower of replicated
// partitions see the same log.
func partitionedPair(t *testing.T) (a, b *Coordinator, store *memStore) {
	t.Helper()
	store = newMemStore()
	mk := func(node int32) *Coordinator {
		cfg := testConfig(newFakeClock())
		cfg.NodeID, cfg.Partitioned, cfg.Transactions = node, true, true
		c, err := NewCoordinator(cfg, store, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	return mk(1), mk(2), store
}

func handle(t *testing.T, c *Coordinator, req kmsg.Request) kmsg.Response {
	t.Helper()
	resp, err := c.Handle(WithClientInfo(context.Background(), "client", "/127.0.0.1"), req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func fetchCode(t *testing.T, c *Coordinator, group string) (int16, map[int32]int64) {
	t.Helper()
	r := kmsg.NewPtrOffsetFetchRequest()
	r.Version = 8
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = group
	r.Groups = append(r.Groups, rg)
	resp := handle(t, c, r).(*kmsg.OffsetFetchResponse)
	out := map[int32]int64{}
	for _, t := range resp.Groups[0].Topics {
		for _, p := range t.Partitions {
			out[p.Partition] = p.Offset
		}
	}
	return resp.Groups[0].ErrorCode, out
}

// A group's coordinator moves with the leadership of its partition: the
// old coordinator answers NOT_COORDINATOR (parked joins included), the new
// one serves the committed offsets and the members it had, and commits
// made before the move stay (Kafka's onResignation/onElection).
func TestCoordinatorFollowsPartitionLeadership(t *testing.T) {
	a, b, _ := partitionedPair(t)
	const g = "moving-group"
	p := PartitionFor(g, a.cfg.NumPartitions)

	if code, _ := fetchCode(t, a, g); code != kerr.NotCoordinator.Code {
		t.Fatalf("fetch before any partition is owned: code %d, want NOT_COORDINATOR", code)
	}
	if err := a.LoadPartition(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	if !a.Owns(p) || b.Owns(p) {
		t.Fatalf("owns: a=%v b=%v", a.Owns(p), b.Owns(p))
	}
	jr := handle(t, a, joinReq(g, "", nil, "t")).(*kmsg.JoinGroupResponse)
	if jr.ErrorCode != kerr.MemberIDRequired.Code {
		t.Fatalf("first join: %d", jr.ErrorCode)
	}
	member := jr.MemberID
	jr = handle(t, a, joinReq(g, member, nil, "t")).(*kmsg.JoinGroupResponse)
	if jr.ErrorCode != 0 {
		t.Fatalf("join: %d", jr.ErrorCode)
	}
	sr := handle(t, a, syncReq(g, member, jr.Generation, map[string]string{member: "x"})).(*kmsg.SyncGroupResponse)
	if sr.ErrorCode != 0 {
		t.Fatalf("sync: %d", sr.ErrorCode)
	}
	cr := handle(t, a, commitReq(g, member, jr.Generation, "t", map[int32]int64{0: 42, 1: 7})).(*kmsg.OffsetCommitResponse)
	if c := cr.Topics[0].Partitions[0].ErrorCode; c != 0 {
		t.Fatalf("commit: %d", c)
	}
	// Another group on another partition stays with a.
	other := ""
	for i := 0; other == ""; i++ {
		if id := "other-" + string(rune('a'+i)); PartitionFor(id, a.cfg.NumPartitions) != p {
			other = id
		}
	}
	if err := a.LoadPartition(context.Background(), PartitionFor(other, a.cfg.NumPartitions)); err != nil {
		t.Fatal(err)
	}

	// A second member's join parks (rebalance): the move answers it.
	j2 := handle(t, a, joinReq(g, "", nil, "t")).(*kmsg.JoinGroupResponse)
	if j2.ErrorCode != kerr.MemberIDRequired.Code {
		t.Fatalf("second member's first join: %d", j2.ErrorCode)
	}
	parked := make(chan *kmsg.JoinGroupResponse, 1)
	go func() {
		parked <- handle(t, a, joinReq(g, j2.MemberID, nil, "t")).(*kmsg.JoinGroupResponse)
	}()
	for parkedJoins(a, g) == 0 {
		runtime.Gosched()
	}

	a.UnloadPartition(p)
	select {
	case r := <-parked:
		if r.ErrorCode != kerr.NotCoordinator.Code {
			t.Fatalf("join parked at the move: %d, want NOT_COORDINATOR", r.ErrorCode)
		}
	case <-recvTimeout():
		t.Fatal("join parked on the old coordinator was not answered")
	}
	if code, _ := fetchCode(t, a, g); code != kerr.NotCoordinator.Code {
		t.Fatalf("old coordinator fetch: %d, want NOT_COORDINATOR", code)
	}
	if hb := handle(t, a, hbReq(g, member, jr.Generation)).(*kmsg.HeartbeatResponse); hb.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("old coordinator heartbeat: %d", hb.ErrorCode)
	}
	if jr2 := handle(t, a, joinReq(g, "", nil, "t")).(*kmsg.JoinGroupResponse); jr2.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("old coordinator join of a new member: %d", jr2.ErrorCode)
	}
	if code, _ := fetchCode(t, a, other); code != 0 {
		t.Fatalf("group of a partition still led: %d", code)
	}

	if err := b.LoadPartition(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	code, offs := fetchCode(t, b, g)
	if code != 0 || offs[0] != 42 || offs[1] != 7 {
		t.Fatalf("new coordinator fetch: code %d offsets %v, want 42 and 7", code, offs)
	}
	// The member it had is back and heartbeats on at its generation.
	if hb := handle(t, b, hbReq(g, member, jr.Generation)).(*kmsg.HeartbeatResponse); hb.ErrorCode != 0 {
		t.Fatalf("heartbeat on the new coordinator: %d", hb.ErrorCode)
	}
	cr = handle(t, b, commitReq(g, member, jr.Generation, "t", map[int32]int64{0: 50})).(*kmsg.OffsetCommitResponse)
	if c := cr.Topics[0].Partitions[0].ErrorCode; c != 0 {
		t.Fatalf("commit on the new coordinator: %d", c)
	}
	// And back again: a reloads what b wrote.
	b.UnloadPartition(p)
	if err := a.LoadPartition(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	if _, offs := fetchCode(t, a, g); offs[0] != 50 || offs[1] != 7 {
		t.Fatalf("after moving back: %v", offs)
	}
	lg := handle(t, b, kmsg.NewPtrListGroupsRequest()).(*kmsg.ListGroupsResponse)
	if lg.ErrorCode != 0 || len(lg.Groups) != 0 {
		t.Fatalf("list groups on a coordinator of nothing: %+v", lg)
	}
}

// blockingStore holds Replay of one partition until released.
type blockingStore struct {
	*memStore
	part    int32
	started chan struct{}
	release chan struct{}
	once    sync.Once
}

func (s *blockingStore) Replay(p int32, fn func([]byte) error) error {
	if p == s.part {
		s.once.Do(func() { close(s.started) })
		<-s.release
	}
	return s.memStore.Replay(p, fn)
}

// While a partition loads, its groups answer COORDINATOR_LOAD_IN_PROGRESS
// (and ListGroups too), a transaction marker reported meanwhile is applied
// once the load ends, and groups of partitions not owned answer
// NOT_COORDINATOR.
func TestCoordinatorLoadInProgress(t *testing.T) {
	const g = "loading-group"
	cfg := testConfig(newFakeClock())
	cfg.Partitioned, cfg.Transactions = true, true
	p := PartitionFor(g, cfg.NumPartitions)
	bs := &blockingStore{memStore: newMemStore(), part: p, started: make(chan struct{}), release: make(chan struct{})}
	// Pending transactional offsets of producer 9 are in the log.
	{
		first, err := NewCoordinator(cfg, bs.memStore, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := first.LoadPartition(context.Background(), p); err != nil {
			t.Fatal(err)
		}
		r := txnReq(g, 9, -1, "", "t", map[int32]int64{0: 11})
		if resp := handle(t, first, r).(*kmsg.TxnOffsetCommitResponse); resp.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("txn commit: %d", resp.Topics[0].Partitions[0].ErrorCode)
		}
		first.UnloadPartition(p)
		first.Close()
	}
	c, err := NewCoordinator(cfg, bs, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	done := make(chan error, 1)
	go func() { done <- c.LoadPartition(context.Background(), p) }()
	<-bs.started
	if code, _ := fetchCode(t, c, g); code != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("fetch while loading: %d, want COORDINATOR_LOAD_IN_PROGRESS", code)
	}
	if jr := handle(t, c, joinReq(g, "", nil, "t")).(*kmsg.JoinGroupResponse); jr.ErrorCode != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("join while loading: %d", jr.ErrorCode)
	}
	if lg := handle(t, c, kmsg.NewPtrListGroupsRequest()).(*kmsg.ListGroupsResponse); lg.ErrorCode != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("list groups while loading: %d", lg.ErrorCode)
	}
	// The transaction coordinator's COMMIT marker lands meanwhile.
	if err := bs.marker(p, 9, 0, true); err != nil {
		t.Fatal(err)
	}
	c.CompleteTxn(p, 9, true)
	close(bs.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	r := kmsg.NewPtrOffsetFetchRequest()
	r.Version = 8
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group, rg.Topics = g, []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{0}}}
	r.Groups, r.RequireStable = append(r.Groups, rg), true
	resp := handle(t, c, r).(*kmsg.OffsetFetchResponse)
	if gp := resp.Groups[0].Topics[0].Partitions[0]; gp.ErrorCode != 0 || gp.Offset != 11 {
		t.Fatalf("after load: %+v, want the committed transactional offset 11", gp)
	}
}

// recvTimeout bounds a wait for an answer that must come (a hang fails the
// test instead of blocking it).
func recvTimeout() <-chan time.Time { return time.After(10 * time.Second) }

// parkedJoins counts the JoinGroup requests of group waiting in c.
func parkedJoins(c *Coordinator, group string) int {
	g := c.lookup(group)
	if g == nil {
		return 0
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, m := range g.members {
		if m.joinCh != nil {
			n++
		}
	}
	return n
}
