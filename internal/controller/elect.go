package controller

import (
	"slices"

	"github.com/strata-io/strata/internal/meta"
)

// Election kinds.
const (
	ElectionNone      = ""
	ElectionISR       = "isr"
	ElectionELR       = "elr"
	ElectionUnclean   = "unclean"
	ElectionLastKnown = "last-known-elr"
	ElectionNoLeader  = "offline"
	ElectionUnchanged = "unchanged"
)

// Elect chooses a leader for a partition state given which brokers are
// live (Kafka's PartitionChangeBuilder.electLeader with KIP-966):
//  1. the first replica, in replica order, that is in the ISR and live;
//  2. else the first live replica in the ELR (it holds every record up to
//     the high watermark: the ISR was below min.insync.replicas when it
//     left, so the high watermark could not pass it);
//  3. else, when the ISR and ELR are empty and every last known eligible
//     replica is live again, the first of them (KIP-966's "balanced"
//     unclean recovery: with one replica this is the only copy there is);
//  4. else, only when unclean election is allowed, the first live replica
//     (records acknowledged only by others may be lost);
//  5. else no leader.
func Elect(st meta.PartitionState, live func(int32) bool, pol Policy) (int32, string) {
	for _, r := range st.Replicas {
		if slices.Contains(st.ISR, r) && live(r) {
			return r, ElectionISR
		}
	}
	for _, r := range st.Replicas {
		if slices.Contains(st.ELR, r) && live(r) {
			return r, ElectionELR
		}
	}
	if len(st.ISR) == 0 && len(st.ELR) == 0 && len(st.LastKnownELR) > 0 {
		all := true
		for _, r := range st.LastKnownELR {
			all = all && live(r)
		}
		if all {
			for _, r := range st.Replicas {
				if slices.Contains(st.LastKnownELR, r) {
					return r, ElectionLastKnown
				}
			}
		}
	}
	if pol.Unclean {
		for _, r := range st.Replicas {
			if live(r) {
				return r, ElectionUnclean
			}
		}
	}
	return meta.NoLeader, ElectionNoLeader
}

// rebuildEpochs applies the liveness of brokers to one partition: fenced
// brokers leave the ISR (joining the ELR when the ISR is then below
// min.insync.replicas), brokers that restarted uncleanly leave the ELR,
// and a leader is elected if the current one is gone. It returns the new
// state and whether anything changed. Epochs: the partition epoch is
// bumped on any change, the leader epoch on a leader change.
//
// It knows each live broker's epoch (epoch nil or 0: unknown). A leader
// whose registration epoch differs from the one recorded when it was elected restarted within its session (it deleted
// and re-created its registration between two reconciles): the old
// incarnation is fenced as Kafka fences a re-registering broker — it
// leaves the ISR (to the ELR under min.insync.replicas) and the partition
// gets a new election with a new leader epoch, even if the restarted
// broker is elected again, so followers truncate any tail it lost
// (KIP-101/279 can only tell apart records written under different
// epochs). The elected incarnation is recorded in the state.
func rebuildEpochs(st meta.PartitionState, live func(int32) bool, unclean func(int32) bool, epoch func(int32) int64, pol Policy) (meta.PartitionState, string, bool) {
	if epoch == nil {
		epoch = func(int32) int64 { return 0 }
	}
	ns := st.Clone()
	minISR := max(pol.MinISR, 1)
	restarted := st.Leader != meta.NoLeader && live(st.Leader) && st.ElectedBroker == st.Leader &&
		st.ElectedBrokerEpoch > 0 && epoch(st.Leader) > 0 && epoch(st.Leader) != st.ElectedBrokerEpoch
	// KIP-903 per member: an ISR member whose broker re-registered since it
	// joined (another epoch now) is not trusted as in sync, as Kafka's
	// controller drops a re-registering broker from every ISR
	// (handleBrokerUncleanShutdown/handleBrokerFenced).
	inSync := func(r int32) bool {
		return live(r) && !(restarted && r == st.Leader) && !st.StaleISRMember(r, epoch(r))
	}
	// Fenced brokers leave the ISR. KIP-966: a replica removed while the
	// remaining ISR is below min.insync.replicas becomes eligible (ELR).
	var isr, removed []int32
	for _, r := range ns.ISR {
		if inSync(r) {
			isr = append(isr, r)
		} else {
			removed = append(removed, r)
		}
	}
	ns.ISR = isr
	if len(isr) < minISR {
		for _, r := range removed {
			if !slices.Contains(ns.ELR, r) {
				ns.ELR = append(ns.ELR, r)
			}
		}
	}
	// A broker that came back after an unclean shutdown may have lost
	// acknowledged records: it is no longer eligible. When that empties
	// the ELR, the ones removed are remembered as the last known ELR.
	var dropped []int32
	ns.ELR = slices.DeleteFunc(ns.ELR, func(r int32) bool {
		if live(r) && unclean(r) {
			dropped = append(dropped, r)
			return true
		}
		return false
	})
	if len(ns.ELR) == 0 && len(dropped) > 0 {
		for _, r := range dropped {
			if !slices.Contains(ns.LastKnownELR, r) {
				ns.LastKnownELR = append(ns.LastKnownELR, r)
			}
		}
	}
	kind := ElectionUnchanged
	if ns.Leader == meta.NoLeader || !live(ns.Leader) || !slices.Contains(ns.ISR, ns.Leader) || restarted {
		leader, k := Elect(ns, live, pol)
		kind = k
		if leader != ns.Leader || restarted {
			ns.Leader = leader
			ns.LeaderEpoch++
		}
		switch k {
		case ElectionELR:
			// The eligible replica leads; it is the ISR now.
			ns.ISR = []int32{leader}
			ns.ELR = slices.DeleteFunc(ns.ELR, func(r int32) bool { return r == leader })
		case ElectionUnclean, ElectionLastKnown:
			ns.ISR = []int32{leader}
			ns.ELR = nil
			ns.LastKnownELR = nil
			ns.LeaderRecovery = meta.Recovering
		}
		if k == ElectionELR || k == ElectionUnclean || k == ElectionLastKnown {
			// It joins the ISR as the incarnation elected now
			// (SyncISREpochs below records its current epoch): an entry
			// kept from an earlier incarnation's membership would make
			// it a stale member at the next round, which would elect
			// again (every broker restarted: the ISR emptied into the
			// ELR because all its entries were of earlier incarnations).
			ns.ISREpochs = nil
		}
	}
	// Record the leader's incarnation (also for a leader elected by a path
	// that did not record it: topic creation, preferred elections).
	if ns.Leader == meta.NoLeader {
		ns.ElectedBroker, ns.ElectedBrokerEpoch = 0, 0
	} else if e := epoch(ns.Leader); e > 0 {
		ns.ElectedBroker, ns.ElectedBrokerEpoch = ns.Leader, e
	}
	ns.SyncISREpochs(epoch)
	// With the ISR back at min.insync.replicas the ELR is no longer needed.
	if len(ns.ISR) >= minISR && (len(ns.ELR) > 0 || len(ns.LastKnownELR) > 0) {
		ns.LastKnownELR = nil
		ns.ELR = nil
	}
	sortIDs(ns.ELR)
	sortIDs(ns.LastKnownELR)
	if ns.Equal(st) {
		return st, ElectionNone, false
	}
	ns.PartitionEpoch++
	return ns, kind, true
}

