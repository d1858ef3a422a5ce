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

// Partition reassignment (KIP-455), as Kafka's KRaft controller does it
// (ReplicationControlManager.alterPartitionReassignment,
// PartitionReassignmentReplicas, PartitionReassignmentRevert,
// PartitionChangeBuilder.tryCompleteReassignment):
//
//   - starting: the partition's replicas become the target followed by the
//     replicas being removed; Adding = target - current, Removing =
//     current - target. The adding replicas are followers like any other:
//     they fetch, catch up and the leader adds them to the ISR;
//   - completing (Reconcile, after any change): once every target replica
//     is in the ISR, the replicas become the target, the ISR keeps only
//     target members, Adding/Removing are cleared, a leader outside the
//     target is replaced by the first target ISR member, and the leader
//     epoch is bumped because replicas left (Kafka's
//     triggerLeaderEpochBumpForReplicaReassignmentIfNeeded). The removed
//     replicas' brokers then delete their copies;
//   - cancelling: back to the original replicas (current minus adding),
//     the adding replicas leave the ISR, the leader is re-elected if it was
//     one of them.
//
// Every step is one compare-and-set on the partition's key.

const (
	codeNoReassignmentInProgress int16 = 85
	codeInvalidRequest           int16 = 42
)

// Reassignment is one partition's AlterPartitionReassignments entry:
// Target nil cancels.
type Reassignment struct {
	Topic     string
	Partition int32
	Target    []int32
}

// Reassigning is a partition with a reassignment in progress
// (ListPartitionReassignments).
type Reassigning struct {
	Topic     string
	Partition int32
	Replicas  []int32
	Adding    []int32
	Removing  []int32
}

// original is the replica list before the reassignment in progress.
func original(st meta.PartitionState) []int32 {
	return slices.DeleteFunc(slices.Clone(st.Replicas), func(r int32) bool { return slices.Contains(st.Adding, r) })
}

// Reassign decides one AlterPartitionReassignments entry. allowRFChange
// is the request's AllowReplicationFactorChange (KIP-860, true before v1).
func (s *State) Reassign(r Reassignment, allowRFChange bool) (Decision, bool, error) {
	t, ok := s.Topics[r.Topic]
	if !ok || t.Deleting || r.Partition < 0 || int(r.Partition) >= len(t.Parts) || t.Parts[r.Partition].ModRevision == 0 {
		return Decision{}, false, &PlacementError{codeUnknownTopicOrPartition, "This server does not host this topic-partition."}
	}
	p := t.Parts[r.Partition]
	st := p.State
	inProgress := len(st.Adding) > 0 || len(st.Removing) > 0
	orig := original(st)
	if r.Target == nil {
		if !inProgress {
			return Decision{}, false, &PlacementError{codeNoReassignmentInProgress, fmt.Sprintf("No ongoing reassignment for %s-%d.", r.Topic, r.Partition)}
		}
		ns := s.revert(st, t.Policy)
		return Decision{Topic: r.Topic, TP: p.TopicPartition, Expect: p.ModRevision, New: ns, Reason: "reassignment cancelled"}, true, nil
	}
	if len(r.Target) == 0 {
		return Decision{}, false, &PlacementError{codeInvalidReplicaAssignment, "The manual partition assignment includes an empty replica list."}
	}
	seen := map[int32]bool{}
	for _, b := range r.Target {
		if seen[b] {
			return Decision{}, false, &PlacementError{codeInvalidReplicaAssignment, fmt.Sprintf("The manual partition assignment includes duplicate replica %d.", b)}
		}
		seen[b] = true
		if !s.Live(b) {
			return Decision{}, false, &PlacementError{codeInvalidReplicaAssignment, fmt.Sprintf(
				"The manual partition assignment includes broker %d, but no broker with that ID is registered.", b)}
		}
	}
	if !allowRFChange && len(r.Target) != len(orig) {
		return Decision{}, false, &PlacementError{codeInvalidReplicationFactor, fmt.Sprintf(
			"The replication factor is changed from %d to %d but AllowReplicationFactorChange is false.", len(orig), len(r.Target))}
	}
	base := st
	if inProgress {
		base = s.revert(st, t.Policy) // a new target replaces the one in progress
	}
	if slices.Equal(base.Replicas, r.Target) && !inProgress {
		return Decision{}, false, nil // already there
	}
	ns := base.Clone()
	ns.Adding, ns.Removing = nil, nil
	for _, b := range r.Target {
		if !slices.Contains(base.Replicas, b) {
			ns.Adding = append(ns.Adding, b)
		}
	}
	for _, b := range base.Replicas {
		if !slices.Contains(r.Target, b) {
			ns.Removing = append(ns.Removing, b)
		}
	}
	ns.Replicas = append(slices.Clone(r.Target), ns.Removing...)
	if len(ns.Adding) == 0 && len(ns.Removing) == 0 {
		ns.Removing = nil // a reordering: done at once
	}
	ns = s.stamp(s.completeReassignment(ns, t.Policy))
	if !ns.Equal(st) {
		ns.PartitionEpoch = st.PartitionEpoch + 1
	}
	return Decision{Topic: r.Topic, TP: p.TopicPartition, Expect: p.ModRevision, New: ns, Reason: "reassignment to " + fmt.Sprint(r.Target)}, !ns.Equal(st), nil
}

