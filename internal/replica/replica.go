package replica

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/internal/storage"
)

// TP names a partition.
type TP struct {
	Topic     string
	Partition int32
}

func (tp TP) String() string { return fmt.Sprintf("%s-%d", tp.Topic, tp.Partition) }

// Replica is this broker's replica of one replicated partition: while the
// metadata names this broker leader, it runs the Leader state machine,
// serves followers' fetches and answers acks=all produces; otherwise it is
// a follower whose log a fetcher fills from the leader. The Manager
// creates it and applies metadata changes to it (Manager.Apply).
type Replica struct {
	m   *Manager
	tp  TP
	log *storage.Log

	mu     sync.Mutex
	st     State
	minISR int
	// leader is set while this broker leads at st.LeaderEpoch.
	leader *Leader
	// Follower side.
	fetcher *fetcher // registered with, nil when not fetching
	// wakeFetcher is fetcher, readable without r.mu: a follower's own
	// fsync wakes its fetcher straight from the log's hook.
	wakeFetcher atomic.Pointer[fetcher]
	leaderHW    int64 // high watermark of the last fetch response
	// caughtUp: the last fetch response left this follower at or past
	// the leader's high watermark (Kafka's PartitionFetchState
	// isReplicaInSync: lag known and <= 0); a caught-up follower is never
	// throttled (follower.replication.throttled.rate).
	caughtUp bool
	// pipelined: the leader echoed DurableEndTag at this leader epoch;
	// drained: a no-wait fetch came back empty while an fsync was
	// outstanding (PlanFetch); sentDurable: the fsynced end the last
	// fetch reported.
	pipelined   bool
	drained     bool
	sentDurable int64
	// fenced: the leader answered FENCED_LEADER_EPOCH; no fetch until the
	// metadata brings a newer epoch. backoff: no fetch before.
	fenced  bool
	backoff time.Time
	// leaderBehind counts the fetches in a row the leader refused for not
	// knowing the leader epoch sent (leaderBehindBackoff).
	leaderBehind int
	// changed is closed (and replaced) at every change acks=all waiters
	// must look at: high watermark, ISR, leadership.
	changed chan struct{}
	removed bool
	// attach is how Sync hands the partition its replication state.
	attach func(*Replica)
}

// Log is the replica's log.
func (r *Replica) Log() *storage.Log { return r.log }

// TP is the replica's partition.
func (r *Replica) TP() TP { return r.tp }

// local reads the log's offsets (under r.mu).
func (r *Replica) local() Local {
	return Local{End: r.log.LogEndOffset(), Durable: r.log.DurableEnd(), Start: r.log.LogStartOffset()}
}

func (r *Replica) signal() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// publishHW hands the leader's high watermark to the log (readers, LSO,
// long polls) and wakes acks=all waiters (under r.mu).
func (r *Replica) publishHW() {
	r.log.SetHighWatermark(r.leader.HighWatermark(), nil)
	r.signal()
}

// Leading returns the leader epoch while this broker leads the partition
// and is not fenced from leading (its session lapsed: another broker may
// lead by now).
func (r *Replica) Leading() (epoch int32, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.leader == nil || r.m.cfg.Fenced() {
		return -1, false
	}
	return r.st.LeaderEpoch, true
}

// notLeader explains why this broker may not act as the partition's
// leader now, or returns nil (under r.mu).
func (r *Replica) notLeader() error {
	switch {
	case r.leader == nil:
		return fmt.Errorf("%s is led by %d at epoch %d: %w", r.tp, r.st.Leader, r.st.LeaderEpoch, kerr.NotLeaderForPartition)
	case r.m.cfg.Fenced():
		return fmt.Errorf("%s: this broker's session lapsed, it may no longer lead: %w", r.tp, kerr.NotLeaderForPartition)
	}
	return nil
}

// State returns the metadata state last applied.
func (r *Replica) State() State {
	r.mu.Lock()
	defer r.mu.Unlock()
	return cloneState(r.st)
}

