package server_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListOffsets v0 (Kafka's legacy "offsets before" query, sent by Burrow
// 1.2.1's sarama) answers a descending list of segment base offsets, led by
// the log end offset when the active segment holds data. These tests send it
// over a raw socket with kmsg and check the lists.

// v0Query is one partition of a ListOffsets v0 request.
type v0Query struct {
	topic     string
	partition int32
	timestamp int64
	max       int32
}

// listOffsetsV0 sends one ListOffsets v0 request for q and returns the
// partition's error code and offsets.
func listOffsetsV0(t *testing.T, rc *rawConn, q v0Query) (int16, []int64) {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = 0
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = q.topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp, rp.MaxNumOffsets = q.partition, q.timestamp, q.max
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := kmsg.NewPtrListOffsetsResponse()
	rc.send(req, resp, true)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("%+v: answer %+v", q, resp)
	}
	st, sp := resp.Topics[0], resp.Topics[0].Partitions[0]
	if st.Topic != q.topic || sp.Partition != q.partition {
		t.Fatalf("%+v: answered %s/%d", q, st.Topic, sp.Partition)
	}
	return sp.ErrorCode, sp.OldStyleOffsets
}

func TestListOffsetsV0(t *testing.T) {
	tb := startBroker(t, "", nil)
	ctx := ctxT(t)
	adm := tb.Admin()
	// 200 bytes hold one of the 108-byte uncompressed batches below: one
	// batch per segment, so segment base offsets are 0, 1, 2, ...
	if _, err := adm.CreateTopic(ctx, 2, 1, map[string]*string{"segment.bytes": sp("200")}, "lo0"); err != nil {
		t.Fatal(err)
	}
	const n = 5
	t0 := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	cl := tb.Client(kgo.DefaultProduceTopic("lo0"), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	for i := 0; i < n; i++ {
		r := &kgo.Record{Value: []byte(strings.Repeat("v", 40)), Timestamp: t0.Add(time.Duration(i) * time.Second)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	ms := func(i int) int64 { return t0.Add(time.Duration(i) * time.Second).UnixMilli() }
	future := time.Now().Add(time.Hour).UnixMilli()

	rc := dialRaw(t, tb.Addr())
	check := func(q v0Query, wantCode int16, want []int64) {
		t.Helper()
		code, got := listOffsetsV0(t, rc, q)
		if code != wantCode || !slices.Equal(got, want) {
			t.Errorf("v0 %s/%d ts %d max %d: code %d offsets %v, want code %d offsets %v",
				q.topic, q.partition, q.timestamp, q.max, code, got, wantCode, want)
		}
	}
	check(v0Query{"lo0", 0, -1, 100}, 0, []int64{5, 4, 3, 2, 1, 0})
	check(v0Query{"lo0", 0, -1, 1}, 0, []int64{5}) // what Burrow asks: the end offset
	check(v0Query{"lo0", 0, -1, 0}, 0, nil)
	check(v0Query{"lo0", 0, -2, 100}, 0, []int64{0})
	check(v0Query{"lo0", 0, -2, 1}, 0, []int64{0})
	// A timestamp selects the segments whose largest timestamp is at or
	// before it, newest first; the log end offset counts as stamped now.
	check(v0Query{"lo0", 0, ms(2), 100}, 0, []int64{2, 1, 0})
	check(v0Query{"lo0", 0, ms(2) + 500, 2}, 0, []int64{2, 1})
	check(v0Query{"lo0", 0, ms(4), 100}, 0, []int64{4, 3, 2, 1, 0})
	check(v0Query{"lo0", 0, ms(0) - 1, 100}, 0, nil)
	check(v0Query{"lo0", 0, future, 3}, 0, []int64{5, 4, 3})
	check(v0Query{"lo0", 0, -3, 100}, 0, nil) // no segment is stamped at or before -3, as in Kafka 3.x
	// An empty partition: one empty segment, no log end entry.
	check(v0Query{"lo0", 1, -1, 10}, 0, []int64{0})
	check(v0Query{"lo0", 1, -2, 10}, 0, []int64{0})
	// Errors per partition, as for v1.
	check(v0Query{"lo0", 9, -1, 1}, kerr.UnknownTopicOrPartition.Code, nil)
	check(v0Query{"nope", 0, -1, 1}, kerr.UnknownTopicOrPartition.Code, nil)
	check(v0Query{"lo0", 0, -1, -1}, kerr.InvalidRequest.Code, nil)

	// DeleteRecords moves the log start offset into the segments: base
	// offsets below it are raised to it and listed once.
	var del kadm.Offsets
	del.Add(kadm.Offset{Topic: "lo0", Partition: 0, At: 2})
	dr, err := adm.DeleteRecords(ctx, del)
	if err != nil {
		t.Fatal(err)
	}
	if err := dr.Error(); err != nil {
		t.Fatalf("delete records: %v", err)
	}
	check(v0Query{"lo0", 0, -1, 100}, 0, []int64{5, 4, 3, 2})
	check(v0Query{"lo0", 0, -2, 100}, 0, []int64{2})
	check(v0Query{"lo0", 0, ms(1), 100}, 0, []int64{2})

	// The same connection still serves v1 (and kgo's newest version).
	lo, err := adm.ListEndOffsets(ctx, "lo0")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := lo.Lookup("lo0", 0); o.Offset != 5 {
		t.Errorf("ListEndOffsets: %+v", o)
	}
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = 1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = "lo0"
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := kmsg.NewPtrListOffsetsResponse()
	rc.send(req, resp, true)
	if got := fmt.Sprintf("%d/%d", resp.Topics[0].Partitions[0].ErrorCode, resp.Topics[0].Partitions[0].Offset); got != "0/5" {
		t.Errorf("v1 latest after v0 on one connection: %s", got)
	}
}
