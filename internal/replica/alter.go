package replica

import (
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/internal/meta"
)

// FromMeta is the leader's view of a partition's metadata state.
func FromMeta(st meta.PartitionState) State {
	return State{
		Leader: st.Leader, LeaderEpoch: st.LeaderEpoch, PartitionEpoch: st.PartitionEpoch,
		Replicas: slices.Clone(st.Replicas), ISR: slices.Clone(st.ISR),
		Recovering: st.LeaderRecovery == meta.Recovering,
	}
}

// AlterPartition computes the partition state that commits an ISR change
// proposed by its leader: the checks and effects of Kafka's controller
// handling AlterPartition (ReplicationControlManager.alterPartition with
// PartitionChangeBuilder), done by the leader itself as a compare-and-set
// on the partition's key (docs/cluster.md). cur is the state as read, to be
// compared by its mod revision; minISR is the topic's min.insync.replicas.
//
// Refused, with Kafka's errors: a change by a replica that no longer leads
// or at an older leader epoch (FENCED_LEADER_EPOCH), decided on another
// partition epoch (INVALID_UPDATE_VERSION), or naming replicas outside the
// replica set or without the leader (INVALID_REQUEST). Whether an added
// replica is still the broker incarnation that fetched (KIP-903) is for the
// transaction's compares (IsrChange.AddedEpochs).
//
// Effects: the ISR is replaced; KIP-966's eligible leader replicas follow
// it (a replica removed while the ISR is below min.insync.replicas becomes
// eligible, one that rejoins the ISR leaves the ELR, an ISR back at
// min.insync.replicas needs no ELR); the leader, having served fetches, is
// recovered (KIP-704); the partition epoch is bumped.
func AlterPartition(cur meta.PartitionState, leader int32, ch *IsrChange, minISR int) (meta.PartitionState, error) {
	if cur.Leader != leader || cur.LeaderEpoch != ch.LeaderEpoch {
		return cur, fmt.Errorf("partition led by %d at epoch %d, not by %d at epoch %d: %w", cur.Leader, cur.LeaderEpoch, leader, ch.LeaderEpoch, kerr.FencedLeaderEpoch)
	}
	if cur.PartitionEpoch != ch.PartitionEpoch {
		return cur, fmt.Errorf("partition epoch is %d, the change was decided at %d: %w", cur.PartitionEpoch, ch.PartitionEpoch, kerr.InvalidUpdateVersion)
	}
	if !slices.Contains(ch.ISR, leader) {
		return cur, fmt.Errorf("ISR %v without its leader %d: %w", ch.ISR, leader, kerr.InvalidRequest)
	}
	for _, r := range ch.ISR {
		if !slices.Contains(cur.Replicas, r) {
			return cur, fmt.Errorf("ISR member %d is not a replica (%v): %w", r, cur.Replicas, kerr.InvalidRequest)
		}
	}
	ns := cur.Clone()
	ns.ISR = slices.Clone(ch.ISR)
	// KIP-903: the ISR records each member's broker epoch; an added member
	// is recorded as the incarnation that fetched (its registration is
	// compared in the same transaction), the leader as itself.
	ns.SyncISREpochs(func(r int32) int64 {
		if r == leader {
			return ch.LeaderBrokerEpoch
		}
		return ch.AddedEpochs[r]
	})
	minISR = max(1, min(minISR, len(ns.Replicas)))
	if len(ns.ISR) < minISR {
		for _, r := range cur.ISR {
			if !slices.Contains(ns.ISR, r) && !slices.Contains(ns.ELR, r) {
				ns.ELR = append(ns.ELR, r)
			}
		}
	}
	ns.ELR = slices.DeleteFunc(ns.ELR, func(r int32) bool { return slices.Contains(ns.ISR, r) })
	if len(ns.ISR) >= minISR {
		ns.ELR, ns.LastKnownELR = nil, nil
	}
	if len(ns.ELR) == 0 {
		ns.ELR = nil
	}
	slices.Sort(ns.ELR)
	ns.LeaderRecovery = meta.Recovered
	ns.PartitionEpoch++
	return ns, nil
}
