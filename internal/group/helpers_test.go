package group

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/clock"
	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/record/recordtest"
	"github.com/strata-io/strata/internal/storage"
)

// newFakeClock is the manual clock of the coordinator tests.
func newFakeClock() *clock.Manual { return clock.NewManual(time.Unix(1_700_000_000, 0)) }

// memStore is an in-memory Storage double for state machine tests (the
// real-log tests use storage.Log).
type memStore struct {
	mu      sync.Mutex
	parts   map[int32][][]byte
	next    map[int32]int64
	fail    error
	failTxn error // returned by AppendTxn only (e.g. a fenced producer)
	// failWait fails the wait for durability of the appends made while it
	// is set (the append itself succeeds: an fsync failing).
	failWait error
	// hold, when set, keeps the waits for durability of the appends made
	// meanwhile until it is closed.
	hold    chan struct{}
	appends int
}

func newMemStore() *memStore {
	return &memStore{parts: map[int32][][]byte{}, next: map[int32]int64{}}
}

func (s *memStore) Append(p int32, batch []byte) (func(context.Context) error, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return nil, s.fail
	}
	if err := record.Validate(batch); err != nil {
		return nil, err
	}
	failWait, hold := s.failWait, s.hold
	if failWait == nil {
		// Stored only when it will be durable: a failed wait stands for
		// bytes a power cut would lose.
		b := append([]byte(nil), batch...)
		record.Batch(b).SetBaseOffset(s.next[p])
		s.next[p] += int64(record.Batch(b).LastOffsetDelta()) + 1
		s.parts[p] = append(s.parts[p], b)
	}
	s.appends++
	return func(ctx context.Context) error {
		if hold != nil {
			select {
			case <-hold:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return failWait
	}, nil
}

func (s *memStore) AppendTxn(p int32, batch []byte) (func(context.Context) error, error) {
	s.mu.Lock()
	err := s.failTxn
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if b := record.Batch(batch); !b.IsTransactional() || b.ProducerID() < 0 || b.BaseSequence() != -1 {
		return nil, fmt.Errorf("AppendTxn of a batch with attributes %#x, producer id %d, base sequence %d", b.Attributes(), b.ProducerID(), b.BaseSequence())
	}
	return s.Append(p, batch)
}

// marker appends a COMMIT or ABORT control batch of producer pid, as the
// broker does for the transaction coordinator.
func (s *memStore) marker(p int32, pid int64, epoch int16, commit bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := recordtest.Marker(record.BatchHeader{ProducerID: pid, ProducerEpoch: epoch}, commit, 0)
	record.Batch(b).SetBaseOffset(s.next[p])
	s.next[p]++
	s.parts[p] = append(s.parts[p], b)
	return nil
}

func (s *memStore) Log(int32) *storage.Log { return nil }

func (s *memStore) Replay(p int32, fn func([]byte) error) error {
	s.mu.Lock()
	bs := append([][]byte(nil), s.parts[p]...)
	s.mu.Unlock()
	for _, b := range bs {
		if err := fn(b); err != nil {
			return err
		}
	}
	return nil
}

// records returns every (key, value) appended to partition p.
func (s *memStore) records(t *testing.T, p int32) []record.Record {
	t.Helper()
	var out []record.Record
	err := s.Replay(p, func(b []byte) error {
		recs, err := record.Batch(b).Records()
		out = append(out, recs...)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var errStoreDown = errors.New("store down")

type harness struct {
	t     *testing.T
	c     *Coordinator
	clk   *clock.Manual
	store *memStore
	cfg   Config
	// backend, when set, is the Storage instead of store (real logs).
	backend Storage
}

func testConfig(clk *clock.Manual) Config {
	return Config{
		NodeID: 1, Host: "127.0.0.1", Port: 9092, NumPartitions: 50,
		MinSessionTimeout: 6 * time.Second, MaxSessionTimeout: 30 * time.Minute,
		OffsetsRetention: 7 * 24 * time.Hour, OffsetsRetentionCheckInterval: 10 * time.Minute,
		Clock: clk,
	}
}

func newHarness(t *testing.T, mod func(*Config)) *harness {
	t.Helper()
	clk := newFakeClock()
	cfg := testConfig(clk)
	if mod != nil {
		mod(&cfg)
	}
	h := &harness{t: t, clk: clk, store: newMemStore(), cfg: cfg}
	h.start()
	return h
}

// start builds a coordinator over the harness store and loads it.
func (h *harness) start() {
	h.t.Helper()
	var st Storage = h.store
	if h.backend != nil {
		st = h.backend
	}
	c, err := NewCoordinator(h.cfg, st, nil, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := c.Load(context.Background()); err != nil {
		h.t.Fatal(err)
	}
	h.c = c
	h.t.Cleanup(func() { c.Close() })
}

// restart closes the coordinator and loads a new one from the same store.
func (h *harness) restart() {
	h.t.Helper()
	h.c.Close()
	h.start()
}

func (h *harness) do(req kmsg.Request) kmsg.Response {
	h.t.Helper()
	resp, err := h.c.Handle(context.Background(), req)
	if err != nil {
		h.t.Fatalf("%T: %v", req, err)
	}
	checkConsumerWritten(h.t, h.c)
	return resp
}

// checkConsumerWritten fails t when a KIP-848 group's records written so
// far (cwritten: only what the changed members need is encoded on a
// change) differ from all of its records encoded afresh.
func checkConsumerWritten(t testing.TB, c *Coordinator) {
	t.Helper()
	c.mu.Lock()
	gs := slices.Collect(maps.Values(c.groups))
	c.mu.Unlock()
	for _, g := range gs {
		g.mu.Lock()
		var want map[string][]byte
		if g.consumer != nil && g.state != stateDead {
			want = g.consumerRecords()
		}
		got := g.cwritten
		g.mu.Unlock()
		if want == nil {
			continue
		}
		if len(got) != len(want) {
			t.Errorf("group %s: %d consumer records written, its state has %d", g.id, len(got), len(want))
			continue
		}
		for k, v := range want {
			if !bytes.Equal(got[k], v) {
				var key consumerKey
				_ = key.ReadFrom([]byte(k))
				t.Errorf("group %s: record %+v written %x, its state has %x", g.id, key, got[k], v)
				break
			}
		}
	}
}

// joinAsync sends a JoinGroup in its own goroutine.
func (h *harness) joinAsync(r *kmsg.JoinGroupRequest) <-chan *kmsg.JoinGroupResponse {
	ch := make(chan *kmsg.JoinGroupResponse, 1)
	go func() {
		resp, err := h.c.Handle(WithClientInfo(context.Background(), "client", "/127.0.0.1"), r)
		if err != nil {
			h.t.Errorf("join: %v", err)
			close(ch)
			return
		}
		ch <- resp.(*kmsg.JoinGroupResponse)
	}()
	return ch
}

func (h *harness) syncAsync(r *kmsg.SyncGroupRequest) <-chan *kmsg.SyncGroupResponse {
	ch := make(chan *kmsg.SyncGroupResponse, 1)
	go func() {
		resp, err := h.c.Handle(context.Background(), r)
		if err != nil {
			h.t.Errorf("sync: %v", err)
			close(ch)
			return
		}
		ch <- resp.(*kmsg.SyncGroupResponse)
	}()
	return ch
}

func joinReq(group, memberID string, instance *string, topics ...string) *kmsg.JoinGroupRequest {
	r := kmsg.NewPtrJoinGroupRequest()
	r.Version = 9
	r.Group = group
	r.MemberID = memberID
	r.InstanceID = instance
	r.SessionTimeoutMillis = 10_000
	r.RebalanceTimeoutMillis = 60_000
	r.ProtocolType = "consumer"
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = topics
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name = "range"
	p.Metadata = meta.AppendTo(nil)
	r.Protocols = append(r.Protocols, p)
	return r
}

func syncReq(group, memberID string, gen int32, assign map[string]string) *kmsg.SyncGroupRequest {
	r := kmsg.NewPtrSyncGroupRequest()
	r.Version = 5
	r.Group, r.MemberID, r.Generation = group, memberID, gen
	pt, pn := "consumer", "range"
	r.ProtocolType, r.Protocol = &pt, &pn
	ids := make([]string, 0, len(assign))
	for id := range assign {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		a := kmsg.NewSyncGroupRequestGroupAssignment()
		a.MemberID, a.MemberAssignment = id, []byte(assign[id])
		r.GroupAssignment = append(r.GroupAssignment, a)
	}
	return r
}

func hbReq(group, memberID string, gen int32) *kmsg.HeartbeatRequest {
	r := kmsg.NewPtrHeartbeatRequest()
	r.Version = 4
	r.Group, r.MemberID, r.Generation = group, memberID, gen
	return r
}

func commitReq(group, memberID string, gen int32, topic string, offsets map[int32]int64) *kmsg.OffsetCommitRequest {
	r := kmsg.NewPtrOffsetCommitRequest()
	r.Version = 8
	r.Group, r.MemberID, r.Generation = group, memberID, gen
	t := kmsg.NewOffsetCommitRequestTopic()
	t.Topic = topic
	for _, p := range slices.Sorted(maps.Keys(offsets)) {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = p, offsets[p], 3
		md := "m"
		rp.Metadata = &md
		t.Partitions = append(t.Partitions, rp)
	}
	r.Topics = append(r.Topics, t)
	return r
}

// fetchOffsets returns group's committed offsets of topic (all topics
// when topic is "") via OffsetFetch v8.
func (h *harness) fetch(group, topic string, parts ...int32) map[string]map[int32]int64 {
	h.t.Helper()
	r := kmsg.NewPtrOffsetFetchRequest()
	r.Version = 8
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = group
	if topic != "" {
		rt := kmsg.NewOffsetFetchRequestGroupTopic()
		rt.Topic, rt.Partitions = topic, parts
		rg.Topics = append(rg.Topics, rt)
	}
	r.Groups = append(r.Groups, rg)
	resp := h.do(r).(*kmsg.OffsetFetchResponse)
	out := map[string]map[int32]int64{}
	for _, g := range resp.Groups {
		if g.ErrorCode != 0 {
			h.t.Fatalf("fetch %s: error %d", group, g.ErrorCode)
		}
		for _, t := range g.Topics {
			out[t.Topic] = map[int32]int64{}
			for _, p := range t.Partitions {
				out[t.Topic][p.Partition] = p.Offset
			}
		}
	}
	return out
}

func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("no response (blocked)")
	}
	var zero T
	return zero
}

// notReady asserts ch has no value yet (the request is parked).
func notReady[T any](t *testing.T, ch <-chan T) {
	t.Helper()
	select {
	case v := <-ch:
		t.Fatalf("request answered early: %+v", v)
	case <-time.After(20 * time.Millisecond):
	}
}

// waitParked waits until n JoinGroup requests of group are parked.
func (h *harness) waitParked(group string, n int) {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		got := 0
		if g := h.c.lookup(group); g != nil {
			g.mu.Lock()
			for _, m := range g.members {
				if m.joinCh != nil {
					got++
				}
			}
			g.mu.Unlock()
		}
		if got >= n {
			return
		}
		time.Sleep(time.Millisecond)
	}
	h.t.Fatalf("%d joins of %s never parked", n, group)
}

// state returns group's state name ("" when absent).
func (h *harness) state(group string) string {
	g := h.c.lookup(group)
	if g == nil {
		return ""
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.state.String()
}

// joinNew runs the two-step KIP-394 join for a new dynamic member and
// returns the parked second JoinGroup.
func (h *harness) joinNew(group string, topics ...string) (string, <-chan *kmsg.JoinGroupResponse) {
	h.t.Helper()
	first := recv(h.t, h.joinAsync(joinReq(group, "", nil, topics...)))
	if first.ErrorCode != 15+64 { // MEMBER_ID_REQUIRED = 79
		h.t.Fatalf("first join: error %d, want MEMBER_ID_REQUIRED", first.ErrorCode)
	}
	return first.MemberID, h.joinAsync(joinReq(group, first.MemberID, nil, topics...))
}
