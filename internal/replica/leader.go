package replica

import (
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

// NoOffset is an offset not known yet (Kafka's UnifiedLog.UnknownOffset).
const NoOffset int64 = -1

// noBrokerEpoch marks a follower that has not fetched since the leader
// took over (Kafka's ReplicaState.brokerEpoch = None).
const noBrokerEpoch int64 = -2

// Config is what the leader of one partition needs of the topic and broker
// settings.
type Config struct {
	// Local is this broker's node.id.
	Local int32
	// BrokerEpoch is this broker's epoch (KIP-903): its ISR changes are
	// valid only while its registration is still this incarnation.
	BrokerEpoch int64
	// MinISR is the topic's min.insync.replicas.
	MinISR int
	// LagTimeMaxMs is replica.lag.time.max.ms (Kafka's default 30000).
	LagTimeMaxMs int64
	// Durable is strata.durable.acks: the leader's own end in the high
	// watermark is its fsynced end, and followers report fsynced ends.
	Durable bool
}

// State is a partition's replication state as committed in the cluster
// metadata (meta.PartitionState): the leader never changes it directly; it
// proposes IsrChanges and learns the outcome from the next State.
type State struct {
	Leader         int32
	LeaderEpoch    int32
	PartitionEpoch int32
	Replicas       []int32
	ISR            []int32
	// Recovering is set after an unclean election (KIP-704
	// LeaderRecoveryState): the leader was not in the ISR.
	Recovering bool
}

// Broker is what the leader knows of a registered (unfenced) broker.
type Broker struct {
	// Epoch is the broker epoch of its current registration (KIP-903).
	Epoch int64
	// ShuttingDown is set while it moves leadership off itself
	// (controlled shutdown): it may not join an ISR.
	ShuttingDown bool
}

// Local is the leader's own log as the shell reports it.
type Local struct {
	End     int64 // log end offset
	Durable int64 // fsynced end offset (== End when nothing is pending)
	Start   int64 // log start offset
}

// Follower is the leader's record of one follower (Kafka's ReplicaState).
type Follower struct {
	ID int32
	// EndOffset is the fetch offset of its last fetch: its log end offset
	// (Kafka's ReplicaState.logEndOffset, from Replica.updateFetchState).
	// NoOffset until it fetched from this leader. A follower that does not
	// send DurableEndTag fetches under strata.durable.acks from its fsynced
	// end, so then both ends are that.
	EndOffset int64
	// DurableEnd is the fsynced end it reported with DurableEndTag, or
	// EndOffset when its fetch had none: under strata.durable.acks the
	// high watermark and ISR expansion count this end.
	DurableEnd int64
	// LogStart is the log start offset it reported.
	LogStart int64
	// LastFetchMs is when its last fetch arrived, LastFetchLeaderEnd the
	// leader's log end offset at that fetch.
	LastFetchMs        int64
	LastFetchLeaderEnd int64
	// LastDurableMs is the latest fetch at which its reported fsynced end
	// had advanced or covered its fetch offset (durableProgress).
	LastDurableMs int64
	// LastCaughtUpMs is the latest time at which it had fetched up to the
	// leader's log end offset of that moment.
	LastCaughtUpMs int64
	// BrokerEpoch is the epoch its fetches carried (Fetch v15
	// ReplicaState, KIP-903); -1 when the request had none.
	BrokerEpoch int64
}

// IsrChange is an ISR change the leader wants committed: Kafka's
// AlterPartition (KIP-497). The shell writes it as a compare-and-set on the
// partition's metadata key: it applies only if the stored leader epoch and
// partition epoch still equal LeaderEpoch and PartitionEpoch, the leader's
// registration is still at LeaderBrokerEpoch (a restarted leader's old
// proposals are void, as Kafka's STALE_BROKER_EPOCH), and (KIP-903) every
// added replica's registration still has the broker epoch in AddedEpochs.
type IsrChange struct {
	LeaderEpoch       int32
	PartitionEpoch    int32
	LeaderBrokerEpoch int64
	ISR               []int32
	Added             []int32
	Removed           []int32
	AddedEpochs       map[int32]int64
	// retry marks a change whose commit failed without an answer (the
	// metadata store was unreachable): it is submitted again.
	retry bool
}

// String is a compact, stable form for logs and transcripts.
func (c *IsrChange) String() string {
	s := fmt.Sprintf("isr=%v", c.ISR)
	if len(c.Added) > 0 {
		s += fmt.Sprintf(" expand=%v", c.Added)
	}
	if len(c.Removed) > 0 {
		s += fmt.Sprintf(" shrink=%v", c.Removed)
	}
	return s + fmt.Sprintf(" at epoch=%d pepoch=%d", c.LeaderEpoch, c.PartitionEpoch)
}

// Leader is the leader-side replication state of one partition led by
// this broker at one leader epoch. It is not safe for concurrent use: the
// shell serialises calls.
type Leader struct {
	cfg     Config
	st      State
	brokers map[int32]Broker
	// pending is the ISR change in flight, nil when the state is
	// committed (Kafka's PendingExpandIsr / PendingShrinkIsr).
	pending    *IsrChange
	epochStart int64
	hw         int64
	local      Local
	followers  map[int32]*Follower
}

// NewLeader makes this broker the leader of a partition at st.LeaderEpoch
// (Kafka's Partition.makeLeader with a new leader epoch). local is the
// log as it is now; its end offset becomes the leader epoch start offset,
// which the shell records in the log's leader epoch history (KIP-279:
// the new epoch is cached before any write so that followers holding later
// epochs can truncate). hw is the log's current high watermark. Followers
// in the ISR count as caught up now; the others not at all (Kafka's
// Replica.resetReplicaState).
func NewLeader(cfg Config, st State, brokers map[int32]Broker, local Local, hw int64, nowMs int64) (*Leader, error) {
	if st.Leader != cfg.Local {
		return nil, fmt.Errorf("partition led by %d at epoch %d, not by this broker %d: %w", st.Leader, st.LeaderEpoch, cfg.Local, kerr.NotLeaderForPartition)
	}
	l := &Leader{cfg: cfg, st: cloneState(st), brokers: brokers, local: local, followers: map[int32]*Follower{}}
	l.epochStart = local.End
	l.hw = min(max(hw, local.Start), local.End)
	l.syncFollowers(nowMs, true)
	l.maybeIncrementHW(nowMs)
	return l, nil
}

func newFollower(id int32) *Follower {
	return &Follower{ID: id, EndOffset: NoOffset, DurableEnd: NoOffset, LogStart: NoOffset, LastFetchLeaderEnd: NoOffset, BrokerEpoch: noBrokerEpoch}
}

func cloneState(st State) State {
	st.Replicas = slices.Clone(st.Replicas)
	st.ISR = slices.Clone(st.ISR)
	return st
}

// syncFollowers adds and removes follower records to match the replica
// set; reset re-initialises them as Kafka's resetReplicaState does when
// leadership (or the leader epoch) changes.
func (l *Leader) syncFollowers(nowMs int64, newLeader bool) {
	for id := range l.followers {
		if !slices.Contains(l.st.Replicas, id) {
			delete(l.followers, id)
		}
	}
	for _, id := range l.st.Replicas {
		if id == l.cfg.Local {
			continue
		}
		f := l.followers[id]
		if f == nil || newLeader {
			f = newFollower(id)
			l.followers[id] = f
		}
		if slices.Contains(l.st.ISR, id) {
			f.LastCaughtUpMs = nowMs
			f.LastDurableMs = nowMs
			if !newLeader {
				f.LastFetchMs = nowMs
			}
		} else {
			f.LastCaughtUpMs = 0
			if !newLeader {
				f.LastFetchMs = 0
			}
		}
		if !newLeader {
			f.LastFetchLeaderEnd = l.epochStart
		}
	}
}

// Update applies a newer committed state of the partition (from the
// metadata watch). It returns an error wrapping NOT_LEADER_OR_FOLLOWER when
// this broker no longer leads at this leader epoch: the shell then drops
// this Leader. newEpoch is true when this broker leads again at a higher
// leader epoch (a reassignment or re-election): the shell records the new
// epoch start (EpochStart) in the log's history. A state older than the one
// held (lower partition epoch) is ignored, as Kafka's makeLeader does, and
// so is the state already held (same partition epoch): the shell applies
// the view level-triggered, at every change of anything in it, and the
// same state commits nothing, so a change in flight stays in flight (its
// added replica keeps counting in the high watermark until the answer:
// Kafka's PendingExpandIsr). A newer committed state replaces any change
// in flight.
func (l *Leader) Update(st State, nowMs int64) (hwChanged, newEpoch bool, err error) {
	if st.Leader != l.cfg.Local || st.LeaderEpoch < l.st.LeaderEpoch {
		return false, false, fmt.Errorf("partition now led by %d at epoch %d: %w", st.Leader, st.LeaderEpoch, kerr.NotLeaderForPartition)
	}
	if st.LeaderEpoch == l.st.LeaderEpoch && st.PartitionEpoch <= l.st.PartitionEpoch {
		return false, false, nil
	}
	newEpoch = st.LeaderEpoch > l.st.LeaderEpoch
	l.st = cloneState(st)
	l.pending = nil
	if newEpoch {
		l.epochStart = l.local.End
		l.syncFollowers(nowMs, false)
	} else {
		// Kafka resets the follower timers only on a new leader epoch;
		// here replicas may have been added or removed.
		for id := range l.followers {
			if !slices.Contains(l.st.Replicas, id) {
				delete(l.followers, id)
			}
		}
		for _, id := range l.st.Replicas {
			if id != l.cfg.Local && l.followers[id] == nil {
				l.followers[id] = newFollower(id)
			}
		}
	}
	return l.maybeIncrementHW(nowMs), newEpoch, nil
}

// SetMinISR applies a changed min.insync.replicas.
func (l *Leader) SetMinISR(n int) { l.cfg.MinISR = n }

// SetBrokers replaces the set of registered brokers (from the metadata
// watch). Fenced brokers are absent.
func (l *Leader) SetBrokers(b map[int32]Broker) { l.brokers = b }

// AlterFailed is told that the change in flight was not applied (its
// compare-and-set lost): the leader returns to the last committed state
// and may propose again (Kafka's handleAlterPartitionError on
// OPERATION_NOT_ATTEMPTED / INELIGIBLE_REPLICA). A failure whose outcome
// is unknown (metadata store unreachable) should not be reported: the
// change stays in flight until the next committed state arrives.
func (l *Leader) AlterFailed(c *IsrChange) {
	if l.pending == c {
		l.pending = nil
	}
}

// Pending returns the ISR change in flight, or nil.
func (l *Leader) Pending() *IsrChange { return l.pending }

// LocalChanged records the leader's own log after an append, an fsync or
// a log start change, and may advance the high watermark (an ISR of one
// replica, or under durable acks the leader's own fsync being the last to
// arrive).
func (l *Leader) LocalChanged(local Local, nowMs int64) (hwChanged bool) {
	l.local = local
	return l.maybeIncrementHW(nowMs)
}

// FetchResult is the leader's reaction to a follower's fetch.
type FetchResult struct {
	// HWChanged is set when the high watermark advanced: waiting acks=all
	// produces and long-polling fetches are woken.
	HWChanged bool
	// Change is an ISR expansion to commit, or nil.
	Change *IsrChange
}

// FollowerFetch records a follower's fetch at fetchOffset (after the shell
// checked its leader epoch and found no diverging epoch; Kafka's
// Partition.fetchRecords then updateFollowerFetchState). local is the
// leader's log as read before serving the fetch. brokerEpoch is the
// ReplicaState.ReplicaEpoch of Fetch v15+, -1 before. Errors: a replica not
// in the replica set wraps UNKNOWN_LEADER_EPOCH (it retries, as Kafka's
// followerReplicaOrThrow), a broker epoch older than the registered one
// NOT_LEADER_OR_FOLLOWER (a fetch from a previous incarnation, KIP-903).
func (l *Leader) FollowerFetch(id int32, brokerEpoch, fetchOffset, logStart int64, local Local, nowMs int64) (FetchResult, error) {
	return l.FollowerFetchDurable(id, brokerEpoch, fetchOffset, NoOffset, logStart, local, nowMs)
}

// FollowerFetchDurable is FollowerFetch for a fetch that also reports the
// follower's fsynced end (durableEnd, from DurableEndTag; NoOffset when
// the fetch had none: its fetch offset then counts as fsynced, the rule
// for followers that fetch only once they fsynced). The fetch offset is
// the follower's log end, which drives what is read, its caught-up time
// and so ISR shrinking, as in Kafka; under strata.durable.acks the high
// watermark and ISR expansion use the durable end (see hwEnd of a
// follower, maybeIncrementHW, maybeExpandISR).
func (l *Leader) FollowerFetchDurable(id int32, brokerEpoch, fetchOffset, durableEnd, logStart int64, local Local, nowMs int64) (FetchResult, error) {
	f := l.followers[id]
	if f == nil {
		return FetchResult{}, fmt.Errorf("replica %d is not a replica of this partition at leader epoch %d: %w", id, l.st.LeaderEpoch, kerr.UnknownLeaderEpoch)
	}
	if b, ok := l.brokers[id]; ok && brokerEpoch != -1 && b.Epoch > brokerEpoch {
		return FetchResult{}, fmt.Errorf("fetch from replica %d with broker epoch %d, registered %d: %w", id, brokerEpoch, b.Epoch, kerr.NotLeaderForPartition)
	}
	l.local = local
	prevEnd, prevDurable := f.EndOffset, f.DurableEnd
	// Replica.updateFetchStateOrThrow: caught up now if the fetch reached
	// the leader's end; caught up at the previous fetch if this one
	// reached what the leader's end was then.
	switch {
	case fetchOffset >= local.End:
		f.LastCaughtUpMs = max(f.LastCaughtUpMs, nowMs)
	case fetchOffset >= f.LastFetchLeaderEnd:
		f.LastCaughtUpMs = max(f.LastCaughtUpMs, f.LastFetchMs)
	}
	f.EndOffset = fetchOffset
	f.DurableEnd = fetchOffset
	if durableEnd >= 0 {
		f.DurableEnd = min(durableEnd, fetchOffset)
	}
	if f.DurableEnd > prevDurable || f.DurableEnd >= f.EndOffset {
		f.LastDurableMs = nowMs
	}
	f.LogStart = logStart
	f.LastFetchLeaderEnd = max(local.End, f.LastFetchLeaderEnd)
	f.LastFetchMs = nowMs
	f.BrokerEpoch = brokerEpoch
	var res FetchResult
	res.Change = l.maybeExpandISR(f)
	if prevEnd != f.EndOffset || prevDurable != f.DurableEnd || res.Change != nil {
		res.HWChanged = l.maybeIncrementHW(nowMs)
	}
	return res, nil
}

// maybeExpandISR proposes adding f to the ISR once it is eligible and in
// sync (Kafka's Partition.maybeExpandIsr / isFollowerInSync): its end is
// at or past the high watermark and past the start of the current leader
// epoch, so it holds every committed record, including any the new leader
// inherited above its high watermark. Under strata.durable.acks that end
// is its fsynced end (followerEnd): an ISR member may be elected, so it
// must hold every committed record durably, not in its page cache only.
// The change counts at once in the maximal ISR (it only makes the high
// watermark stricter).
func (l *Leader) maybeExpandISR(f *Follower) *IsrChange {
	if l.pending != nil || slices.Contains(l.st.ISR, f.ID) || !l.eligible(f) {
		return nil
	}
	if end := l.followerEnd(f); end < l.hw || end < l.epochStart {
		return nil
	}
	isr := l.ordered(append(slices.Clone(l.st.ISR), f.ID))
	epochs := map[int32]int64{}
	if b, ok := l.brokers[f.ID]; ok {
		epochs[f.ID] = b.Epoch
	}
	l.pending = &IsrChange{LeaderEpoch: l.st.LeaderEpoch, PartitionEpoch: l.st.PartitionEpoch, LeaderBrokerEpoch: l.cfg.BrokerEpoch,
		ISR: isr, Added: []int32{f.ID}, AddedEpochs: epochs}
	return l.pending
}

// eligible is Kafka's isReplicaIsrEligible (KIP-841, KIP-903): the broker
// is registered (not fenced), not shutting down, and its fetches carry its
// current broker epoch (or none, from an older fetch version).
func (l *Leader) eligible(f *Follower) bool {
	b, ok := l.brokers[f.ID]
	if !ok || b.ShuttingDown || f.BrokerEpoch == noBrokerEpoch {
		return false
	}
	return f.BrokerEpoch == -1 || f.BrokerEpoch == b.Epoch
}

// ordered returns ids in replica-set order (stable ISR lists).
func (l *Leader) ordered(ids []int32) []int32 {
	out := make([]int32, 0, len(ids))
	for _, r := range l.st.Replicas {
		if slices.Contains(ids, r) {
			out = append(out, r)
		}
	}
	return out
}

// caughtUp is Kafka's ReplicaState.isCaughtUp, and under
// strata.durable.acks durableProgress.
func (l *Leader) caughtUp(f *Follower, nowMs int64) bool {
	kafka := f.EndOffset == l.local.End || nowMs-f.LastCaughtUpMs <= l.cfg.LagTimeMaxMs
	return kafka && l.durableProgress(f, nowMs)
}

// durableProgress is Strata's addition to the caught-up rule for a
// follower that reports its fsynced end apart from its fetch offset
// (DurableEndTag, PlanFetch): Kafka's rule looks at the fetch offset only,
// so a follower whose disk stopped completing fsyncs while it still
// fetched would stay in the ISR and hold the high watermark (the lowest
// fsynced end) back for ever. It is out of sync once its fsynced end has
// stood below its fetch offset without advancing for
// replica.lag.time.max.ms. A follower without the tag reports its fetch
// offset as fsynced: always progressing, Kafka's rule alone.
func (l *Leader) durableProgress(f *Follower, nowMs int64) bool {
	return !l.cfg.Durable || f.DurableEnd >= f.EndOffset || nowMs-f.LastDurableMs <= l.cfg.LagTimeMaxMs
}

// Tick checks the ISR for followers that have not caught up with the
// leader's end within replica.lag.time.max.ms (stuck or slow: Kafka's
// Partition.maybeShrinkIsr / getOutOfSyncReplicas) and proposes removing
// them. Nothing is proposed while a change is in flight. The high
// watermark does not assume the shrink until it is committed.
func (l *Leader) Tick(nowMs int64) *IsrChange {
	if l.pending != nil {
		return nil
	}
	var out []int32
	for _, id := range l.st.ISR {
		if id == l.cfg.Local {
			continue
		}
		f := l.followers[id]
		if f == nil || !l.caughtUp(f, nowMs) {
			out = append(out, id)
		}
	}
	if len(out) == 0 {
		return nil
	}
	isr := slices.DeleteFunc(slices.Clone(l.st.ISR), func(r int32) bool { return slices.Contains(out, r) })
	l.pending = &IsrChange{LeaderEpoch: l.st.LeaderEpoch, PartitionEpoch: l.st.PartitionEpoch, LeaderBrokerEpoch: l.cfg.BrokerEpoch, ISR: isr, Removed: out}
	return l.pending
}

// maximalISR is the committed ISR plus a replica being added (Kafka's
// PendingExpandIsr.maximalIsr); a pending shrink is not assumed.
func (l *Leader) inMaximalISR(id int32) bool {
	if slices.Contains(l.st.ISR, id) {
		return true
	}
	return l.pending != nil && slices.Contains(l.pending.Added, id)
}

func (l *Leader) maximalISRSize() int {
	n := len(l.st.ISR)
	if l.pending != nil {
		n += len(l.pending.Added)
	}
	return n
}

// effectiveMinISR is min(min.insync.replicas, replication factor) (Kafka's
// Partition.effectiveMinIsr, KAFKA-15583): a setting above the replica
// count cannot make every write fail or freeze the high watermark.
func (l *Leader) effectiveMinISR() int {
	return max(1, min(l.cfg.MinISR, len(l.st.Replicas)))
}

// UnderMinISR reports whether the committed ISR is smaller than the
// effective min.insync.replicas (Kafka's Partition.isUnderMinIsr).
func (l *Leader) UnderMinISR() bool { return len(l.st.ISR) < l.effectiveMinISR() }

// UnderReplicated reports whether the ISR is smaller than the replica set.
func (l *Leader) UnderReplicated() bool { return len(l.st.ISR) < len(l.st.Replicas) }

// hwEnd is the leader's own contribution to the high watermark: its
// fsynced end under durable acks, its log end offset otherwise.
func (l *Leader) hwEnd() int64 {
	if l.cfg.Durable {
		return min(l.local.Durable, l.local.End)
	}
	return l.local.End
}

// followerEnd is a follower's contribution to the high watermark: its
// reported fsynced end under durable acks, its log end offset otherwise
// (Kafka's rule exactly).
func (l *Leader) followerEnd(f *Follower) int64 {
	if l.cfg.Durable {
		return min(f.DurableEnd, f.EndOffset)
	}
	return f.EndOffset
}

// maybeIncrementHW is Kafka's Partition.maybeIncrementLeaderHW with
// Strata's durability rule: the high watermark is the lowest end
// (hwEnd, followerEnd: fsynced ends under strata.durable.acks) among
// the leader and every follower in the maximal ISR, or caught up and
// eligible to join it (so that a catching-up replica is not left behind
// forever); it never moves back, and never advances while the ISR is
// below min.insync.replicas (KIP-966: a write the ISR could lose must not
// become visible or acknowledged).
func (l *Leader) maybeIncrementHW(nowMs int64) bool {
	if l.UnderMinISR() {
		return false
	}
	hw := l.hwEnd()
	for _, f := range l.followers {
		end := l.followerEnd(f)
		if end >= hw {
			continue
		}
		if l.inMaximalISR(f.ID) || (l.caughtUp(f, nowMs) && l.eligible(f)) {
			hw = end
		}
	}
	if hw > l.hw {
		l.hw = hw
		return true
	}
	return false
}

// CheckAppend refuses an acks=all produce before anything is appended when
// the ISR is smaller than min.insync.replicas (NOT_ENOUGH_REPLICAS, Kafka's
// Partition.appendRecordsToLeader).
func (l *Leader) CheckAppend(acks int16) error {
	if acks == -1 && len(l.st.ISR) < l.effectiveMinISR() {
		return fmt.Errorf("the ISR %v is smaller than min.insync.replicas=%d: %w", l.st.ISR, l.effectiveMinISR(), kerr.NotEnoughReplicas)
	}
	return nil
}

// Acked reports whether an acks=all produce whose last offset is
// required-1 can be answered (Kafka's checkEnoughReplicasReachOffset): it
// is done once the high watermark covers it, with
// NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below
// min.insync.replicas meanwhile. While the ISR is below
// min.insync.replicas the high watermark cannot advance (KIP-966), so a
// produce waiting then is answered NOT_ENOUGH_REPLICAS_AFTER_APPEND at
// once instead of timing out; the producer retries (an idempotent one is
// deduplicated).
func (l *Leader) Acked(required int64) (done bool, err error) {
	if l.hw >= required {
		if l.maximalISRSize() < l.effectiveMinISR() {
			return true, fmt.Errorf("the ISR shrank to %v, below min.insync.replicas=%d, after the append: %w", l.st.ISR, l.effectiveMinISR(), kerr.NotEnoughReplicasAfterAppend)
		}
		return true, nil
	}
	if l.maximalISRSize() < l.effectiveMinISR() {
		return true, fmt.Errorf("the ISR shrank to %v, below min.insync.replicas=%d, after the append: %w", l.st.ISR, l.effectiveMinISR(), kerr.NotEnoughReplicasAfterAppend)
	}
	return false, nil
}

// HighWatermark is the partition's high watermark.
func (l *Leader) HighWatermark() int64 { return l.hw }

// EpochStart is the first offset of the current leader epoch.
func (l *Leader) EpochStart() int64 { return l.epochStart }

// State returns the committed state the leader works from.
func (l *Leader) State() State { return cloneState(l.st) }

// Followers returns a copy of every follower's record, in replica order.
func (l *Leader) Followers() []Follower {
	out := make([]Follower, 0, len(l.followers))
	for _, id := range l.st.Replicas {
		if f := l.followers[id]; f != nil {
			out = append(out, *f)
		}
	}
	return out
}

// LowWatermark is the lowest log start offset among the leader and the
// registered followers (Kafka's Partition.lowWatermarkIfLeader):
// DeleteRecords is answered once it reaches the requested offset.
func (l *Leader) LowWatermark() int64 {
	lw := l.local.Start
	for _, f := range l.followers {
		// A follower that has not reported yet counts as NoOffset (-1),
		// as Kafka's UnknownOffset: the low watermark waits for it.
		if _, live := l.brokers[f.ID]; live && f.LogStart < lw {
			lw = f.LogStart
		}
	}
	return lw
}
