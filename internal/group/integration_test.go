package group_test

// Real-client integration tests: an in-process Strata broker (servertest)
// on a random port, driven by franz-go, sarama and kafka-go consumer groups.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/group"
	"github.com/strata-io/strata/internal/servertest"
)

// testBroker is a real broker (servertest) with the group tests' helpers.
type testBroker struct {
	*servertest.Broker
	t testing.TB
}

// startBroker starts a broker with overrides over the group tests'
// defaults; its clients wait at most 100ms in a fetch.
func startBroker(t testing.TB, overrides map[string]string) *testBroker {
	t.Helper()
	settings := map[string]string{
		"group.min.session.timeout.ms": "1000",
		"offsets.topic.num.partitions": "5",
	}
	maps.Copy(settings, overrides)
	return &testBroker{t: t, Broker: servertest.Start(t, servertest.Options{
		Settings:   settings,
		ClientOpts: []kgo.Opt{kgo.FetchMaxWait(100 * time.Millisecond)},
	})}
}

func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// createTopic creates topic with n partitions and produces count records
// spread evenly, values "<topic>-<i>".
func (b *testBroker) createTopic(topic string, n int32, count int) {
	b.t.Helper()
	ctx := ctxFor(b.t, 30*time.Second)
	if _, err := b.Admin().CreateTopic(ctx, n, 1, nil, topic); err != nil {
		b.t.Fatalf("create %s: %v", topic, err)
	}
	b.produce(topic, 0, count)
}

// produce writes records from..to-1 round robin over the partitions.
func (b *testBroker) produce(topic string, from, to int) {
	b.t.Helper()
	cl := b.Client(kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.DefaultProduceTopic(topic))
	ctx := ctxFor(b.t, 30*time.Second)
	var recs []*kgo.Record
	for i := from; i < to; i++ {
		recs = append(recs, kgo.StringRecord(topic+"-"+strconv.Itoa(i)))
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		b.t.Fatalf("produce: %v", err)
	}
	cl.Close()
}

// killSwitch is a dialer whose connections can all be cut at once, so a
// client "dies" without sending LeaveGroup.
type killSwitch struct {
	mu    sync.Mutex
	dead  bool
	conns []net.Conn
}

func (k *killSwitch) dial(ctx context.Context, network, host string) (net.Conn, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.dead {
		return nil, errors.New("killed")
	}
	c, err := (&net.Dialer{}).DialContext(ctx, network, host)
	if err == nil {
		k.conns = append(k.conns, c)
	}
	return c, err
}

func (k *killSwitch) kill() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.dead = true
	for _, c := range k.conns {
		c.Close()
	}
}

// seen collects consumed record values across members.
type seen struct {
	mu     sync.Mutex
	counts map[string]int
	byPart map[int32][]int64 // offsets per partition in consume order
}

func newSeen() *seen { return &seen{counts: map[string]int{}, byPart: map[int32][]int64{}} }

func (s *seen) add(value string, partition int32, offset int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counts[value]++
	s.byPart[partition] = append(s.byPart[partition], offset)
}

func (s *seen) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.counts)
}

// waitFor polls cond until it holds or d passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kgoMember is one franz-go group member polling in its own goroutine.
type kgoMember struct {
	cl     *kgo.Client
	ks     *killSwitch
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	owned  map[int32]bool
	assign int // OnPartitionsAssigned calls
	limit  int // stop polling after this many records (0 = never)
}

func (b *testBroker) kgoMember(t *testing.T, group, topic string, s *seen, opts ...kgo.Opt) *kgoMember {
	return b.kgoMemberLimit(t, group, topic, s, 0, opts...)
}

