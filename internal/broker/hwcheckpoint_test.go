package broker

import (
	"context"
	"testing"
)

// TestReplicatedPartitionAloneAgain: a partition replicated when the broker
// last ran (its log dir's replication-offset-checkpoint lists it, at a
// high watermark below its log end) that the cluster metadata now gives
// this broker alone returns to a high watermark at its own fsynced end when
// the metadata is applied, or it would stay at the checkpoint: nothing else
// moves a replicated log's high watermark once no replica state machine
// runs for it.
func TestReplicatedPartitionAloneAgain(t *testing.T) {
	dir := t.TempDir()
	b := openTest(t, dir)
	if _, err := b.CreateTopic(CreateTopicRequest{Name: "t", NumPartitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	p, err := b.Partition("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Append(context.Background(), testBatch(t, 5), -1); err != nil {
		t.Fatal(err)
	}
	p.Log.StartReplication(nil)    // as a replica's takeover
	p.Log.SetHighWatermark(2, nil) // and its leader's answer: 2 of 5 committed
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	b = openTest(t, dir)
	defer b.Close()
	p, err = b.Partition("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Log.Replicated() || p.HighWatermark() != 2 {
		t.Fatalf("reopened: replicated %v, high watermark %d, want the checkpointed 2", p.Log.Replicated(), p.HighWatermark())
	}
	tp := b.Topic("t")
	l := Leadership{Leader: b.NodeID(), LeaderEpoch: 1, Replicas: []int32{b.NodeID()}, ISR: []int32{b.NodeID()}}
	if err := b.ApplyTopics([]TopicSpec{{Name: "t", ID: tp.ID, Partitions: map[int32]Leadership{0: l}}}); err != nil {
		t.Fatal(err)
	}
	if p.Log.Replicated() || p.HighWatermark() != 5 {
		t.Fatalf("alone: replicated %v, high watermark %d, want its fsynced end 5", p.Log.Replicated(), p.HighWatermark())
	}
}