func sortIDs(s []int32) { slices.Sort(s) }

// Reconcile returns the changes that bring every partition in line with
// the live brokers: the controller's reaction to brokers leaving (fenced:
// their lease expired or they shut down) and joining. It is idempotent: on
// a state it already reconciled it returns nothing.
func (s *State) Reconcile() []Decision {
	live := s.Live
	unclean := func(id int32) bool { return s.Brokers[id].UncleanShutdown }
	epoch := s.epochOf
	var out []Decision
	for _, name := range s.TopicNames() {
		t := s.Topics[name]
		if t.Deleting {
			continue
		}
		for _, p := range t.Parts {
			if p.ModRevision == 0 {
				continue
			}
			ns, kind, changed := rebuildEpochs(p.State, live, unclean, epoch, t.Policy)
			reason := ""
			// A reassignment whose target replicas are all in the ISR
			// completes (reassign.go).
			if done := s.stamp(s.completeReassignment(ns, t.Policy)); !done.Equal(ns) {
				if !changed {
					done.PartitionEpoch++
				}
				ns, changed, reason = done, true, "reassignment completed; "
			}
			if !changed {
				continue
			}
			if ns.Leader != p.State.Leader || (kind != ElectionUnchanged && ns.LeaderEpoch != p.State.LeaderEpoch) {
				reason += "leader election (" + kind + ")"
			} else {
				reason += "isr change"
			}
			out = append(out, Decision{Topic: name, TP: p.TopicPartition, Expect: p.ModRevision, New: ns, Reason: reason})
		}
	}
	return out
}

// NextLeader is the leader the controller's reconcile gives a partition
// in state st with the live brokers of s: its current leader when nothing
// calls for an election, meta.NoLeader when no replica can be elected
// until other brokers return. A broker uses it to tell a partition whose
// election is imminent from one that stays offline (server readiness).
func (s *State) NextLeader(st meta.PartitionState, pol Policy) int32 {
	ns, _, _ := rebuildEpochs(st, s.Live, func(id int32) bool { return s.Brokers[id].UncleanShutdown }, s.epochOf, pol)
	return ns.Leader
}

// epochOf is a live broker's epoch (KIP-903), 0 when unknown or not live.
func (s *State) epochOf(id int32) int64 { return s.Brokers[id].Epoch }

// stamp records in a state the controller decided (creation, preferred
// election, reassignment) which incarnations it trusted: the leader's
// broker epoch (ElectedBroker, ElectedBrokerEpoch) and the epoch of every
// ISR member without one (ISREpochs), from the live registrations.
func (s *State) stamp(ns meta.PartitionState) meta.PartitionState {
	if ns.Leader == meta.NoLeader {
		ns.ElectedBroker, ns.ElectedBrokerEpoch = 0, 0
	} else if e := s.epochOf(ns.Leader); e > 0 && (ns.ElectedBroker != ns.Leader || ns.ElectedBrokerEpoch == 0) {
		ns.ElectedBroker, ns.ElectedBrokerEpoch = ns.Leader, e
	}
	ns.SyncISREpochs(s.epochOf)
	return ns
}