// revert is the state with the reassignment in progress cancelled
// (PartitionReassignmentRevert): original replicas, the adding ones out of
// the ISR (if that empties it, the ISR is kept as it was, as Kafka), the
// leader re-elected when it was an adding replica.
func (s *State) revert(st meta.PartitionState, pol Policy) meta.PartitionState {
	ns := st.Clone()
	ns.Replicas = original(st)
	isr := slices.DeleteFunc(slices.Clone(st.ISR), func(r int32) bool { return slices.Contains(st.Adding, r) })
	if len(isr) > 0 {
		ns.ISR = isr
	}
	ns.Adding, ns.Removing = nil, nil
	if !slices.Contains(ns.Replicas, ns.Leader) {
		ns.Leader = meta.NoLeader
		if l, _ := Elect(ns, s.Live, pol); l != meta.NoLeader {
			ns.Leader = l
		}
		ns.LeaderEpoch++
	} else if !containsAll(ns.Replicas, st.Replicas) {
		ns.LeaderEpoch++ // replicas left the set
	}
	return ns
}

// completeReassignment finishes a reassignment whose target replicas are
// all in the ISR (tryCompleteReassignment); otherwise it returns st.
func (s *State) completeReassignment(st meta.PartitionState, pol Policy) meta.PartitionState {
	if len(st.Adding) == 0 && len(st.Removing) == 0 {
		return st
	}
	target := slices.DeleteFunc(slices.Clone(st.Replicas), func(r int32) bool { return slices.Contains(st.Removing, r) })
	for _, r := range target {
		if !slices.Contains(st.ISR, r) {
			return st
		}
	}
	ns := st.Clone()
	ns.Replicas = target
	ns.ISR = slices.DeleteFunc(slices.Clone(st.ISR), func(r int32) bool { return !slices.Contains(target, r) })
	ns.ELR = slices.DeleteFunc(ns.ELR, func(r int32) bool { return !slices.Contains(target, r) })
	ns.LastKnownELR = slices.DeleteFunc(ns.LastKnownELR, func(r int32) bool { return !slices.Contains(target, r) })
	ns.Adding, ns.Removing = nil, nil
	if !slices.Contains(target, ns.Leader) || !s.Live(ns.Leader) {
		l, _ := Elect(ns, s.Live, Policy{MinISR: pol.MinISR})
		if l != ns.Leader {
			ns.Leader = l
		}
		ns.LeaderEpoch++
	} else if !containsAll(target, st.Replicas) {
		ns.LeaderEpoch++
	}
	return ns
}

func containsAll(set, of []int32) bool {
	for _, r := range of {
		if !slices.Contains(set, r) {
			return false
		}
	}
	return true
}

// Reassignments lists the partitions with a reassignment in progress,
// among parts (nil: all).
func (s *State) Reassignments(parts map[string][]int32) []Reassigning {
	var out []Reassigning
	for _, name := range s.TopicNames() {
		t := s.Topics[name]
		want, named := parts[name]
		if parts != nil && !named {
			continue
		}
		for i, p := range t.Parts {
			if parts != nil && !slices.Contains(want, int32(i)) {
				continue
			}
			if len(p.State.Adding) == 0 && len(p.State.Removing) == 0 {
				continue
			}
			out = append(out, Reassigning{Topic: name, Partition: int32(i), Replicas: slices.Clone(p.State.Replicas),
				Adding: slices.Clone(p.State.Adding), Removing: slices.Clone(p.State.Removing)})
		}
	}
	return out
}

// ReassignResult is one partition's outcome of AlterPartitionReassignments.
type ReassignResult struct {
	Topic     string
	Partition int32
	Err       error
}

// AlterReassignments runs AlterPartitionReassignments (key 45): each entry
// is decided on the current view and committed by compare-and-set (a lost
// compare is decided again on the newer view). It returns once this
// broker's view holds the changes; completion comes later, when the
// adding replicas have joined the ISR.
func (a *Admin) AlterReassignments(ctx context.Context, rs []Reassignment, allowRFChange bool) []ReassignResult {
	out := make([]ReassignResult, len(rs))
	// Decided on a view synced with the store, as Kafka's controller
	// decides on its committed state (ElectLeaders does the same): a topic
	// created through another broker just before is known, where this
	// broker's watch may not have delivered it yet (the answer was
	// UNKNOWN_TOPIC_OR_PARTITION). The retries below after a lost compare
	// read a view at least this recent.
	if _, err := a.Cache.Sync(ctx); err != nil {
		for i, r := range rs {
			out[i] = ReassignResult{Topic: r.Topic, Partition: r.Partition, Err: err}
		}
		return out
	}
	var lastRev int64
	for i, r := range rs {
		out[i] = ReassignResult{Topic: r.Topic, Partition: r.Partition}
		for attempt := 0; attempt < 5; attempt++ {
			d, changed, err := a.state().Reassign(r, allowRFChange)
			if err != nil || !changed {
				out[i].Err = err
				break
			}
			rev, err := a.Store.Txn(ctx, []meta.Change{a.Store.PartitionChange(d.TP, d.New, d.Expect)})
			if errors.Is(err, meta.ErrConflict) {
				wctx, cancel := context.WithTimeout(ctx, time.Second)
				_, _ = a.Cache.WaitRev(wctx, a.Cache.View().Rev+1)
				cancel()
				out[i].Err = err
				continue
			}
			out[i].Err = err
			if err == nil {
				lastRev = max(lastRev, rev)
			}
			break
		}
	}
	if lastRev > 0 {
		_, _ = a.Cache.WaitRev(ctx, lastRev)
	}
	return out
}

// ListReassignments runs ListPartitionReassignments (key 46) on a view
// synced with the store, as Kafka's controller answers it from its
// committed state: a reassignment started through another broker just
// before is listed.
func (a *Admin) ListReassignments(ctx context.Context, parts map[string][]int32) ([]Reassigning, error) {
	v, err := a.Cache.Sync(ctx)
	if err != nil {
		return nil, err
	}
	out := FromView(v, a.Policy).Reassignments(parts)
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out, nil
}
