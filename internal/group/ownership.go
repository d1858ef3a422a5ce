package group

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/internal/record"
)

// Which __consumer_offsets partitions this coordinator serves (Kafka's
// GroupMetadataManager ownedPartitions / loadingPartitions). A single node
// owns every partition: they are loading until Load. In a cluster
// (Config.Partitioned) the coordinator of a group is the leader of the
// group's partition: the broker calls LoadPartition when it becomes the
// leader and UnloadPartition when it stops leading (Kafka's
// GroupCoordinator.onElection / onResignation).
const (
	partUnowned int32 = iota // NOT_COORDINATOR
	partLoading              // COORDINATOR_LOAD_IN_PROGRESS
	partLoaded               // served
)

// status is the error code a request about groupID gets before anything
// else: NOT_COORDINATOR when this coordinator does not own its partition,
// COORDINATOR_LOAD_IN_PROGRESS while the partition loads, 0 when served
// (Kafka's GroupCoordinator.validateGroupStatus).
func (c *Coordinator) status(groupID string) int16 {
	p := PartitionFor(groupID, c.cfg.NumPartitions)
	st := c.parts[p].Load()
	if st == partUnowned && c.cfg.Leads != nil && c.cfg.Leads(p) {
		st = partLoading // led, about to be loaded
	}
	return partCode(st)
}

func partCode(st int32) int16 {
	switch st {
	case partUnowned:
		return kerr.NotCoordinator.Code
	case partLoading:
		return kerr.CoordinatorLoadInProgress.Code
	}
	return 0
}

// loading reports whether a partition is being loaded (ListGroups answers
// COORDINATOR_LOAD_IN_PROGRESS meanwhile, as Kafka's handleListGroups).
func (c *Coordinator) loading() bool {
	for i := range c.parts {
		if c.parts[i].Load() == partLoading {
			return true
		}
	}
	return false
}

// Owns reports whether this coordinator serves __consumer_offsets
// partition p (loaded).
func (c *Coordinator) Owns(p int32) bool {
	return p >= 0 && p < int32(len(c.parts)) && c.parts[p].Load() == partLoaded
}

// Load replays every __consumer_offsets partition, rebuilding groups and
// committed offsets, then starts the offset expiry timer (a single node,
// which coordinates every partition).
func (c *Coordinator) Load(ctx context.Context) error {
	all := make([]int32, c.cfg.NumPartitions)
	for p := range all {
		all[p] = int32(p)
		c.parts[p].Store(partLoading)
	}
	return c.load(ctx, all, 0)
}

// LoadPartition makes this coordinator the coordinator of the groups of
// __consumer_offsets partition p, which this broker now leads: requests
// about them answer COORDINATOR_LOAD_IN_PROGRESS until the partition's log
// is replayed, then are served (Kafka's
// GroupMetadataManager.scheduleLoadGroupAndOffsets). A partition already
// owned is left as it is. Calls for one partition must not overlap (the
// broker makes them from one goroutine, as Kafka's single
// group-metadata-manager scheduler thread).
func (c *Coordinator) LoadPartition(ctx context.Context, p int32) error {
	if p < 0 || p >= c.cfg.NumPartitions {
		return fmt.Errorf("__consumer_offsets-%d: no such partition (%d partitions)", p, c.cfg.NumPartitions)
	}
	if !c.parts[p].CompareAndSwap(partUnowned, partLoading) {
		return nil
	}
	if l := c.store.Log(p); l != nil {
		if err := l.Uncommitted(); err != nil {
			c.parts[p].Store(partUnowned)
			return fmt.Errorf("load __consumer_offsets-%d: %w", p, err)
		}
	}
	if err := c.load(ctx, []int32{p}, loadCommitWait); err != nil {
		c.parts[p].Store(partUnowned)
		return err
	}
	return nil
}