// kgoMemberLimit starts a member that polls at most limit records (10 at a
// time) when limit > 0.
func (b *testBroker) kgoMemberLimit(t *testing.T, group, topic string, s *seen, limit int, opts ...kgo.Opt) *kgoMember {
	t.Helper()
	m := &kgoMember{ks: &killSwitch{}, done: make(chan struct{}), owned: map[int32]bool{}, limit: limit}
	base := []kgo.Opt{
		kgo.Dialer(m.ks.dial),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SessionTimeout(3 * time.Second),
		kgo.HeartbeatInterval(200 * time.Millisecond),
		kgo.RebalanceTimeout(10 * time.Second),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
			m.mu.Lock()
			m.assign++
			for _, p := range a[topic] {
				m.owned[p] = true
			}
			m.mu.Unlock()
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, r map[string][]int32) {
			m.mu.Lock()
			for _, p := range r[topic] {
				delete(m.owned, p)
			}
			m.mu.Unlock()
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, r map[string][]int32) {
			m.mu.Lock()
			for _, p := range r[topic] {
				delete(m.owned, p)
			}
			m.mu.Unlock()
		}),
	}
	m.cl = b.Client(append(base, opts...)...)
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go func() {
		defer close(m.done)
		polled := 0
		for ctx.Err() == nil && (m.limit == 0 || polled < m.limit) {
			fs := m.cl.PollRecords(ctx, 10)
			fs.EachRecord(func(r *kgo.Record) {
				polled++
				if s != nil {
					s.add(string(r.Value), r.Partition, r.Offset)
				}
			})
		}
	}()
	t.Cleanup(m.close)
	return m
}

// stopPolling stops the poll goroutine (the client stays in the group).
func (m *kgoMember) stopPolling() {
	m.cancel()
	<-m.done
}

func (m *kgoMember) close() {
	m.stopPolling()
	m.cl.Close()
}

func (m *kgoMember) assignments() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.assign
}

// groupSplit describes group and returns member id -> assigned partitions
// of topic when the group is Stable with n members whose assignments are
// disjoint and cover partitions 0..parts-1; nil otherwise.
func groupSplit(t testing.TB, adm *kadm.Client, group, topic string, n int, parts int32) map[string][]int32 {
	ctx := ctxFor(t, 10*time.Second)
	ds, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return nil
	}
	d := ds[group]
	if d.Err != nil || d.State != "Stable" || len(d.Members) != n {
		return nil
	}
	out := map[string][]int32{}
	covered := map[int32]bool{}
	for _, m := range d.Members {
		c, ok := m.Assigned.AsConsumer()
		if !ok {
			return nil
		}
		for _, at := range c.Topics {
			if at.Topic != topic {
				continue
			}
			for _, p := range at.Partitions {
				if covered[p] {
					return nil
				}
				covered[p] = true
				out[m.MemberID] = append(out[m.MemberID], p)
			}
		}
		if len(out[m.MemberID]) == 0 {
			return nil
		}
	}
	if int32(len(covered)) != parts {
		return nil
	}
	return out
}

func waitSplit(t testing.TB, adm *kadm.Client, group, topic string, n int, parts int32) map[string][]int32 {
	t.Helper()
	var split map[string][]int32
	waitFor(t, 60*time.Second, fmt.Sprintf("%s split over %d members", group, n), func() bool {
		split = groupSplit(t, adm, group, topic, n, parts)
		return split != nil
	})
	return split
}

// checkExactlyOnce asserts every record 0..n-1 of topic was seen once.
func checkExactlyOnce(t *testing.T, topic string, n int, sets ...*seen) {
	t.Helper()
	all := map[string]int{}
	for _, s := range sets {
		s.mu.Lock()
		for v, c := range s.counts {
			all[v] += c
		}
		s.mu.Unlock()
	}
	for i := 0; i < n; i++ {
		v := topic + "-" + strconv.Itoa(i)
		if all[v] != 1 {
			t.Fatalf("record %s consumed %d times", v, all[v])
		}
	}
	if len(all) != n {
		t.Fatalf("consumed %d distinct records, want %d", len(all), n)
	}
}

func testKgoSplitAndKill(t *testing.T, balancer kgo.GroupBalancer) {
	b := startBroker(t, nil)
	const parts, n = 6, 600
	b.createTopic("t", parts, n)
	s := newSeen()
	opts := []kgo.Opt{kgo.Balancers(balancer), kgo.AutoCommitInterval(200 * time.Millisecond)}
	m1 := b.kgoMember(t, "g", "t", s, opts...)
	m2 := b.kgoMember(t, "g", "t", s, opts...)
	m3 := b.kgoMember(t, "g", "t", s, opts...)
	adm := b.Admin()
	waitSplit(t, adm, "g", "t", 3, parts)
	waitFor(t, 30*time.Second, "all records consumed", func() bool { return s.len() == n })

	// Kill member 3: its connections drop, no LeaveGroup. After the session
	// timeout its partitions move to the two survivors.
	m3.ks.kill()
	m3.stopPolling()
	split := waitSplit(t, adm, "g", "t", 2, parts)
	if len(split) != 2 {
		t.Fatalf("split after kill: %v", split)
	}
	// Records produced now reach the survivors.
	b.produce("t", n, n+120)
	waitFor(t, 30*time.Second, "records after the kill consumed", func() bool { return s.len() == n+120 })
	_, _ = m1, m2
}