// CheckAppend is called before a produce is appended: not leading is
// NOT_LEADER_OR_FOLLOWER; acks=all with the ISR below min.insync.replicas
// is NOT_ENOUGH_REPLICAS (Partition.appendRecordsToLeader). It returns the
// leader epoch to stamp on the batches.
func (r *Replica) CheckAppend(acks int16) (int32, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.notLeader(); err != nil {
		return -1, err
	}
	if err := r.leader.CheckAppend(acks); err != nil {
		return -1, fmt.Errorf("%s: %w", r.tp, err)
	}
	return r.st.LeaderEpoch, nil
}

// HighWatermarkLagsEpochStart reports whether this broker leads the
// partition with a high watermark still below the start offset of its
// leader epoch (a new leader whose followers have not yet shown it holds
// its predecessor's records committed). Kafka's
// Partition.fetchOffsetForTimestamp then refuses a client's ListOffsets
// for the latest offset (and a timestamp found at or past the high
// watermark) with OFFSET_NOT_AVAILABLE: the end it would answer may lie
// below one already served.
func (r *Replica) HighWatermarkLagsEpochStart() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.leader != nil && r.leader.EpochStart() > r.leader.HighWatermark()
}

// Appended tells the leader its log grew (after any local append: client
// produce, transaction marker, coordinator write).
func (r *Replica) Appended() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.leader != nil && r.leader.LocalChanged(r.local(), r.m.nowMs()) {
		r.publishHW()
	}
}

// WaitAcked waits until an acks=all produce whose records end before
// required is committed (the high watermark covers it:
// Partition.checkEnoughReplicasReachOffset), failing with
// NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR fell below
// min.insync.replicas, NOT_LEADER_OR_FOLLOWER when leadership moved, and
// REQUEST_TIMED_OUT when ctx ends first.
func (r *Replica) WaitAcked(ctx context.Context, required int64) error {
	for {
		r.mu.Lock()
		if err := r.notLeader(); err != nil {
			r.mu.Unlock()
			return fmt.Errorf("before the write was replicated: %w", err)
		}
		done, err := r.leader.Acked(required)
		ch := r.changed
		r.mu.Unlock()
		if done {
			if err != nil {
				return fmt.Errorf("%s: %w", r.tp, err)
			}
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%s: waiting for the ISR to replicate to %d: %v: %w", r.tp, required, ctx.Err(), kerr.RequestTimedOut)
		}
	}
}

// FetchPart is one partition of a follower's Fetch.
type FetchPart struct {
	Replica            int32
	BrokerEpoch        int64 // -1 when the request carries none (before v15)
	CurrentLeaderEpoch int32 // -1: not checked
	FetchOffset        int64
	// DurableEnd is the fsynced end the follower reported with
	// DurableEndTag when HasDurableEnd (its fetch carried the tag).
	DurableEnd       int64
	HasDurableEnd    bool
	LastFetchedEpoch int32 // -1: none (before v12)
	LogStart         int64
	MaxBytes         int64
	MinOneBatch      bool
}

// FetchAnswer is the leader's answer to one partition of a follower's
// fetch. Read holds the record chunks (release after sending).
type FetchAnswer struct {
	Read          storage.ReadResult
	HighWatermark int64
	LogStart      int64
	LastStable    int64
	// Diverging, when set, is the leader's end of the follower's last
	// fetched epoch: the follower truncates and fetches again.
	Diverging *EpochEnd
	// DurableEnd, when >= 0, is the follower's fsynced end as recorded,
	// echoed with DurableEndTag (the fetch carried the tag).
	DurableEnd int64
}

