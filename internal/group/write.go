package group

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/record"
)

// How the coordinator writes __consumer_offsets (Kafka's coordinator
// runtime: records are appended under the group's lock, so they follow the
// group's state changes in log order, and the answer waits for the write
// to be durable without holding the lock, so the other members of the
// group are not kept waiting on the disk).
//
// A write that fails leaves nothing claimed that is not stored: the
// request that wrote it is answered with Kafka's error for its API
// (storeErrorCode), and after a failed group metadata write the group is
// reloaded from the last metadata record that was stored, as a new
// coordinator would load it (Kafka reverts its in-memory state to the last
// committed offset); members waiting in a JoinGroup or SyncGroup are
// answered with the same error and rejoin.

// groupWrite is a batch of a group's records appended to its
// __consumer_offsets partition and not yet known to be durable.
type groupWrite struct {
	wait func(context.Context) error // nil when the append failed
	err  error                       // the append's error
	// meta is the group metadata the batch holds (nil: none), which is
	// what is stored of the group once the write is durable.
	meta *kmsg.GroupMetadataValue
	// epoch is the group's write epoch when the batch was appended: a
	// reload after a failed write starts a new one.
	epoch uint64
	// consumer lists the KIP-848 records of the batch, cseq its sequence
	// number among the group's writes (consumer_persist.go).
	consumer []record.Record
	cseq     uint64
}

// appendLocked appends recs of g to its partition (g.mu held) and returns
// the write to wait for.
func (c *Coordinator) appendLocked(g *group, recs []record.Record) *groupWrite {
	w := &groupWrite{epoch: g.writeEpoch}
	b, err := buildBatch(c.env.clock.Now(), recs)
	if err != nil {
		w.err = err
		return w
	}
	p := PartitionFor(g.id, c.cfg.NumPartitions)
	if w.wait, err = c.store.Append(p, b); err != nil {
		w.err = fmt.Errorf("append to __consumer_offsets-%d: %w", p, err)
	}
	return w
}

// writeMetadataLocked appends g's metadata record (g.mu held) when the
// state machine asked for it (dirty) or always is set, and the KIP-848
// records whose value changed (consumer_persist.go); it returns nil when
// there is nothing to write.
func (c *Coordinator) writeMetadataLocked(g *group, always bool) *groupWrite {
	var recs []record.Record
	var v *kmsg.GroupMetadataValue
	if g.dirty || always {
		g.dirty = false
		v = groupMetadata(g)
		recs = append(recs, record.Record{Key: groupKey(g.id), Value: v.AppendTo(nil)})
	}
	crecs := g.consumerChangesLocked(false)
	if len(recs) == 0 && len(crecs) == 0 {
		return nil
	}
	w := c.appendLocked(g, append(recs, crecs...))
	w.meta = v
	if len(crecs) > 0 {
		g.cseq++
		w.consumer, w.cseq = crecs, g.cseq
	}
	return w
}

// writeConsumerGoneLocked appends the tombstones of every KIP-848 record
// of g, which is being removed (g.mu held); nil when there are none.
func (c *Coordinator) writeConsumerGoneLocked(g *group) *groupWrite {
	crecs := g.consumerChangesLocked(true)
	if len(crecs) == 0 {
		return nil
	}
	w := c.appendLocked(g, crecs)
	g.cseq++
	w.consumer, w.cseq = crecs, g.cseq
	return w
}

// await waits, without the group's lock, until w is durable; the wait
// ends with an error when the log fails or closes, the coordinator closes
// or offsets.commit.timeout.ms passes (waitDurable).
func (c *Coordinator) await(w *groupWrite) error {
	if w.err != nil {
		return w.err
	}
	return c.waitDurable(w.wait)
}

// waitDurable waits for one __consumer_offsets write, at most
// offsets.commit.timeout.ms: a write the partition's ISR has not
// replicated by then fails with REQUEST_TIMED_OUT, which the request's
// answer maps to COORDINATOR_NOT_AVAILABLE (storeErrorCode). Kafka's
// GroupCoordinatorService gives every coordinator write
// offsetCommitTimeoutMs as its timeout and CoordinatorRuntime fails the
// write with a TimeoutException (REQUEST_TIMED_OUT) when the high
// watermark has not reached it by then; the client is never told of a
// success the log does not hold. The record may still become committed
// later (it stays in the leader's log), as in Kafka: the client retries.
func (c *Coordinator) waitDurable(wait func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.CommitTimeout)
	defer cancel()
	err := wait(ctx)
	switch {
	case err == nil:
		return nil
	case errors.Is(ctx.Err(), context.DeadlineExceeded) && c.ctx.Err() == nil && !errors.Is(err, kerr.RequestTimedOut):
		return fmt.Errorf("wait for __consumer_offsets to be durable: not replicated within offsets.commit.timeout.ms=%d: %v: %w",
			c.cfg.CommitTimeout.Milliseconds(), err, kerr.RequestTimedOut)
	}
	return fmt.Errorf("wait for __consumer_offsets to be durable: %w", err)
}