func TestKgoEagerGroup(t *testing.T) { testKgoSplitAndKill(t, kgo.RangeBalancer()) }

func TestKgoCooperativeStickyGroup(t *testing.T) {
	testKgoSplitAndKill(t, kgo.CooperativeStickyBalancer())
}

// TestKgoCommitRestartResume commits, stops everything, restarts the broker
// and checks the group resumes exactly after the committed offsets.
func TestKgoCommitRestartResume(t *testing.T) {
	b := startBroker(t, nil)
	const parts, n = 4, 800
	b.createTopic("t", parts, n)
	s1 := newSeen()
	m := b.kgoMemberLimit(t, "g", "t", s1, n/2, kgo.DisableAutoCommit())
	waitFor(t, 30*time.Second, "half the records", func() bool { return s1.len() >= n/2 })
	m.stopPolling()
	ctx := ctxFor(t, 30*time.Second)
	if err := m.cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	m.cl.Close()
	if s1.len() != n/2 {
		t.Fatalf("phase 1 consumed %d records, want %d", s1.len(), n/2)
	}

	b.Restart()
	s2 := newSeen()
	b.kgoMember(t, "g", "t", s2, kgo.DisableAutoCommit())
	waitFor(t, 30*time.Second, "the rest of the records", func() bool { return s1.len()+s2.len() >= n })
	time.Sleep(300 * time.Millisecond) // let any duplicate show up
	checkExactlyOnce(t, "t", n, s1, s2)
	// Each partition resumes right after the last offset consumed before.
	for p, offs := range s2.byPart {
		before := s1.byPart[p]
		want := int64(0)
		if len(before) > 0 {
			want = before[len(before)-1] + 1
		}
		if offs[0] != want {
			t.Fatalf("partition %d resumed at %d, want %d", p, offs[0], want)
		}
	}
}

// TestKgoStaticMemberRestart restarts a static member: it gets its old
// partitions back and the other member sees no rebalance.
func TestKgoStaticMemberRestart(t *testing.T) {
	b := startBroker(t, nil)
	const parts = 4
	b.createTopic("t", parts, 40)
	opts := func(id string) []kgo.Opt {
		return []kgo.Opt{kgo.InstanceID(id), kgo.Balancers(kgo.RangeBalancer()), kgo.SessionTimeout(20 * time.Second)}
	}
	m1 := b.kgoMember(t, "g", "t", nil, opts("i1")...)
	m2 := b.kgoMember(t, "g", "t", nil, opts("i2")...)
	adm := b.Admin()
	before := waitSplit(t, adm, "g", "t", 2, parts)
	waitFor(t, 30*time.Second, "both members assigned", func() bool {
		m1.mu.Lock()
		defer m1.mu.Unlock()
		m2.mu.Lock()
		defer m2.mu.Unlock()
		return len(m1.owned) > 0 && len(m2.owned) > 0
	})
	m1.mu.Lock()
	owned1 := sortedKeys(m1.owned)
	m1.mu.Unlock()
	assigns2 := m2.assignments()

	m1.close() // static members do not leave on close
	m1b := b.kgoMember(t, "g", "t", nil, opts("i1")...)
	waitFor(t, 30*time.Second, "restarted static member assigned", func() bool { return m1b.assignments() > 0 })
	m1b.mu.Lock()
	owned1b := sortedKeys(m1b.owned)
	m1b.mu.Unlock()
	if fmt.Sprint(owned1) != fmt.Sprint(owned1b) {
		t.Fatalf("restarted static member owns %v, had %v", owned1b, owned1)
	}
	after := waitSplit(t, adm, "g", "t", 2, parts)
	if len(after) != len(before) {
		t.Fatalf("split changed: %v -> %v", before, after)
	}
	time.Sleep(time.Second) // a rebalance would reach member 2 by heartbeat (200ms)
	if got := m2.assignments(); got != assigns2 {
		t.Fatalf("member 2 was reassigned (%d -> %d assignments): a static restart must not rebalance", assigns2, got)
	}
}