// ServeFetch answers a follower's fetch (Kafka's Partition.fetchRecords
// for a follower): the current leader epoch is checked (KIP-320), the
// follower's last fetched epoch is checked against the leader's history
// (a diverging epoch is answered without records), otherwise records are
// read up to the log end and the follower's position is recorded, which
// may move the high watermark or propose an ISR expansion.
func (r *Replica) ServeFetch(f FetchPart) (FetchAnswer, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.notLeader(); err != nil {
		return FetchAnswer{}, err
	}
	if err := CheckLeaderEpoch(f.CurrentLeaderEpoch, r.st.LeaderEpoch); err != nil {
		return FetchAnswer{}, fmt.Errorf("%s: %w", r.tp, err)
	}
	local := r.local()
	ans := FetchAnswer{LogStart: local.Start, DurableEnd: NoOffset}
	div, err := Divergence(f.LastFetchedEpoch, f.FetchOffset, local.Start, r.log.EndOffsetForEpoch)
	if err != nil {
		return FetchAnswer{}, fmt.Errorf("%s: %w", r.tp, err)
	}
	if div != nil {
		ans.Diverging = div
		ans.HighWatermark, ans.LastStable = r.leader.HighWatermark(), r.log.LastStableOffset()
		return ans, nil
	}
	// Replication throttle, leader side (KIP-73; Kafka's
	// ReplicaManager.shouldLeaderThrottle): a partition named by
	// leader.replication.throttled.replicas for this broker is answered
	// without records while leader.replication.throttled.rate is exceeded,
	// unless the follower is in the ISR ("to avoid ISR thrashing"). The
	// bytes of every throttled partition sent count, in sync or not
	// (KafkaApis.sizeOfThrottledPartitions).
	q := r.m.cfg.LeaderQuota
	throttled := q.IsThrottled(r.tp.Topic, r.tp.Partition)
	var res storage.ReadResult
	if throttled && !slices.Contains(r.st.ISR, f.Replica) && q.Exceeded() {
		q.Skipped()
	} else {
		res, err = r.log.ReadUpToEnd(f.FetchOffset, f.MaxBytes, f.MinOneBatch)
		if err != nil {
			return FetchAnswer{}, err
		}
		if throttled {
			var n int64
			for _, c := range res.Chunks {
				n += c.Len
			}
			q.Record(n)
		}
	}
	durable := NoOffset
	if f.HasDurableEnd {
		durable = max(f.DurableEnd, 0)
	}
	fr, err := r.leader.FollowerFetchDurable(f.Replica, f.BrokerEpoch, f.FetchOffset, durable, f.LogStart, local, r.m.nowMs())
	if err != nil {
		res.Release()
		return FetchAnswer{}, fmt.Errorf("%s: %w", r.tp, err)
	}
	if fr.HWChanged {
		r.publishHW()
	}
	if fr.Change != nil {
		r.m.propose(r, fr.Change)
	}
	// The high watermark after recording this fetch: the follower learns
	// it one round earlier than Kafka's (which answers the value read
	// before); it is committed either way.
	ans.Read = res
	if durable >= 0 {
		ans.DurableEnd = min(durable, f.FetchOffset)
	}
	ans.HighWatermark, ans.LastStable = r.leader.HighWatermark(), r.log.LastStableOffset()
	return ans, nil
}

// prepareLeaderEpoch is applyAll's first step for st: it reports whether
// apply will make this broker lead at a leader epoch newer than the log's
// latest (the epoch to record in the batch). A replica about to become
// leader stops fetching here, so that no follower append moves the log
// end the batched entry names before apply takes the leadership (Kafka's
// makeLeader removes the partition from its fetcher first too).
func (r *Replica) prepareLeaderEpoch(st State) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if st.Leader != r.m.cfg.Local || st.LeaderEpoch < r.st.LeaderEpoch {
		return false
	}
	if r.leader != nil {
		if st.LeaderEpoch <= r.leader.st.LeaderEpoch {
			return false
		}
	} else {
		r.m.unfollow(r)
	}
	return st.LeaderEpoch > r.log.LatestEpoch()
}

