package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/strata-io/strata/internal/meta"
)

// Election types of ElectLeaders (Kafka's ElectionType).
const (
	ElectPreferred int8 = 0
	ElectUnclean   int8 = 1
)

// Kafka error codes of leader elections.
const (
	codeUnknownTopicOrPartition     int16 = 3
	codeElectionNotNeeded           int16 = 84
	codePreferredLeaderNotAvailable int16 = 80
	codeEligibleLeadersNotAvailable int16 = 83
)

// ElectionError is an election's refusal with Kafka's code and message.
type ElectionError struct {
	Code    int16
	Message string
}

func (e *ElectionError) Error() string { return e.Message }

// ElectionNotNeeded reports whether err is ELECTION_NOT_NEEDED.
func ElectionNotNeeded(err error) bool {
	var ee *ElectionError
	return errors.As(err, &ee) && ee.Code == codeElectionNotNeeded
}

// ElectLeader decides an ElectLeaders election for one partition (Kafka's
// ReplicationControlManager.electLeader with PartitionChangeBuilder):
//   - PREFERRED: ELECTION_NOT_NEEDED when the preferred replica (the first
//     of the replica list) leads; it becomes the leader when it is live and
//     in the ISR; else PREFERRED_LEADER_NOT_AVAILABLE (the leader stays).
//   - UNCLEAN: ELECTION_NOT_NEEDED when the partition has a leader; else
//     the first live ISR member, else the first live ELR member, else the
//     first live replica (unclean, whatever the topic's setting: the
//     operator asked for it), marked recovering (KIP-704); with no live
//     replica ELIGIBLE_LEADERS_NOT_AVAILABLE.
//
// Every leader change bumps the leader epoch and the partition epoch.
func (s *State) ElectLeader(topic string, part int32, typ int8) (Decision, error) {
	t, ok := s.Topics[topic]
	if !ok || t.Deleting {
		return Decision{}, &ElectionError{codeUnknownTopicOrPartition, "No such topic as " + topic}
	}
	if part < 0 || int(part) >= len(t.Parts) || t.Parts[part].ModRevision == 0 {
		return Decision{}, &ElectionError{codeUnknownTopicOrPartition, fmt.Sprintf("No such partition as %s-%d", topic, part)}
	}
	p := t.Parts[part]
	st := p.State
	switch typ {
	case ElectPreferred:
		if len(st.Replicas) > 0 && st.Leader == st.Replicas[0] {
			return Decision{}, &ElectionError{codeElectionNotNeeded, "Leader election not needed for topic partition."}
		}
		ns, ok := preferredLeader(st, s.Live, s.epochOf)
		if !ok {
			return Decision{}, &ElectionError{codePreferredLeaderNotAvailable, fmt.Sprintf(
				"Failed to elect leader for partition %s-%d under strategy PreferredReplicaPartitionLeaderElectionStrategy: the preferred replica %d is not live or not in the ISR %v",
				topic, part, st.Replicas[0], st.ISR)}
		}
		return Decision{Topic: topic, TP: p.TopicPartition, Expect: p.ModRevision, New: s.stamp(ns), Reason: "preferred leader election"}, nil
	case ElectUnclean:
		if st.Leader != meta.NoLeader && s.Live(st.Leader) {
			return Decision{}, &ElectionError{codeElectionNotNeeded, "Leader election not needed for topic partition."}
		}
		pol := t.Policy
		pol.Unclean = true
		unclean := func(id int32) bool { return s.Brokers[id].UncleanShutdown }
		ns, kind, changed := rebuildEpochs(st, s.Live, unclean, s.epochOf, pol)
		if !changed || ns.Leader == meta.NoLeader {
			return Decision{}, &ElectionError{codeEligibleLeadersNotAvailable, fmt.Sprintf(
				"Failed to elect leader for partition %s-%d under strategy UncleanLeaderElectionStrategy: no replica of %v is live", topic, part, st.Replicas)}
		}
		return Decision{Topic: topic, TP: p.TopicPartition, Expect: p.ModRevision, New: ns, Reason: "leader election (" + kind + ", ElectLeaders UNCLEAN)"}, nil
	}
	return Decision{}, &ElectionError{42, fmt.Sprintf("unknown election type %d", typ)}
}

// preferredLeader moves leadership to the preferred replica when it is
// live and in the ISR (PartitionChangeBuilder's PREFERRED election: KIP-966
// and Kafka's rule that leadership returns only to an in-sync replica).
// A preferred replica that re-registered since it joined the ISR
// (KIP-903, meta.PartitionState.ISREpochs) is not in sync.
func preferredLeader(st meta.PartitionState, live func(int32) bool, epoch func(int32) int64) (meta.PartitionState, bool) {
	if len(st.Replicas) == 0 {
		return st, false
	}
	pref := st.Replicas[0]
	if !live(pref) || !slices.Contains(st.ISR, pref) || st.Leader == pref || st.StaleISRMember(pref, epoch(pref)) {
		return st, false
	}
	ns := st.Clone()
	ns.Leader = pref
	ns.LeaderEpoch++
	ns.PartitionEpoch++
	ns.LeaderRecovery = meta.Recovered
	return ns, true
}