func sortedKeys(m map[int32]bool) []int32 {
	out := make([]int32, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// TestLag checks DescribeGroups + OffsetFetch + ListOffsets (kadm.Lag)
// give members, partitions, committed offsets and lag.
func TestLag(t *testing.T) {
	b := startBroker(t, nil)
	b.createTopic("t", 2, 100)
	s := newSeen()
	m := b.kgoMember(t, "g", "t", s, kgo.DisableAutoCommit())
	waitFor(t, 30*time.Second, "records consumed", func() bool { return s.len() == 100 })
	ctx := ctxFor(t, 30*time.Second)
	if err := m.cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	b.produce("t", 100, 130) // 15 more per partition, not consumed by commit
	m.stopPolling()
	lags, err := b.Admin().Lag(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	l := lags["g"]
	if l.DescribeErr != nil || l.FetchErr != nil || len(l.Members) != 1 || l.State != "Stable" {
		t.Fatalf("lag describe: %+v", l)
	}
	var total int64
	for _, p := range []int32{0, 1} {
		pl := l.Lag["t"][p]
		if pl.Err != nil || pl.Member == nil || pl.Commit.At != 50 || pl.End.Offset != 65 || pl.Lag != 15 {
			t.Fatalf("partition %d lag: commit %d end %d lag %d member %v err %v", p, pl.Commit.At, pl.End.Offset, pl.Lag, pl.Member, pl.Err)
		}
		total += pl.Lag
	}
	if total != 30 {
		t.Fatalf("total lag %d", total)
	}
}

// TestConsumerOnlyGroup commits offsets without joining (manual
// assignment, as kcat and admin tools do) and reads them back.
func TestConsumerOnlyGroup(t *testing.T) {
	b := startBroker(t, nil)
	b.createTopic("t", 3, 30)
	adm := b.Admin()
	ctx := ctxFor(t, 30*time.Second)
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: "t", Partition: 0, At: 4, LeaderEpoch: -1})
	os.Add(kadm.Offset{Topic: "t", Partition: 2, At: 7, LeaderEpoch: -1, Metadata: "tool"})
	resp, err := adm.CommitOffsets(ctx, "tool", os)
	if err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v %v", err, resp.Error())
	}
	// Existing tools can read the topic: Kafka's key and value schemas.
	ocl := b.Client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		"__consumer_offsets": {group.PartitionFor("tool", 5): kgo.NewOffset().AtStart()},
	}))
	fs := ocl.PollFetches(ctxFor(t, 30*time.Second))
	if fs.Err() != nil || len(fs.Records()) != 2 {
		t.Fatalf("read __consumer_offsets: %v, %d records", fs.Err(), len(fs.Records()))
	}
	var key kmsg.OffsetCommitKey
	var val kmsg.OffsetCommitValue
	r0 := fs.Records()[0]
	if err := key.ReadFrom(r0.Key); err != nil || key.Group != "tool" || key.Topic != "t" || key.Partition != 0 {
		t.Fatalf("offset key %+v %v", key, err)
	}
	if err := val.ReadFrom(r0.Value); err != nil || val.Offset != 4 {
		t.Fatalf("offset value %+v %v", val, err)
	}
	ocl.Close()

	b.Restart()
	adm = b.Admin()
	got, err := adm.FetchOffsets(ctxFor(t, 30*time.Second), "tool")
	if err != nil || got.Error() != nil {
		t.Fatalf("fetch: %v", err)
	}
	if o, _ := got.Lookup("t", 0); o.At != 4 {
		t.Fatalf("partition 0 at %d", o.At)
	}
	if o, _ := got.Lookup("t", 2); o.At != 7 || o.Metadata != "tool" {
		t.Fatalf("partition 2 at %d %q", o.At, o.Metadata)
	}
	// A manual-assignment consumer (no group membership) resumes there.
	cl := b.Client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"t": {2: kgo.NewOffset().At(got["t"][2].At)}}))
	fs = cl.PollFetches(ctxFor(t, 30*time.Second))
	if recs := fs.Records(); len(recs) == 0 || recs[0].Offset != 7 {
		t.Fatalf("manual consumer read %d records", len(recs))
	}
	ls, err := adm.ListGroups(ctxFor(t, 10*time.Second))
	if err != nil || len(ls) != 1 || ls["tool"].State != "Empty" {
		t.Fatalf("list groups: %v %+v", err, ls)
	}
	dr, err := adm.DeleteGroups(ctxFor(t, 10*time.Second), "tool")
	if err != nil || dr.Error() != nil {
		t.Fatalf("delete group: %v %v", err, dr.Error())
	}
}