// apply brings the replica in line with the partition's committed state
// (Kafka's makeLeader / makeFollower).
func (r *Replica) apply(st State, minISR int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.m.nowMs()
	r.minISR = minISR
	cfg := r.m.leaderConfig(minISR)
	if r.leader != nil {
		r.leader.SetMinISR(minISR)
	}
	if st.Leader == r.m.cfg.Local {
		if r.leader != nil && st.LeaderEpoch >= r.st.LeaderEpoch {
			r.leader.LocalChanged(r.local(), now)
			hw, newEpoch, err := r.leader.Update(st, now)
			if err == nil {
				if newEpoch {
					if err := r.log.AssignEpoch(st.LeaderEpoch); err != nil {
						r.m.logger.Warn("record leader epoch", "partition", r.tp, "epoch", st.LeaderEpoch, "err", err)
					}
				}
				r.st = cloneState(st)
				if hw || newEpoch {
					r.publishHW()
				}
				r.signal()
				return
			}
		}
		if st.LeaderEpoch < r.st.LeaderEpoch {
			return // an older state than the one applied
		}
		// Become leader: the new epoch starts at the log end (KIP-279).
		r.m.unfollow(r)
		if err := r.log.AssignEpoch(st.LeaderEpoch); err != nil {
			r.m.logger.Warn("record leader epoch", "partition", r.tp, "epoch", st.LeaderEpoch, "err", err)
		}
		l, err := NewLeader(cfg, st, r.m.brokersCopy(), r.local(), r.log.HighWatermark(), now)
		if err != nil {
			r.m.logger.Error("become leader", "partition", r.tp, "err", err)
			return
		}
		if st.Recovering {
			// An unclean election (KIP-704 RECOVERING): this replica was
			// out of sync; what the previous leaders committed past its
			// log end is gone. The high watermark it last heard of bounds
			// that from below; the replicas that return count exactly what
			// they truncate (noteTruncation).
			r.m.counts.uncleanLeaderships.Add(1)
			end := r.log.LogEndOffset()
			r.m.logger.Warn("unclean leader election: leading an out-of-sync replica; records committed past its end are lost",
				"partition", r.tp, "epoch", st.LeaderEpoch, "log_end", end, "last_known_hw", r.leaderHW,
				"at_least_lost", max(r.leaderHW-end, 0))
		}
		r.leader = l
		r.st = cloneState(st)
		r.log.SetHighWatermark(l.HighWatermark(), r.m.durableHook(r))
		r.m.logger.Info("leading", "partition", r.tp, "epoch", st.LeaderEpoch, "from", l.EpochStart(), "hw", l.HighWatermark(), "isr", st.ISR)
		r.signal()
		return
	}
	if st.LeaderEpoch < r.st.LeaderEpoch || (st.LeaderEpoch == r.st.LeaderEpoch && st.PartitionEpoch < r.st.PartitionEpoch) {
		return
	}
	if r.leader != nil {
		r.m.logger.Info("no longer leading", "partition", r.tp, "leader", st.Leader, "epoch", st.LeaderEpoch)
		r.leader = nil
		r.log.WakeWaiters() // consumer long polls answer NOT_LEADER_OR_FOLLOWER at once
	}
	if st.LeaderEpoch > r.st.LeaderEpoch || st.Leader != r.st.Leader {
		// A new leader: the lag is unknown again, and whether it counts
		// reported fsynced ends (DurableEndTag) too.
		r.pipelined, r.drained, r.sentDurable = false, false, NoOffset
	}
	if st.LeaderEpoch > r.st.LeaderEpoch {
		r.fenced = false
		r.backoff = time.Time{}
		r.leaderBehind = 0
		r.caughtUp = false // a new leader: the lag is unknown again
	}
	r.st = cloneState(st)
	r.log.SetHighWatermark(FollowerHighWatermark(r.leaderHW, r.local(), r.m.cfg.Durable), r.m.durableHook(r))
	r.signal()
	if st.Leader >= 0 && slices.Contains(st.Replicas, r.m.cfg.Local) {
		r.m.follow(r, st.Leader)
	} else {
		r.m.unfollow(r)
	}
}

