package meta

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"

	"github.com/strata-io/strata/internal/authz"
)

// View is an immutable snapshot of the cluster metadata at one etcd
// revision. Readers never lock: the cache publishes a new View after each
// batch of changes, sharing what did not change.
type View struct {
	// Rev is the etcd revision this view reflects.
	Rev       int64
	ClusterID string
	// Brokers are the registered (live) brokers.
	Brokers map[int32]*Broker
	// Topics by name and by id.
	Topics     map[string]*Topic
	TopicsByID map[string]*Topic
	// Parts holds each topic's partitions by topic id, indexed by
	// partition number; a missing key leaves a zero Partition with
	// ModRevision 0.
	Parts map[string][]Partition
	// BrokerConfigs holds dynamic broker configs by node id, the cluster
	// default under DefaultBrokerScope.
	BrokerConfigs map[int32]map[string]string
	// Controller is the node id of the active controller (-1: none), the
	// etcd election candidate with the lowest create revision.
	Controller int32
	candidates map[string]candidate
	// ACLs holds every ACL binding by key, Quotas every client quota
	// entity by key (security.go). ACLsRev and QuotasRev are the
	// revisions of their last change (0: none since the view was
	// loaded), so readers rebuild only when they moved.
	ACLs      map[string]authz.ACL
	Quotas    map[string]ClientQuota
	ACLsRev   int64
	QuotasRev int64
	// Deletions holds, per topic id being deleted, the brokers that
	// deleted their replicas (deletions.go).
	Deletions map[string]map[int32]bool
	// Scram holds every user's SCRAM credentials (scram.go).
	Scram map[string]ScramUser

	// shared holds the values partition states share (intern.go); a view
	// and the views applied from it use the same table.
	shared *interner
}

type candidate struct {
	createRev int64
	node      int32
}

// NewView returns an empty view.
func NewView() *View {
	return &View{Brokers: map[int32]*Broker{}, Topics: map[string]*Topic{}, TopicsByID: map[string]*Topic{},
		Parts: map[string][]Partition{}, BrokerConfigs: map[int32]map[string]string{}, Controller: -1,
		candidates: map[string]candidate{}, ACLs: map[string]authz.ACL{}, Quotas: map[string]ClientQuota{},
		Deletions: map[string]map[int32]bool{}, Scram: map[string]ScramUser{}, shared: newInterner()}
}

// Live reports whether broker id is registered.
func (v *View) Live(id int32) bool { _, ok := v.Brokers[id]; return ok }

// ServingLeader is the broker that serves a partition in state st as far
// as clients are told (Metadata, KIP-951's current leader, `strata cluster
// status`, OfflinePartitionsCount): st.Leader when it is live, else
// NoLeader; and for a replicated partition NoLeader too while st names a
// broker restarted within its session under the election made for its
// previous incarnation (PartitionState.LedByEarlierIncarnation): that
// broker refuses to lead it until the controller elects again (its log
// may hold records past the high watermark the next leader lacks), so
// naming it sent clients to a broker answering NOT_LEADER_OR_FOLLOWER.
// Kafka never names such a broker either: a restarted broker registers
// fenced, the controller moved its previous incarnation's leaderships away
// or to no leader (ReplicationControlManager handleBrokerFenced /
// handleBrokerUncleanShutdown) and elects only unfenced brokers; a
// partition without a leader is LEADER_NOT_AVAILABLE with leader -1
// (KRaftMetadataCache.getPartitionMetadata). A single-replica partition is
// served by its restarted broker at once (no other replica can hold
// records it lacks), so it stays named.
func (v *View) ServingLeader(st PartitionState) int32 {
	b := v.Brokers[st.Leader]
	if st.Leader == NoLeader || b == nil || (len(st.Replicas) > 1 && st.LedByEarlierIncarnation(st.Leader, b.Epoch)) {
		return NoLeader
	}
	return st.Leader
}

// BrokerIDs returns the live brokers' ids, sorted.
func (v *View) BrokerIDs() []int32 { return sortedIDs(v.Brokers) }

