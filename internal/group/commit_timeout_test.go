package group

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestCommitTimeout: a __consumer_offsets write that is not durable within
// offsets.commit.timeout.ms (the partition's ISR not replicating) answers
// the OffsetCommit, the leader's SyncGroup and the TxnOffsetCommit that
// made it COORDINATOR_NOT_AVAILABLE (Kafka's GroupCoordinatorService write
// timeout, CoordinatorOperationExceptionHelper), never success; the
// committed offsets stay what they were, and the coordinator goes on
// serving: once writes are durable again the same requests succeed.
func TestCommitTimeout(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.CommitTimeout = 100 * time.Millisecond
		c.Transactions = true
	})
	id, ch := h.joinNew("g", "t")
	j := recv(t, ch)
	if s := recv(t, h.syncAsync(syncReq("g", id, j.Generation, map[string]string{id: "a"}))); s.ErrorCode != 0 {
		t.Fatalf("sync: %d", s.ErrorCode)
	}
	if c := h.do(commitReq("g", id, j.Generation, "t", map[int32]int64{0: 10})).(*kmsg.OffsetCommitResponse); c.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("commit: %d", c.Topics[0].Partitions[0].ErrorCode)
	}

	hold := make(chan struct{}) // writes appended from now on are never durable
	h.store.hold = hold
	c := h.do(commitReq("g", id, j.Generation, "t", map[int32]int64{0: 20})).(*kmsg.OffsetCommitResponse)
	if code := c.Topics[0].Partitions[0].ErrorCode; code != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("commit not replicated in time: %v, want COORDINATOR_NOT_AVAILABLE", kerr.ErrorForCode(code))
	}
	if got := h.fetch("g", "t", 0)["t"][0]; got != 10 {
		t.Fatalf("committed offset after the timed-out commit: %d, want 10", got)
	}
	txc := kmsg.NewPtrTxnOffsetCommitRequest()
	txc.Version, txc.TransactionalID, txc.Group, txc.ProducerID, txc.ProducerEpoch = 3, "tx", "g", 7, 0
	txc.Generation, txc.MemberID = j.Generation, id
	tt := kmsg.NewTxnOffsetCommitRequestTopic()
	tt.Topic = "t"
	tp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	tp.Partition, tp.Offset = 0, 30
	tt.Partitions = append(tt.Partitions, tp)
	txc.Topics = append(txc.Topics, tt)
	if r := h.do(txc).(*kmsg.TxnOffsetCommitResponse); r.Topics[0].Partitions[0].ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("TxnOffsetCommit not replicated in time: %v, want COORDINATOR_NOT_AVAILABLE", kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode))
	}
	// A new generation's assignment that cannot be stored: the leader's
	// SyncGroup is refused and the group reloads what is stored.
	h.store.hold = nil
	id2, ch2 := h.joinNew("g2", "t")
	j2 := recv(t, ch2)
	h.store.hold = hold
	if s := recv(t, h.syncAsync(syncReq("g2", id2, j2.Generation, map[string]string{id2: "a"}))); s.ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("sync not replicated in time: %v, want COORDINATOR_NOT_AVAILABLE", kerr.ErrorForCode(s.ErrorCode))
	}

	h.store.hold = nil // replication is back
	if c := h.do(commitReq("g", id, j.Generation, "t", map[int32]int64{0: 40})).(*kmsg.OffsetCommitResponse); c.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("commit once writes are durable again: %v", kerr.ErrorForCode(c.Topics[0].Partitions[0].ErrorCode))
	}
	if got := h.fetch("g", "t", 0)["t"][0]; got != 40 {
		t.Fatalf("committed offset: %d, want 40", got)
	}
	close(hold)
}