// load replays partitions ps (each partLoading), waits until each one's
// high watermark covers what was replayed (at most commitWait each, 0:
// as long as ctx lasts) and serves them.
func (c *Coordinator) load(ctx context.Context, ps []int32, commitWait time.Duration) error {
	start := time.Now()
	r := newReplayer()
	r.order = c.order.Load()
	ends := make(map[int32]int64, len(ps))
	for _, p := range ps {
		if err := ctx.Err(); err != nil {
			return err
		}
		r.nextPartition()
		fn := func(b []byte) error { return r.applyBatch(record.Batch(b)) }
		var err error
		if rp, ok := c.store.(Replayer); ok {
			err = rp.Replay(p, fn)
		} else if l := c.store.Log(p); l != nil {
			ends[p], err = replayLog(l, fn)
		}
		if err != nil {
			return fmt.Errorf("load __consumer_offsets-%d: %w", p, err)
		}
	}
	for _, p := range ps {
		if l := c.store.Log(p); l != nil {
			if err := l.WaitCommitted(ctx, ends[p], commitWait); err != nil {
				return fmt.Errorf("load __consumer_offsets-%d: %w", p, err)
			}
		}
		if c.cfg.Leads != nil && !c.cfg.Leads(p) {
			// Leadership moved while loading: a follower's log may be
			// cut back under what was replayed.
			return fmt.Errorf("load __consumer_offsets-%d: no longer its leader: %w", p, kerr.NotCoordinator)
		}
	}
	for {
		// Commits stored meanwhile in other partitions moved the order on;
		// orders compare only within a group, so the larger one stays.
		cur := c.order.Load()
		if cur >= r.order || c.order.CompareAndSwap(cur, r.order) {
			break
		}
	}
	loadedSet := make(map[int32]bool, len(ps))
	for _, p := range ps {
		loadedSet[p] = true
	}
	c.mu.Lock()
	pending, n := 0, 0
	for id, lg := range r.groups {
		if lg.meta == nil && len(lg.offsets) == 0 && len(lg.txn) == 0 && len(lg.consumer) == 0 {
			continue
		}
		g := newGroup(id, c.env)
		g.offsets = lg.offsets
		if len(lg.txn) > 0 {
			g.txn = lg.txn
			for pid := range lg.txn {
				c.indexTxn(pid, id, true)
			}
			pending += len(lg.txn)
		}
		if lg.meta != nil {
			g.restore(lg.meta)
			g.stored = lg.meta // what a failed write reverts to (write.go)
			g.mu.Lock()
			if g.overCapacity() {
				g.prepareRebalance()
			}
			g.mu.Unlock()
		}
		if len(lg.consumer) > 0 {
			g.cstored = make(map[string]storedRecord, len(lg.consumer))
			for k, v := range lg.consumer {
				g.cstored[k] = storedRecord{value: v}
			}
			c.rebuildConsumer(g, lg.consumer)
		}
		c.groups[id] = g
		n++
	}
	var early, later []txnCompletion
	for _, e := range c.early {
		if loadedSet[e.partition] {
			early = append(early, e)
		} else {
			later = append(later, e)
		}
	}
	c.early = later
	for _, p := range ps {
		c.parts[p].Store(partLoaded)
	}
	first := c.expiryTimer == nil
	c.mu.Unlock()
	for _, e := range early {
		c.CompleteTxn(e.partition, e.pid, e.commit)
	}
	if first {
		c.scheduleExpiry()
	}
	if r.skipped > 0 {
		c.logger.Warn("skipped undecodable __consumer_offsets records", "count", r.skipped, "last_err", r.lastErr)
	}
	if len(ps) == 1 {
		c.logger.Info("loaded consumer groups", "partition", ps[0], "groups", n, "records", r.records, "pending_txn_commits", pending, "took", time.Since(start))
	} else {
		c.logger.Info("loaded consumer groups", "partitions", len(ps), "groups", n, "records", r.records, "pending_txn_commits", pending, "took", time.Since(start))
	}
	return nil
}

// UnloadPartition stops coordinating the groups of __consumer_offsets
// partition p, which this broker no longer leads: they are forgotten
// (their state is in the log, which the new leader loads), members
// waiting in JoinGroup or SyncGroup are answered NOT_COORDINATOR, and
// every later request about them answers NOT_COORDINATOR (Kafka's
// GroupMetadataManager.removeGroupsForPartition and
// GroupCoordinator.onGroupUnloaded).
func (c *Coordinator) UnloadPartition(p int32) {
	if p < 0 || p >= c.cfg.NumPartitions {
		return
	}
	c.mu.Lock()
	was := c.parts[p].Swap(partUnowned)
	var gs []*group
	for id, g := range c.groups {
		if PartitionFor(id, c.cfg.NumPartitions) == p {
			gs = append(gs, g)
		}
	}
	kept := c.early[:0]
	for _, e := range c.early {
		if e.partition != p {
			kept = append(kept, e)
		}
	}
	c.early = kept
	c.mu.Unlock()
	for _, g := range gs {
		g.mu.Lock()
		if g.state != stateDead {
			g.unload()
			c.removeGroup(g)
		}
		g.mu.Unlock()
	}
	if was != partUnowned {
		c.logger.Info("unloaded consumer groups", "partition", p, "groups", len(gs))
	}
}

// unload answers every parked JoinGroup and SyncGroup of g with
// NOT_COORDINATOR and stops its timers. Called with g.mu held.
func (g *group) unload() {
	stopTimer(g.joinTimer)
	g.joinSeq++
	g.clearPendingSync()
	g.stopConsumerTimers()
	for id, t := range g.pending {
		stopTimer(t)
		delete(g.pending, id)
	}
	for _, m := range g.members {
		stopTimer(m.hbTimer)
		m.hbSeq++
		if m.joinCh != nil {
			m.joinCh <- joinResult{err: kerr.NotCoordinator.Code, memberID: m.id}
			m.joinCh = nil
		}
		if m.syncCh != nil {
			m.syncCh <- syncResult{err: kerr.NotCoordinator.Code}
			m.syncCh = nil
		}
	}
}
