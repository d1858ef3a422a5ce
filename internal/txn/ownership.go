package txn

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Which __transaction_state partitions this coordinator serves (Kafka's
// TransactionStateManager loadingPartitions and transactionMetadataCache).
// A single node owns every partition: they are loading until Load. In a
// cluster (Config.Partitioned) the coordinator of a transactional id is the
// leader of its partition: the broker calls LoadPartition when it becomes
// the leader and UnloadPartition when it stops leading (Kafka's
// TransactionCoordinator.onElection / onResignation).
const (
	partUnowned int32 = iota // NOT_COORDINATOR
	partLoading              // COORDINATOR_LOAD_IN_PROGRESS
	partLoaded               // served
)

// availability returns the error a request about transactional id gets
// before anything else (Kafka's TransactionStateManager.getTransactionState:
// COORDINATOR_NOT_AVAILABLE once closed, NOT_COORDINATOR when this
// coordinator does not own id's partition, COORDINATOR_LOAD_IN_PROGRESS
// while it loads), nil when served.
func (c *Coordinator) availability(id string) *kerr.Error {
	if c.closed.Load() {
		return kerr.CoordinatorNotAvailable
	}
	p := c.partition(id)
	switch c.parts[p].Load() {
	case partUnowned:
		if c.cfg.Leads != nil && c.cfg.Leads(p) {
			return kerr.CoordinatorLoadInProgress // led, about to be loaded
		}
		return kerr.NotCoordinator
	case partLoading:
		return kerr.CoordinatorLoadInProgress
	}
	return nil
}

// serving reports whether transactional id's partition is loaded here
// (the background work touches only those).
func (c *Coordinator) serving(id string) bool {
	return !c.closed.Load() && c.parts[c.partition(id)].Load() == partLoaded
}

// loading reports whether a partition is being loaded (ListTransactions
// answers COORDINATOR_LOAD_IN_PROGRESS meanwhile, as Kafka's
// listTransactionStates).
func (c *Coordinator) loading() bool {
	for i := range c.parts {
		if c.parts[i].Load() == partLoading {
			return true
		}
	}
	return false
}

// Owns reports whether this coordinator serves __transaction_state
// partition p (loaded).
func (c *Coordinator) Owns(p int32) bool {
	return p >= 0 && p < int32(len(c.parts)) && c.parts[p].Load() == partLoaded
}

// partCtx is the context of partition p's marker work, cancelled when p
// is unloaded (Kafka's TransactionMarkerChannelManager
// removeMarkersForTxnTopicPartition).
func (c *Coordinator) partCtx(p int32) context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pctx[p] == nil {
		return c.ctx
	}
	return c.pctx[p]
}

// Load replays every __transaction_state partition, completes the
// transactions a crash left in PrepareCommit/PrepareAbort (markers are
// written again, then CompleteCommit/CompleteAbort), and starts the loop
// that aborts timed-out transactions and expires idle transactional ids
// (a single node, which coordinates every partition).
func (c *Coordinator) Load(ctx context.Context) error {
	if c.closed.Load() {
		return fmt.Errorf("transaction coordinator is closed")
	}
	if c.Owns(0) {
		return fmt.Errorf("transaction coordinator already loaded")
	}
	all := make([]int32, c.cfg.NumPartitions)
	epochs := make([]int32, c.cfg.NumPartitions)
	for p := range all {
		all[p] = int32(p)
		c.parts[p].Store(partLoading)
		if l := c.deps.StateLog(int32(p)); l != nil {
			if es := l.LeaderEpochs(); len(es) > 0 {
				epochs[p] = es[len(es)-1].Epoch
			}
		}
	}
	return c.load(ctx, all, epochs, false, 0)
}

// LoadPartition makes this coordinator the coordinator of the
// transactional ids of __transaction_state partition p, which this broker
// now leads at leader epoch coordinatorEpoch (the epoch markers carry,
// Kafka's coordinatorEpoch): requests about them answer
// COORDINATOR_LOAD_IN_PROGRESS until the partition is replayed, then are
// served. Transactions it inherits in PrepareCommit or PrepareAbort are
// completed in the background (markers written again, then
// CompleteCommit/CompleteAbort), Ongoing ones are aborted by the timeout
// loop once past their timeout: Kafka's
// TransactionStateManager.loadTransactionsForTxnTopicPartition and
// TransactionCoordinator.onElection. A partition already owned is left as
// it is. Calls for one partition must not overlap.
func (c *Coordinator) LoadPartition(ctx context.Context, p, coordinatorEpoch int32) error {
	if p < 0 || p >= c.cfg.NumPartitions {
		return fmt.Errorf("__transaction_state-%d: no such partition (%d partitions)", p, c.cfg.NumPartitions)
	}
	if c.closed.Load() {
		return fmt.Errorf("transaction coordinator is closed")
	}
	if !c.parts[p].CompareAndSwap(partUnowned, partLoading) {
		return nil
	}
	if l := c.deps.StateLog(p); l != nil {
		if err := l.Uncommitted(); err != nil {
			c.parts[p].Store(partUnowned)
			return fmt.Errorf("load __transaction_state-%d: %w", p, err)
		}
	}
	epochs := make([]int32, c.cfg.NumPartitions)
	epochs[p] = coordinatorEpoch
	if err := c.load(ctx, []int32{p}, epochs, true, loadCommitWait); err != nil {
		c.parts[p].Store(partUnowned)
		return err
	}
	return nil
}

