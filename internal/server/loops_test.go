package server_test

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestRetentionLoopDeletesOldSegments checks the broker's retention loop
// (log.retention.check.interval.ms) applies retention.ms.
func TestRetentionLoopDeletesOldSegments(t *testing.T) {
	tb := startBroker(t, "", map[string]string{"log.retention.check.interval.ms": "100"})
	ctx := ctxT(t)
	if _, err := tb.Admin().CreateTopic(ctx, 1, 1, map[string]*string{
		"segment.bytes": sp("16384"), "retention.ms": sp("60000"), "file.delete.delay.ms": sp("0"),
	}, "ret"); err != nil {
		t.Fatal(err)
	}
	cl := tb.Client(kgo.DefaultProduceTopic("ret"), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(0))
	old := time.Now().Add(-time.Hour)
	for i := 0; i < 60; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: make([]byte, 1024), Timestamp: old}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	p, _ := tb.Server().Broker().Partition("ret", 0)
	deadline := time.Now().Add(10 * time.Second)
	for p.Log.LogStartOffset() == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if p.Log.LogStartOffset() == 0 {
		t.Fatalf("retention loop deleted nothing: segments %+v", p.Log.Segments())
	}
}

// TestMinInsyncReplicasHonoured: min.insync.replicas above the replica
// count fails acks=all with NOT_ENOUGH_REPLICAS; acks=1 still works.
func TestMinInsyncReplicasHonoured(t *testing.T) {
	tb := startBroker(t, "", nil)
	ctx := ctxT(t)
	if _, err := tb.Admin().CreateTopic(ctx, 1, 1, map[string]*string{"min.insync.replicas": sp("2")}, "isr"); err != nil {
		t.Fatal(err)
	}
	all := tb.Client(kgo.DefaultProduceTopic("isr"), kgo.RecordRetries(0), kgo.RecordDeliveryTimeout(3*time.Second))
	if err := all.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.NotEnoughReplicas) {
		t.Errorf("acks=all with min.insync.replicas=2: %v", err)
	}
	one := tb.Client(kgo.DefaultProduceTopic("isr"), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	if err := one.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Errorf("acks=1: %v", err)
	}
}

// TestManyConnections: many clients (one connection each) produce to the
// same partitions at once; every acknowledged record is readable once.
func TestManyConnections(t *testing.T) {
	tb := startBroker(t, "", nil)
	ctx := ctxT(t)
	if _, err := tb.Admin().CreateTopic(ctx, 3, 1, nil, "many"); err != nil {
		t.Fatal(err)
	}
	const clients, per = 20, 50
	errs := make(chan error, clients)
	for c := 0; c < clients; c++ {
		go func(c int) {
			cl, err := kgo.NewClient(kgo.SeedBrokers(tb.Addr()), kgo.DefaultProduceTopic("many"))
			if err != nil {
				errs <- err
				return
			}
			defer cl.Close()
			var rs []*kgo.Record
			for i := 0; i < per; i++ {
				rs = append(rs, &kgo.Record{Key: []byte{byte(c), byte(i)}, Value: []byte("v")})
			}
			errs <- cl.ProduceSync(ctx, rs...).FirstErr()
		}(c)
	}
	for c := 0; c < clients; c++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	got := consumeAll(t, tb, "many", clients*per)
	seen := map[string]bool{}
	for _, r := range got {
		seen[string(r.Key)] = true
	}
	if len(got) != clients*per || len(seen) != clients*per {
		t.Errorf("read %d records, %d distinct, want %d", len(got), len(seen), clients*per)
	}
}