// durableAdvanced is the reaction to this replica's own fsync: a leader
// counts it in the high watermark, a follower may fetch again.
func (r *Replica) durableAdvanced() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.leader != nil {
		if r.leader.LocalChanged(r.local(), r.m.nowMs()) {
			r.publishHW()
		}
		return
	}
	r.log.SetHighWatermark(FollowerHighWatermark(r.leaderHW, r.local(), r.m.cfg.Durable), nil)
	if r.fetcher != nil {
		r.fetcher.wakeup()
	}
}

// tick runs the leader's ISR shrink check.
func (r *Replica) tick() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.leader == nil {
		return
	}
	if ch := r.leader.Tick(r.m.nowMs()); ch != nil {
		r.m.logger.Info("shrinking ISR", "partition", r.tp, "change", ch.String())
		r.m.propose(r, ch)
	}
}

// Followers returns the leader's record of every follower (their fetch
// offsets and reported fsynced ends), nil when this broker does not lead.
func (r *Replica) Followers() []Follower {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.leader == nil {
		return nil
	}
	return r.leader.Followers()
}

// Removed reports whether the Manager dropped the replica.
func (r *Replica) Removed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.removed
}

// noteTruncation records a follower truncating its log to offset: below
// its high watermark that is committed records lost, which only an
// unclean election causes (a clean leader holds everything below every
// ISR member's high watermark: KIP-101, KIP-279). Under r.mu.
func (r *Replica) noteTruncation(offset int64) {
	hw := r.log.HighWatermark()
	if offset >= hw {
		return
	}
	lost := hw - offset
	r.m.counts.lostOffsets.Add(lost)
	r.m.logger.Warn("truncating committed records after an unclean leader election",
		"partition", r.tp, "high_watermark", hw, "truncate_to", offset, "lost_offsets", lost, "leader_epoch", r.st.LeaderEpoch)
}

// PreferredReadReplica is the leader's choice of the replica a consumer
// should fetch from (KIP-392; Kafka's ReplicaManager.findPreferredReadReplica
// with its RackAwareReplicaSelector): the candidates are the leader and the
// followers in the ISR whose log holds fetchOffset (end at or past it,
// start at or before it) and whose broker is registered (live reports
// it); a follower in the consumer's rack (sameRack) is chosen only when
// the leader is not in that rack, the most caught-up one (largest end,
// then the latest caught up). It returns -1 for the leader (no preferred
// replica in the answer) or when this broker does not lead.
func (r *Replica) PreferredReadReplica(fetchOffset int64, sameRack, live func(id int32) bool) int32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.notLeader() != nil || sameRack(r.m.cfg.Local) {
		return -1
	}
	best := int32(-1)
	var bestEnd, bestCaught int64
	isr := r.leader.State().ISR
	for _, f := range r.leader.Followers() {
		if !slices.Contains(isr, f.ID) || f.EndOffset < fetchOffset || f.LogStart > fetchOffset || !live(f.ID) || !sameRack(f.ID) {
			continue
		}
		if best < 0 || f.EndOffset > bestEnd || (f.EndOffset == bestEnd && f.LastCaughtUpMs > bestCaught) {
			best, bestEnd, bestCaught = f.ID, f.EndOffset, f.LastCaughtUpMs
		}
	}
	return best
}

// CheckFollowerRead checks a consumer fetch served by this broker as a
// follower (KIP-392: Fetch v11+ may read from any replica up to its high
// watermark): the request's current leader epoch against the one this
// replica knows (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH, KIP-320; -1
// is not checked); a replica leading, removed or not following is
// NOT_LEADER_OR_FOLLOWER (the caller then answers as for any
// non-leader).
func (r *Replica) CheckFollowerRead(currentLeaderEpoch int32) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.removed || r.leader != nil || !slices.Contains(r.st.Replicas, r.m.cfg.Local) {
		return fmt.Errorf("%s: not a follower here: %w", r.tp, kerr.NotLeaderForPartition)
	}
	if err := CheckLeaderEpoch(currentLeaderEpoch, r.st.LeaderEpoch); err != nil {
		return fmt.Errorf("%s: %w", r.tp, err)
	}
	return nil
}