// load replays partitions ps (each partLoading), waits until each one's
// high watermark covers what was replayed (at most commitWait each, 0: as
// long as ctx lasts) and serves them; the unfinished transactions are
// completed inline, or in the background with async.
func (c *Coordinator) load(ctx context.Context, ps []int32, epochs []int32, async bool, commitWait time.Duration) error {
	start := time.Now()
	r := newReplayer()
	ends := make(map[int32]int64, len(ps))
	for _, p := range ps {
		if err := ctx.Err(); err != nil {
			return err
		}
		l := c.deps.StateLog(p)
		if l == nil {
			continue
		}
		end, err := replayLog(l, r.applyBatch)
		if err != nil {
			return fmt.Errorf("load __transaction_state-%d: %w", p, err)
		}
		ends[p] = end
	}
	for _, p := range ps {
		if l := c.deps.StateLog(p); l != nil {
			if err := l.WaitCommitted(ctx, ends[p], commitWait); err != nil {
				return fmt.Errorf("load __transaction_state-%d: %w", p, err)
			}
		}
		if c.cfg.Leads != nil && !c.cfg.Leads(p) {
			// Leadership moved while loading: a follower's log may be
			// cut back under what was replayed.
			return fmt.Errorf("load __transaction_state-%d: no longer its leader: %w", p, kerr.NotCoordinator)
		}
	}
	if r.skipped > 0 {
		c.logger.Warn("skipped undecodable __transaction_state records", "count", r.skipped, "last_err", r.lastErr)
	}
	mine := make(map[int32]bool, len(ps))
	for _, p := range ps {
		mine[p] = true
	}
	c.mu.Lock()
	var unfinished []*txnMeta
	n := 0
	for id, m := range r.txns {
		if !mine[c.partition(id)] {
			continue // a record filed in the wrong partition: not ours
		}
		c.txns[id] = m
		n++
		if m.state == statePrepareCommit || m.state == statePrepareAbort {
			unfinished = append(unfinished, m)
		}
	}
	for _, p := range ps {
		c.coordEpochs[p] = epochs[p]
		if c.pcancel[p] != nil {
			c.pcancel[p]()
		}
		c.pctx[p], c.pcancel[p] = context.WithCancel(c.ctx)
		c.parts[p].Store(partLoaded)
	}
	if !c.looping && !c.closed.Load() {
		c.looping = true
		c.startLoop()
	}
	c.mu.Unlock()
	if len(ps) == 1 {
		c.logger.Info("loaded __transaction_state", "partition", ps[0], "coordinator_epoch", epochs[ps[0]],
			"transactional_ids", n, "records", r.records, "unfinished", len(unfinished), "took", time.Since(start))
	} else {
		c.logger.Info("loaded __transaction_state", "transactional_ids", n, "records", r.records,
			"unfinished", len(unfinished), "took", time.Since(start))
	}
	if !async {
		for _, m := range unfinished {
			c.complete(m)
		}
		return nil
	}
	if len(unfinished) > 0 {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			for _, m := range unfinished {
				c.complete(m)
			}
		}()
	}
	return nil
}

// UnloadPartition stops coordinating the transactional ids of
// __transaction_state partition p, which this broker no longer leads:
// they are forgotten (the new leader loads them from the log), marker
// work for them is cancelled, and later requests about them answer
// NOT_COORDINATOR (Kafka's
// TransactionStateManager.removeTransactionsForTxnTopicPartition).
func (c *Coordinator) UnloadPartition(p int32) {
	if p < 0 || p >= c.cfg.NumPartitions {
		return
	}
	c.mu.Lock()
	was := c.parts[p].Swap(partUnowned)
	if c.pcancel[p] != nil {
		c.pcancel[p]()
		c.pctx[p], c.pcancel[p] = nil, nil
	}
	n := 0
	for id := range c.txns {
		if c.partition(id) == p {
			delete(c.txns, id)
			n++
		}
	}
	c.mu.Unlock()
	if was != partUnowned {
		c.logger.Info("unloaded __transaction_state", "partition", p, "transactional_ids", n)
	}
}
