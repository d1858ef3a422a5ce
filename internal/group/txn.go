package group

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/record"
)

// txnCompletion is a transaction end reported to CompleteTxn.
type txnCompletion struct {
	partition int32
	pid       int64
	commit    bool
}

// txnOffsetCommit serves TxnOffsetCommit v0-4: the offsets are written as
// one transactional batch of the producer and stay pending (invisible to
// OffsetFetch) until CompleteTxn reports the transaction's marker.
func (c *Coordinator) txnOffsetCommit(ctx context.Context, r *kmsg.TxnOffsetCommitRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	codes := newPartitionCodes(len(r.Topics), func(i int) int { return len(r.Topics[i].Partitions) })
	defer func() {
		for i, t := range r.Topics {
			rt := kmsg.NewTxnOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for j, p := range t.Partitions {
				rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, codes[i][j]
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}()
	switch {
	case r.Group == "":
		codes.fill(kerr.InvalidGroupID.Code)
		return resp
	case c.status(r.Group) != 0:
		codes.fill(c.status(r.Group))
		return resp
	case r.ProducerID < 0:
		codes.fill(kerr.InvalidProducerIDMapping.Code)
		return resp
	case r.ProducerEpoch < 0:
		codes.fill(kerr.InvalidProducerEpoch.Code)
		return resp
	}
	generation, memberID, instanceID := r.Generation, r.MemberID, r.InstanceID
	if r.Version < 3 {
		generation, memberID, instanceID = -1, "", nil
	}
	now := c.env.clock.Now()
	offs := map[tp]offset{}
	for i, t := range r.Topics {
		for j, p := range t.Partitions {
			switch {
			case p.Metadata != nil && len(*p.Metadata) > c.cfg.MaxMetadataSize:
				codes[i][j] = kerr.OffsetMetadataTooLarge.Code
			case !c.partitionExists(t.Topic, p.Partition):
				codes[i][j] = kerr.UnknownTopicOrPartition.Code
			default:
				o := offset{offset: p.Offset, leaderEpoch: p.LeaderEpoch, commitMs: now.UnixMilli(), expireMs: -1}
				if r.Version < 2 {
					o.leaderEpoch = -1
				}
				if p.Metadata != nil {
					o.metadata = *p.Metadata
				}
				offs[tp{t.Topic, p.Partition}] = o
			}
		}
	}
	// Verification asks the transaction coordinator, which may be writing
	// markers (and so waiting in CompleteTxn for a group lock): ask before
	// taking the group's lock.
	if c.cfg.VerifyTxn != nil && len(offs) > 0 {
		err := c.cfg.VerifyTxn(r.TransactionalID, r.ProducerID, r.ProducerEpoch, PartitionFor(r.Group, c.cfg.NumPartitions))
		if err != nil {
			codes.fill(txnErrorCode(err, kerr.InvalidTxnState.Code))
			return resp
		}
	}
	g := c.lockGroup(r.Group, generation < 0)
	if g == nil {
		if code := c.status(r.Group); code != 0 {
			codes.fill(code)
			return resp
		}
		codes.fill(kerr.IllegalGeneration.Code)
		return resp
	}
	if code := g.validateTxnCommit(memberID, instanceID, generation); code != 0 {
		codes.fill(code)
		if g.removable() {
			c.removeGroup(g)
		}
		c.unlockAndComplete(g, "transactional offset commit")
		return resp
	}
	if len(offs) == 0 {
		if g.removable() {
			c.removeGroup(g)
		}
		c.unlockAndComplete(g, "transactional offset commit")
		return resp
	}
	part := PartitionFor(g.id, c.cfg.NumPartitions)
	keys := make([]tp, 0, len(offs))
	for k := range offs {
		keys = append(keys, k)
	}
	sortTPs(keys)
	recs := make([]record.Record, 0, len(keys))
	for _, k := range keys {
		recs = append(recs, record.Record{Key: offsetKey(g.id, k), Value: offsetValue(offs[k])})
	}
	// Appended under the lock (log order) and recorded as pending at once,
	// so that the transaction's marker, whenever it comes, finds them;
	// waited for without the lock, and taken back if the write fails.
	b, err := buildTxnBatch(now, r.ProducerID, r.ProducerEpoch, recs)
	var wait func(context.Context) error
	if err == nil {
		wait, err = c.store.AppendTxn(part, b)
	}
	var order int64
	if err == nil {
		order = c.nextOrder()
		c.addPending(g, r.ProducerID, offs, order)
		g.mu.Unlock()
		if err = c.waitDurable(wait); err != nil {
			err = fmt.Errorf("__consumer_offsets-%d: %w", part, err)
		}
		g.mu.Lock()
	}
	defer g.mu.Unlock()
	if err != nil {
		c.logger.Warn("store transactional offset commit", "group", g.id, "producer_id", r.ProducerID, "err", err)
		codes.fill(txnErrorCode(err, storeErrorCode(err, kerr.InvalidCommitOffsetSize.Code)))
		c.dropPendingWrite(g, r.ProducerID, order)
		if g.removable() {
			c.removeGroup(g)
		}
		return resp
	}
	return resp
}

// dropPendingWrite takes back the pending transactional offsets of pid
// recorded by the write of order that failed (g.mu held).
func (c *Coordinator) dropPendingWrite(g *group, pid int64, order int64) {
	pend := g.txn[pid]
	if order == 0 || pend == nil {
		return
	}
	for k, o := range pend {
		if o.order == order {
			delete(pend, k)
		}
	}
	if len(pend) == 0 {
		delete(g.txn, pid)
		c.mu.Lock()
		c.indexTxn(pid, g.id, false)
		c.mu.Unlock()
	}
}

// txnErrorCode returns the code of a producer-state error (fencing, epoch,
// transaction state) wrapped in err, which the client must see as is;
// other errors answer fallback.
func txnErrorCode(err error, fallback int16) int16 {
	for _, e := range []*kerr.Error{
		kerr.InvalidProducerEpoch, kerr.ProducerFenced, kerr.InvalidTxnState,
		kerr.InvalidProducerIDMapping, kerr.TransactionCoordinatorFenced,
		kerr.ConcurrentTransactions, kerr.CoordinatorLoadInProgress,
		kerr.CoordinatorNotAvailable, kerr.NotCoordinator,
	} {
		if errors.Is(err, e) {
			return e.Code
		}
	}
	return fallback
}

// validateTxnCommit is Kafka's TxnOffsetCommit group check (ClassicGroup
// and ConsumerGroup validateOffsetCommit with isTransactional): member,
// instance and generation are checked only when the request carries any
// of them, and the group state is not enforced. It returns 0 when the
// commit may proceed.
func (g *group) validateTxnCommit(memberID string, instanceID *string, generation int32) int16 {
	if g.state == stateDead {
		return kerr.CoordinatorNotAvailable.Code
	}
	if cg := g.consumer; cg != nil {
		if generation < 0 && len(cg.members) == 0 {
			return 0
		}
		m := cg.members[memberID]
		if m == nil {
			return kerr.UnknownMemberID.Code
		}
		if generation != m.epoch {
			// Kafka answers a stale member epoch as ILLEGAL_GENERATION here.
			return kerr.IllegalGeneration.Code
		}
		return 0
	}
	if generation < 0 && g.state == stateEmpty {
		return 0
	}
	if generation >= 0 || memberID != "" || instanceID != nil {
		if _, code := g.validateMember(memberID, instanceID); code != 0 {
			return code
		}
		if generation != g.generation {
			return kerr.IllegalGeneration.Code
		}
	}
	return 0
}

// nextOrder returns the log order of an offset commit just stored. Called
// with the group's lock held, which serializes the group's appends, so the
// order follows the group's records in its partition.
func (c *Coordinator) nextOrder() int64 { return c.order.Add(1) }

// indexTxn adds (or removes) group id from pid's groups. Called with c.mu
// held.
func (c *Coordinator) indexTxn(pid int64, id string, add bool) {
	ids := c.txnGroups[pid]
	if add {
		if ids == nil {
			ids = map[string]bool{}
			c.txnGroups[pid] = ids
		}
		ids[id] = true
		return
	}
	delete(ids, id)
	if len(ids) == 0 {
		delete(c.txnGroups, pid)
	}
}

// addPending records pid's stored transactional offsets of g (a later
// commit of a partition in the same transaction replaces the earlier one).
// Called with g.mu held.
func (c *Coordinator) addPending(g *group, pid int64, offs map[tp]offset, ord int64) {
	if g.txn == nil {
		g.txn = map[int64]map[tp]offset{}
	}
	pend := g.txn[pid]
	if pend == nil {
		pend = map[tp]offset{}
		g.txn[pid] = pend
	}
	for k, o := range offs {
		o.order = ord
		pend[k] = o
	}
	c.mu.Lock()
	c.indexTxn(pid, g.id, true)
	c.mu.Unlock()
}

// takePending removes and returns pid's pending offsets of g. Called with
// g.mu held.
func (c *Coordinator) takePending(g *group, pid int64) map[tp]offset {
	pend := g.txn[pid]
	delete(g.txn, pid)
	c.mu.Lock()
	if c.groups[g.id] == g {
		c.indexTxn(pid, g.id, false)
	}
	c.mu.Unlock()
	return pend
}

// hasPending reports whether some open transaction holds an offset of k
// for g. Called with g.mu held.
func (g *group) hasPending(k tp) bool {
	for _, m := range g.txn {
		if _, ok := m[k]; ok {
			return true
		}
	}
	return false
}

// CompleteTxn is called once a transaction marker for producer pid has been
// appended to __consumer_offsets partition partition (durably): with commit
// it applies the producer's pending offsets of every group in that
// partition (each unless the group has a plain commit of the same
// partition written later in the log), else it drops them. A completion
// reported before Load finishes is applied right after it.
func (c *Coordinator) CompleteTxn(partition int32, pid int64, commit bool) {
	c.mu.Lock()
	if partition < 0 || partition >= c.cfg.NumPartitions {
		c.mu.Unlock()
		return
	}
	switch c.parts[partition].Load() {
	case partLoading:
		c.early = append(c.early, txnCompletion{partition, pid, commit})
		c.mu.Unlock()
		return
	case partUnowned:
		// The marker is in the partition's log: whoever loads it
		// replays it.
		c.mu.Unlock()
		return
	}
	var ids []string
	for id := range c.txnGroups[pid] {
		if PartitionFor(id, c.cfg.NumPartitions) == partition {
			ids = append(ids, id)
		}
	}
	c.mu.Unlock()
	for _, id := range ids {
		g := c.lockGroup(id, false)
		if g == nil {
			c.mu.Lock()
			if c.groups[id] == nil {
				c.indexTxn(pid, id, false)
			}
			c.mu.Unlock()
			continue
		}
		pend := c.takePending(g, pid)
		if commit && len(pend) > 0 {
			n := applyTxnOffsets(g.offsets, pend)
			c.m.commits.Add(float64(n))
		}
		if g.removable() {
			c.removeGroup(g)
		}
		g.mu.Unlock()
	}
}