// Rebalance is the automatic preferred-leader election
// (auto.leader.rebalance.enable; Kafka's
// KafkaController.checkAndTriggerAutoLeaderRebalance): for every broker,
// the partitions whose preferred replica it is but which another broker
// leads count against it; when their share of its preferred partitions
// exceeds percentage/100 (leader.imbalance.per.broker.percentage), each
// of them whose preferred replica is live and in the ISR gets its
// preferred leader back. A partition under reassignment is left alone, as
// Kafka skips partitions being reassigned.
func (s *State) Rebalance(percentage int) []Decision {
	type imb struct {
		topic string
		p     meta.Partition
	}
	total := map[int32]int{}
	off := map[int32][]imb{}
	for _, name := range s.TopicNames() {
		t := s.Topics[name]
		if t.Deleting {
			continue
		}
		for _, p := range t.Parts {
			if p.ModRevision == 0 || len(p.State.Replicas) == 0 || len(p.State.Adding) > 0 || len(p.State.Removing) > 0 {
				continue
			}
			pref := p.State.Replicas[0]
			total[pref]++
			if p.State.Leader != pref {
				off[pref] = append(off[pref], imb{name, p})
			}
		}
	}
	brokers := make([]int32, 0, len(off))
	for b := range off {
		brokers = append(brokers, b)
	}
	sort.Slice(brokers, func(i, j int) bool { return brokers[i] < brokers[j] })
	var out []Decision
	for _, b := range brokers {
		// Kafka: imbalanceRatio = leaders not on their preferred broker /
		// partitions preferring it; rebalance when above the percentage.
		if float64(len(off[b]))/float64(total[b]) <= float64(percentage)/100 {
			continue
		}
		for _, x := range off[b] {
			if ns, ok := preferredLeader(x.p.State, s.Live, s.epochOf); ok {
				out = append(out, Decision{Topic: x.topic, TP: x.p.TopicPartition, Expect: x.p.ModRevision, New: s.stamp(ns), Reason: "preferred leader rebalance"})
			}
		}
	}
	return out
}

// ElectionResult is one partition's outcome of ElectLeaders.
type ElectionResult struct {
	Topic     string
	Partition int32
	Err       error // nil, *ElectionError, or a store error
}

// ElectLeaders runs ElectLeaders (key 43) against the store: each
// partition's decision is committed by compare-and-set on its key; a lost
// compare is decided again on the newer state (up to a few times). parts
// nil means every partition (Kafka then leaves ELECTION_NOT_NEEDED out of
// the answer). It returns once this broker's view holds the changes.
func (a *Admin) ElectLeaders(ctx context.Context, typ int8, parts map[string][]int32) ([]ElectionResult, error) {
	// Decided on a view synced with the store, as Kafka's controller
	// decides on its committed state: a topic created through another
	// broker just before is known (this broker's watch may not have
	// delivered it yet, and the answer was UNKNOWN_TOPIC_OR_PARTITION).
	v, err := a.Cache.Sync(ctx)
	if err != nil {
		return nil, err
	}
	all := parts == nil
	if all {
		parts = map[string][]int32{}
		for _, name := range v.TopicNames() {
			for i := range v.Parts[v.Topics[name].ID] {
				parts[name] = append(parts[name], int32(i))
			}
		}
	}
	names := make([]string, 0, len(parts))
	for n := range parts {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []ElectionResult
	var lastRev int64
	for _, name := range names {
		for _, idx := range parts[name] {
			var err error
			for attempt := 0; attempt < 5; attempt++ {
				var d Decision
				d, err = a.state().ElectLeader(name, idx, typ)
				if err != nil {
					break
				}
				var rev int64
				rev, err = a.Store.Txn(ctx, []meta.Change{a.Store.PartitionChange(d.TP, d.New, d.Expect)})
				if errors.Is(err, meta.ErrConflict) {
					// Decided on a stale view: wait for a newer one, decide again.
					wctx, cancel := context.WithTimeout(ctx, time.Second)
					_, _ = a.Cache.WaitRev(wctx, a.Cache.View().Rev+1)
					cancel()
					continue
				}
				if err == nil {
					lastRev = max(lastRev, rev)
				}
				break
			}
			if all && ElectionNotNeeded(err) {
				continue
			}
			out = append(out, ElectionResult{Topic: name, Partition: idx, Err: err})
		}
	}
	if lastRev > 0 {
		if _, err := a.Cache.WaitRev(ctx, lastRev); err != nil {
			return out, err
		}
	}
	return out, nil
}

// RebalanceConfig is the automatic preferred-leader election's settings
// (Kafka's names): auto.leader.rebalance.enable (true),
// leader.imbalance.check.interval.seconds (300) and
// leader.imbalance.per.broker.percentage (10).
type RebalanceConfig struct {
	Enable     bool
	Interval   time.Duration
	Percentage int
}

// rebalanceTicker returns the channel of the periodic imbalance check
// (nil when disabled) and its stop function.
func (d *Driver) rebalanceTicker() (<-chan time.Time, func()) {
	if !d.Rebalance.Enable || d.Rebalance.Interval <= 0 {
		return nil, func() {}
	}
	t := time.NewTicker(d.Rebalance.Interval)
	return t.C, t.Stop
}

// RebalanceOnce runs one imbalance check and commits its preferred
// elections (each a compare-and-set; a lost one waits for the next check).
func (d *Driver) RebalanceOnce(ctx context.Context) error {
	ds := FromView(d.Cache.View(), d.Policy).Rebalance(d.Rebalance.Percentage)
	if len(ds) == 0 {
		return nil
	}
	changes := make([]meta.Change, len(ds))
	for i, dc := range ds {
		changes[i] = d.Store.PartitionChange(dc.TP, dc.New, dc.Expect)
		d.Logger.Info("partition change", "topic", dc.Topic, "partition", dc.TP.Partition, "state", dc.New.String(), "reason", dc.Reason)
	}
	_, _, err := d.Store.Batches(ctx, changes)
	if errors.Is(err, meta.ErrConflict) {
		return nil
	}
	return err
}
