package group

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/record/recordtest"
)

// FuzzReplay feeds arbitrary __consumer_offsets keys and values to the
// replayer: it must return an error or fold the record, never panic.
func FuzzReplay(f *testing.F) {
	o := offset{offset: 5, leaderEpoch: 1, metadata: "x", commitMs: 10, expireMs: -1}
	f.Add(offsetKey("g", tp{"t", 1}), offsetValue(o))
	o.expireMs = 99
	f.Add(offsetKey("g", tp{"t", 1}), offsetValue(o))
	g := newGroup("g", &env{clock: newFakeClock()})
	g.members["m"] = &member{id: "m", protocols: []protocol{{name: "range", metadata: []byte{1}}}}
	g.protocol = "range"
	f.Add(groupKey("g"), groupMetadata(g).AppendTo(nil))
	f.Add(groupKey("g"), []byte(nil))
	for typ, vs := range sampleConsumerValues() {
		f.Add(consumerKey{Type: typ, Group: "g", Member: "m"}.AppendTo(nil), vs[0].AppendTo(nil))
	}
	f.Add([]byte{0, 9, 1}, []byte{1})
	f.Add([]byte{0, 1, 0, 200}, []byte{0, 3})
	f.Fuzz(func(t *testing.T, key, value []byte) {
		r := newReplayer()
		_ = r.apply(key, value, -1)
		_ = r.apply(key, value, 7)
		_ = r.apply(key, nil, -1)
	})
}

// FuzzReplayBatch feeds arbitrary batch bytes to Load's batch folding.
func FuzzReplayBatch(f *testing.F) {
	b, err := buildBatch(time.Unix(1, 0), []record.Record{{Key: groupKey("g"), Value: nil}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add(b[:30])
	o := offset{offset: 5, leaderEpoch: 1, metadata: "x", commitMs: 10, expireMs: -1}
	tb, err := buildTxnBatch(time.Unix(1, 0), 7, 0, []record.Record{{Key: offsetKey("g", tp{"t", 1}), Value: offsetValue(o)}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(tb)
	f.Add([]byte(recordtest.Marker(record.BatchHeader{ProducerID: 7}, true, 0)))
	f.Add([]byte(recordtest.Marker(record.BatchHeader{ProducerID: 7}, false, 0)))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < record.HeaderSize {
			return
		}
		r := newReplayer()
		_ = r.applyBatch(tb)
		_ = r.applyBatch(record.Batch(data))
	})
}

func TestRecordSchemasRoundTrip(t *testing.T) {
	g := newGroup("g", &env{clock: newFakeClock()})
	inst := "i"
	g.members["m"] = &member{id: "m", instanceID: &inst, clientID: "c", clientHost: "/h", sessionTimeout: 10 * time.Second,
		rebalanceTimeout: time.Minute, protocols: []protocol{{name: "range", metadata: []byte{1}}}, assignment: []byte{2}}
	g.protocolType, g.protocol, g.generation, g.leader = "consumer", "range", 7, "m"
	var v kmsg.GroupMetadataValue
	if err := v.ReadFrom(groupMetadata(g).AppendTo(nil)); err != nil {
		t.Fatal(err)
	}
	m := v.Members[0]
	if v.Version != 3 || v.Generation != 7 || *v.Protocol != "range" || *m.InstanceID != "i" || m.SessionTimeoutMillis != 10000 || m.Assignment[0] != 2 {
		t.Fatalf("group value %+v", v)
	}
}

func BenchmarkOffsetCommit(b *testing.B) {
	clk := newFakeClock()
	c, err := NewCoordinator(testConfig(clk), newMemStore(), nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	if err := c.Load(context.Background()); err != nil {
		b.Fatal(err)
	}
	req := commitReq("bench", "", -1, "t", map[int32]int64{0: 1, 1: 2, 2: 3})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Handle(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkHeartbeat(b *testing.B) {
	clk := newFakeClock()
	c, err := NewCoordinator(testConfig(clk), newMemStore(), nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	if err := c.Load(context.Background()); err != nil {
		b.Fatal(err)
	}
	g := c.lockGroup("g", true)
	leader := "m"
	proto := "range"
	g.mu.Unlock()
	g.restore(&kmsg.GroupMetadataValue{ProtocolType: "consumer", Generation: 1, Protocol: &proto, Leader: &leader,
		Members: []kmsg.GroupMetadataValueMember{{MemberID: "m", SessionTimeoutMillis: 10000, RebalanceTimeoutMillis: 10000}}})
	req := hbReq("g", "m", 1)
	b.ReportAllocs()
	for b.Loop() {
		resp, err := c.Handle(context.Background(), req)
		if err != nil || resp.(*kmsg.HeartbeatResponse).ErrorCode != 0 {
			b.Fatal(err, resp)
		}
	}
}

func TestLoadSkipsForeignRecords(t *testing.T) {
	h := newHarness(t, nil)
	h.do(commitReq("g", "", -1, "t", map[int32]int64{0: 3}))
	p := PartitionFor("g", 50)
	b, err := buildBatch(time.Unix(1, 0), []record.Record{
		{Key: []byte{0, 1, 9}, Value: []byte{1}},       // truncated offset key
		{Key: []byte{0, 9, 1, 2}, Value: []byte{1, 2}}, // unknown key version: ignored
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.store.Append(p, b); err != nil {
		t.Fatal(err)
	}
	h.restart()
	if got := h.fetch("g", "t", 0); got["t"][0] != 3 {
		t.Fatalf("offset after loading foreign records: %v", got)
	}
}
