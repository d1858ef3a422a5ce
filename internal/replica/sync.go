package replica

import (
	"slices"

	"github.com/strata-io/strata/internal/meta"
	"github.com/strata-io/strata/internal/storage"
)

// Hosted is what Sync needs of a partition this broker holds a replica of.
type Hosted struct {
	Log *storage.Log
	// MinISR is the topic's min.insync.replicas.
	MinISR int
	// Attach hands the partition its replication state (the broker's
	// Partition.SetReplica); nil returns it to a single replica.
	Attach func(*Replica)
}

// Sync applies a metadata view (the broker's wiring calls it at every
// publish of its meta.Cache, level-triggered): the registered brokers and
// their epochs, then every partition with more than one replica, one of
// them this broker, whose local replica host returns: Apply, then Attach.
// Replicated partitions the view no longer places here, or that have one
// replica now, are detached and removed. host's false means the partition
// has no local log yet (the next Sync applies it).
func (m *Manager) Sync(v *meta.View, host func(tp TP) (Hosted, bool)) {
	brokers := make(map[int32]Broker, len(v.Brokers))
	for id, b := range v.Brokers {
		brokers[id] = Broker{Epoch: b.Epoch}
	}
	m.SetBrokers(brokers)
	seen := map[TP]bool{}
	var items []applyItem
	var attach []func(*Replica)
	for name, t := range v.Topics {
		if t.Deleting {
			continue
		}
		for i, p := range v.Parts[t.ID] {
			if p.ModRevision == 0 || len(p.State.Replicas) < 2 || !slices.Contains(p.State.Replicas, m.cfg.Local) {
				continue
			}
			tp := TP{Topic: name, Partition: int32(i)}
			h, ok := host(tp)
			if !ok || h.Log == nil {
				continue
			}
			seen[tp] = true
			st := FromMeta(p.State)
			if p.State.LedByEarlierIncarnation(m.cfg.Local, m.cfg.BrokerEpoch()) {
				// Elected as this broker's previous incarnation (a
				// restart within its session): neither lead nor
				// follow until the controller's new election.
				st.Leader = meta.NoLeader
			}
			items = append(items, applyItem{tp: tp, log: h.Log, st: st, minISR: h.MinISR})
			attach = append(attach, h.Attach)
		}
	}
	// One batch for the whole view: the new leader epochs of every
	// partition it makes this broker lead share their checkpoint syncs.
	for i, r := range m.applyAll(items) {
		r.mu.Lock()
		r.attach = attach[i]
		r.mu.Unlock()
		if attach[i] != nil {
			attach[i](r)
		}
	}
	m.mu.Lock()
	var gone []*Replica
	for tp, r := range m.replicas {
		if !seen[tp] {
			gone = append(gone, r)
		}
	}
	m.mu.Unlock()
	for _, r := range gone {
		r.mu.Lock()
		attach := r.attach
		r.mu.Unlock()
		if attach != nil {
			attach(nil)
		}
		m.Remove(r.tp)
		r.log.UnsetReplicated()
	}
}