// settleLocked applies the outcome of a group metadata write (g.mu held)
// and returns the error code for the request that wrote it (0: durable).
// A failure reloads the group from what is stored; so does a write that
// succeeded after an earlier one failed (the group was reloaded from older
// metadata meanwhile).
func (c *Coordinator) settleLocked(g *group, w *groupWrite, err error, what string) int16 {
	if w == nil {
		return 0
	}
	if err == nil && w.meta != nil {
		g.stored = w.meta
	}
	if err == nil {
		g.settleConsumer(w.consumer, w.cseq)
	}
	if g.state == stateDead {
		return storeErrorCode(err, kerr.UnknownServerError.Code)
	}
	switch {
	case err != nil:
		code := storeErrorCode(err, kerr.UnknownServerError.Code)
		c.logger.Error("store group metadata failed; reloading the group from what is stored", "group", g.id,
			"write", what, "err", err, "answered", kerr.ErrorForCode(code))
		c.reload(g, code)
		return code
	case w.epoch != g.writeEpoch:
		c.reload(g, kerr.NotCoordinator.Code)
	}
	return 0
}

// complete waits for a metadata write made under g's lock (nil: none),
// then settles it; it returns the request's error code.
func (c *Coordinator) complete(g *group, w *groupWrite, what string) int16 {
	if w == nil {
		return 0
	}
	err := c.await(w)
	g.mu.Lock()
	defer g.mu.Unlock()
	return c.settleLocked(g, w, err, what)
}

// unlockAndComplete writes the metadata change the state machine asked
// for (if any), releases g's lock and waits for the write.
func (c *Coordinator) unlockAndComplete(g *group, what string) int16 {
	w := c.writeMetadataLocked(g, false)
	g.mu.Unlock()
	return c.complete(g, w, what)
}

// reload puts g back to what its last stored metadata record says (g.mu
// held), as a coordinator loading the partition would: every request
// waiting in a rebalance is answered code, timers stop, and the stored
// members are back in a Stable group (or none in an Empty one). Offsets
// are kept: they are stored by their own writes.
func (c *Coordinator) reload(g *group, code int16) {
	for _, m := range g.members {
		stopTimer(m.hbTimer)
		m.hbSeq++
		if m.joinCh != nil {
			m.joinCh <- joinResult{err: code, memberID: m.id}
			m.joinCh = nil
		}
		if m.syncCh != nil {
			m.syncCh <- syncResult{err: code}
			m.syncCh = nil
		}
	}
	for id, t := range g.pending {
		stopTimer(t)
		delete(g.pending, id)
	}
	stopTimer(g.joinTimer)
	g.joinTimer = nil
	g.joinSeq++
	g.clearPendingSync()
	g.initialDelay, g.newMemberAdded = false, false
	g.members = map[string]*member{}
	g.static = map[string]string{}
	g.protocolType, g.protocol, g.leader, g.generation = "", "", "", 0
	g.syncingGen = 0
	g.setState(stateEmpty)
	g.dirty = false
	g.writeEpoch++
	if g.stored != nil {
		g.restoreLocked(g.stored)
	}
	if g.consumer != nil || len(g.cstored) > 0 {
		c.rebuildConsumer(g, g.storedConsumerRecords())
	}
}

// rebuildConsumer rebuilds g's KIP-848 state from its live consumer group
// records recs (g.mu held, or g not yet shared), with the topics as they
// are now.
func (c *Coordinator) rebuildConsumer(g *group, recs map[string][]byte) {
	var ts []TopicInfo
	if c.cfg.Topics != nil {
		ts = c.cfg.Topics()
	}
	if len(recs) > 0 && len(g.members) > 0 {
		c.logger.Warn("group has both classic members and consumer group records; keeping the classic members", "group", g.id)
		return
	}
	if err := g.restoreConsumer(recs, newTopicIndex(ts), c.cfg.ConsumerSessionTimeout); err != nil {
		c.logger.Error("restore consumer group", "group", g.id, "err", err)
	}
}

// storeErrorCode is Kafka's answer to a failed __consumer_offsets write
// (Kafka 4's group coordinator, CoordinatorOperationExceptionHelper; the
// classic GroupMetadataManager of Kafka 3 answered a timed-out OffsetCommit
// REQUEST_TIMED_OUT and a timed-out SyncGroup REBALANCE_IN_PROGRESS, Kafka 4
// COORDINATOR_NOT_AVAILABLE for every API, which Strata follows): the
// partition missing or the write timing out is COORDINATOR_NOT_AVAILABLE,
// a storage error or a partition no longer led here NOT_COORDINATOR, a
// batch too large tooLarge (INVALID_COMMIT_OFFSET_SIZE for offsets,
// UNKNOWN_SERVER_ERROR for group metadata), another Kafka error itself.
// An error without a Kafka code (the coordinator shutting down) is
// COORDINATOR_NOT_AVAILABLE, which clients retry.
func storeErrorCode(err error, tooLarge int16) int16 {
	var ke *kerr.Error
	switch {
	case err == nil:
		return 0
	case errors.Is(err, kerr.UnknownTopicOrPartition), errors.Is(err, kerr.NotEnoughReplicas),
		errors.Is(err, kerr.NotEnoughReplicasAfterAppend), errors.Is(err, kerr.RequestTimedOut):
		return kerr.CoordinatorNotAvailable.Code
	case errors.Is(err, kerr.NotLeaderForPartition), errors.Is(err, kerr.KafkaStorageError):
		return kerr.NotCoordinator.Code
	case errors.Is(err, kerr.MessageTooLarge), errors.Is(err, kerr.RecordListTooLarge), errors.Is(err, kerr.InvalidFetchSize):
		return tooLarge
	case errors.As(err, &ke):
		return ke.Code
	}
	return kerr.CoordinatorNotAvailable.Code
}