// TopicNames returns every topic name, sorted.
func (v *View) TopicNames() []string {
	out := make([]string, 0, len(v.Topics))
	for n := range v.Topics {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Partition returns a topic's partition (false if unknown).
func (v *View) Partition(topic string, p int32) (*Topic, Partition, bool) {
	t := v.Topics[topic]
	if t == nil {
		return nil, Partition{}, false
	}
	ps := v.Parts[t.ID]
	if p < 0 || int(p) >= len(ps) || ps[p].ModRevision == 0 {
		return t, Partition{}, false
	}
	return t, ps[p], true
}

// PartitionCount is the number of partition keys in the view.
func (v *View) PartitionCount() int {
	n := 0
	for _, ps := range v.Parts {
		for _, p := range ps {
			if p.ModRevision != 0 {
				n++
			}
		}
	}
	return n
}

// OfflinePartitions counts partitions without a serving leader
// (ServingLeader; Kafka's OfflinePartitionsCount), skipping topics being
// deleted.
func (v *View) OfflinePartitions() int {
	n := 0
	for _, t := range v.Topics {
		if t.Deleting {
			continue
		}
		for _, p := range v.Parts[t.ID] {
			if p.ModRevision != 0 && v.ServingLeader(p.State) == NoLeader {
				n++
			}
		}
	}
	return n
}

// event is one key change, decoded.
type event struct {
	key       string
	value     []byte // nil: deleted
	createRev int64
	modRev    int64
}

// apply returns a new view with the events applied. v is not modified;
// maps are copied only when a kind of key changed.
func (v *View) apply(k Keys, rev int64, evs []event) (*View, error) {
	nv := *v
	nv.Rev = rev
	if nv.shared == nil {
		nv.shared = newInterner()
	}
	copied := map[keyKind]bool{}
	cp := func(kind keyKind) {
		if copied[kind] {
			return
		}
		copied[kind] = true
		switch kind {
		case kindBroker:
			nv.Brokers = maps.Clone(v.Brokers)
		case kindTopic:
			nv.Topics = maps.Clone(v.Topics)
			nv.TopicsByID = maps.Clone(v.TopicsByID)
		case kindPartition:
			nv.Parts = maps.Clone(v.Parts)
		case kindBrokerConfig:
			nv.BrokerConfigs = maps.Clone(v.BrokerConfigs)
		case kindController:
			nv.candidates = maps.Clone(v.candidates)
		case kindACL:
			nv.ACLs = maps.Clone(v.ACLs)
			nv.ACLsRev = rev
		case kindQuota:
			nv.Quotas = maps.Clone(v.Quotas)
			nv.QuotasRev = rev
		case kindDeletion:
			nv.Deletions = maps.Clone(v.Deletions)
		case kindScram:
			nv.Scram = maps.Clone(v.Scram)
		}
	}
	partsCopied := map[string]bool{}
	for _, ev := range evs {
		kind, id, name, tp, err := k.parse(ev.key)
		if err != nil {
			return nil, err
		}
		if kind == kindOther {
			continue
		}
		cp(kind)
		switch kind {
		case kindClusterID:
			nv.ClusterID = string(ev.value)
		case kindBroker:
			if ev.value == nil {
				delete(nv.Brokers, id)
				continue
			}
			var b Broker
			if err := json.Unmarshal(ev.value, &b); err != nil {
				return nil, fmt.Errorf("broker %d registration: %w", id, err)
			}
			b.Epoch = ev.createRev
			nv.Brokers[id] = &b
		case kindTopic:
			if old := nv.Topics[name]; old != nil {
				delete(nv.TopicsByID, old.ID)
			}
			if ev.value == nil {
				delete(nv.Topics, name)
				continue
			}
			var t Topic
			if err := json.Unmarshal(ev.value, &t); err != nil {
				return nil, fmt.Errorf("topic %s: %w", name, err)
			}
			nv.Topics[name] = &t
			nv.TopicsByID[t.ID] = &t
		case kindPartition:
			ps := nv.Parts[tp.TopicID]
			tp.TopicID = sharedTopicID(ps, tp.TopicID)
			if !partsCopied[tp.TopicID] {
				ps = slices.Clone(ps)
				partsCopied[tp.TopicID] = true
			}
			if ev.value == nil {
				if int(tp.Partition) < len(ps) {
					ps[tp.Partition] = Partition{}
				}
				for len(ps) > 0 && ps[len(ps)-1].ModRevision == 0 {
					ps = ps[:len(ps)-1]
				}
				if len(ps) == 0 {
					delete(nv.Parts, tp.TopicID)
				} else {
					nv.Parts[tp.TopicID] = ps
				}
				continue
			}
			var st PartitionState
			if err := json.Unmarshal(ev.value, &st); err != nil {
				return nil, fmt.Errorf("partition %s/%d: %w", tp.TopicID, tp.Partition, err)
			}
			for int(tp.Partition) >= len(ps) {
				ps = append(ps, Partition{})
			}
			ps[tp.Partition] = Partition{TopicPartition: tp, State: nv.shared.state(st), ModRevision: ev.modRev}
			nv.Parts[tp.TopicID] = ps
		case kindBrokerConfig:
			if ev.value == nil {
				delete(nv.BrokerConfigs, id)
				continue
			}
			var m map[string]string
			if err := json.Unmarshal(ev.value, &m); err != nil {
				return nil, fmt.Errorf("broker configs %d: %w", id, err)
			}
			nv.BrokerConfigs[id] = m
		case kindController:
			if ev.value == nil {
				delete(nv.candidates, ev.key)
				continue
			}
			n, err := strconv.ParseInt(string(ev.value), 10, 32)
			if err != nil {
				continue
			}
			nv.candidates[ev.key] = candidate{createRev: ev.createRev, node: int32(n)}
		case kindACL:
			if err := nv.applyACL(ev.key, ev.value); err != nil {
				return nil, err
			}
		case kindQuota:
			if err := nv.applyQuota(ev.key, ev.value, ev.modRev); err != nil {
				return nil, err
			}
		case kindScram:
			if err := nv.applyScram(name, ev.value, ev.modRev); err != nil {
				return nil, err
			}
		case kindDeletion:
			acks := maps.Clone(nv.Deletions[tp.TopicID])
			if ev.value == nil {
				delete(acks, id)
			} else {
				if acks == nil {
					acks = map[int32]bool{}
				}
				acks[id] = true
			}
			if len(acks) == 0 {
				delete(nv.Deletions, tp.TopicID)
			} else {
				nv.Deletions[tp.TopicID] = acks
			}
		}
	}
	if copied[kindController] {
		nv.Controller = -1
		var best int64
		for _, c := range nv.candidates {
			if nv.Controller == -1 || c.createRev < best {
				best, nv.Controller = c.createRev, c.node
			}
		}
	}
	return &nv, nil
}
