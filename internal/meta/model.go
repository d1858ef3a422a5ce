// Package meta is Strata's cluster metadata: the model (brokers, topics,
// partition states, dynamic configs) as plain Go values, the etcd key
// layout that stores it, the compare-and-set transactions that change it,
// and a watch-fed, read-only cache that every broker serves Metadata from.
//
// Correctness rule (docs/cluster.md): every change of a partition is an
// etcd transaction that compares the partition key's mod revision with the
// revision the decision was made on. Leases only signal liveness; nothing
// is correct merely because a lease, lock or election is held.
package meta

import (
	"fmt"
	"maps"
	"slices"
	"sort"
)

// NoLeader is the leader id of a partition without a leader (Kafka's -1).
const NoLeader int32 = -1

// Endpoint is one advertised listener of a broker (Kafka's
// BrokerRegistration endpoint: listener name, host, port, protocol).
type Endpoint struct {
	Name     string `json:"name"`
	Host     string `json:"host"`
	Port     int32  `json:"port"`
	Protocol string `json:"protocol"`
}

// Broker is a broker's registration: what it wrote under its lease when it
// started. Epoch is not stored: it is the etcd create revision of the
// registration key, so it changes at every start (KIP-903's broker epoch).
type Broker struct {
	ID int32 `json:"id"`
	// Incarnation is a random id of this process start (Kafka's
	// incarnation id).
	Incarnation string `json:"incarnation"`
	// DirectoryID identifies the broker's first log dir (meta.properties
	// directory.id): a registration with the same node id and directory
	// is the same broker restarted, another directory is a duplicate
	// node.id.
	DirectoryID string     `json:"directory_id"`
	Rack        string     `json:"rack,omitempty"`
	Listeners   []Endpoint `json:"listeners"`
	// Controller is set on nodes whose process.roles include controller.
	Controller bool `json:"controller,omitempty"`
	// UncleanShutdown is set when the broker's previous run did not shut
	// down cleanly and its logs may miss acknowledged records (only with
	// strata.durable.acks=false; with fsynced acks nothing acknowledged
	// is lost). KIP-966: such a broker leaves the eligible leader replicas.
	UncleanShutdown bool `json:"unclean_shutdown,omitempty"`
	// Epoch is filled from the key's create revision when read.
	Epoch int64 `json:"-"`
}

// Listener returns the endpoint named name.
func (b *Broker) Listener(name string) (Endpoint, bool) {
	for _, e := range b.Listeners {
		if e.Name == name {
			return e, true
		}
	}
	return Endpoint{}, false
}

// Topic is a topic's identity and dynamic configuration. Its partitions
// are separate keys (one per partition).
type Topic struct {
	Name       string            `json:"name"`
	ID         string            `json:"id"` // Kafka's topic id (UUID, canonical text)
	Partitions int32             `json:"partitions"`
	Configs    map[string]string `json:"configs,omitempty"`
	Internal   bool              `json:"internal,omitempty"`
	// Deleting is set by DeleteTopics: brokers stop serving the topic and
	// delete their replicas; the controller then removes the keys.
	Deleting bool `json:"deleting,omitempty"`
}

// LeaderRecovery is Kafka's LeaderRecoveryState (KIP-704).
type LeaderRecovery int8

const (
	Recovered  LeaderRecovery = 0
	Recovering LeaderRecovery = 1 // an unclean leader that has not recovered yet
)

// PartitionState is one partition's replication state: the value of its
// key. It is Kafka's PartitionRegistration (metadata PartitionRecord)
// without the directory assignment.
type PartitionState struct {
	Replicas []int32 `json:"replicas"`
	ISR      []int32 `json:"isr"`
	// ELR and LastKnownELR are KIP-966's eligible leader replicas.
	ELR          []int32 `json:"elr,omitempty"`
	LastKnownELR []int32 `json:"last_known_elr,omitempty"`
	// Adding and Removing are the replicas a reassignment adds and
	// removes (KIP-455).
	Adding   []int32 `json:"adding,omitempty"`
	Removing []int32 `json:"removing,omitempty"`
	Leader   int32   `json:"leader"`
	// LeaderEpoch is bumped at every leader change (and every
	// reassignment that removes replicas, as Kafka).
	LeaderEpoch int32 `json:"leader_epoch"`
	// PartitionEpoch is bumped at every change of this state; an ISR
	// change request carrying an older one is refused (KIP-497).
	PartitionEpoch int32          `json:"partition_epoch"`
	LeaderRecovery LeaderRecovery `json:"leader_recovery,omitempty"`
	// ElectedBroker and ElectedBrokerEpoch record which incarnation the
	// controller elected (or confirmed) as leader: the broker id and its
	// broker epoch (registration create revision, KIP-903). When Leader's
	// current registration has another epoch, the leader restarted
	// within its session and the controller fences the old incarnation
	// with a new election (Kafka's ReplicationControlManager
	// handleBrokerFenced/handleBrokerUncleanShutdown). The record counts
	// only while ElectedBroker == Leader; epoch 0 is unknown.
	ElectedBroker      int32 `json:"elected_broker,omitempty"`
	ElectedBrokerEpoch int64 `json:"elected_broker_epoch,omitempty"`
	// ISREpochs records, for members of the ISR, the broker epoch of the
	// incarnation that was in sync when it joined (KIP-903: Kafka's
	// AlterPartition carries NewIsrWithEpochs, one BrokerEpoch per ISR
	// member, and the controller refuses a member whose registration has
	// another epoch). A member whose broker has re-registered since (a
	// restart within its session: its log may miss what it had) is not
	// trusted as in sync: the controller removes it from the ISR
	// (controller.rebuildEpochs). Absent or 0: unknown (state written
	// before this field); the controller then records the current epoch.
	ISREpochs map[int32]int64 `json:"isr_epochs,omitempty"`
}

// StaleISRMember reports whether ISR member id joined the ISR as another
// incarnation than the registered one (current: its broker epoch now, 0
// when unknown or not registered).
func (p PartitionState) StaleISRMember(id int32, current int64) bool {
	e := p.ISREpochs[id]
	return e > 0 && current > 0 && e != current
}

// LedByEarlierIncarnation reports whether the state names broker id as
// leader under an election the controller made for another incarnation
// of it (ElectedBroker is id, ElectedBrokerEpoch is known and is not
// current, id's broker epoch now). The controller replaces such a state
// with a new election (controller.rebuildEpochs); until then broker id
// must neither lead the partition nor serve it as a coordinator: after a
// restart within its session its log may hold records past the high
// watermark that the next leader does not have. Kafka's restarted broker
// never leads under its previous incarnation's election either (it
// registers fenced once the old session is gone, and the controller has
// moved the old incarnation's leaderships: ClusterControlManager
// registerBroker, ReplicationControlManager handleBrokerFenced).
func (p PartitionState) LedByEarlierIncarnation(id int32, current int64) bool {
	return p.Leader == id && p.ElectedBroker == id && p.ElectedBrokerEpoch > 0 && current > 0 && p.ElectedBrokerEpoch != current
}

// SyncISREpochs keeps ISREpochs in line with the ISR: entries of brokers
// that left it are dropped, members without a known epoch get epoch(id)
// when it is known (> 0). Members with a recorded epoch keep it.
func (p *PartitionState) SyncISREpochs(epoch func(int32) int64) {
	var out map[int32]int64
	for _, r := range p.ISR {
		e := p.ISREpochs[r]
		if e <= 0 && epoch != nil {
			e = epoch(r)
		}
		if e > 0 {
			if out == nil {
				out = make(map[int32]int64, len(p.ISR))
			}
			out[r] = e
		}
	}
	p.ISREpochs = out
}

// Clone returns a deep copy.
func (p PartitionState) Clone() PartitionState {
	p.Replicas = slices.Clone(p.Replicas)
	p.ISR = slices.Clone(p.ISR)
	p.ELR = slices.Clone(p.ELR)
	p.LastKnownELR = slices.Clone(p.LastKnownELR)
	p.Adding = slices.Clone(p.Adding)
	p.Removing = slices.Clone(p.Removing)
	p.ISREpochs = maps.Clone(p.ISREpochs)
	return p
}

// Equal reports whether two states are the same.
func (p PartitionState) Equal(o PartitionState) bool {
	return slices.Equal(p.Replicas, o.Replicas) && slices.Equal(p.ISR, o.ISR) && slices.Equal(p.ELR, o.ELR) &&
		slices.Equal(p.LastKnownELR, o.LastKnownELR) && slices.Equal(p.Adding, o.Adding) &&
		slices.Equal(p.Removing, o.Removing) && p.Leader == o.Leader && p.LeaderEpoch == o.LeaderEpoch &&
		p.PartitionEpoch == o.PartitionEpoch && p.LeaderRecovery == o.LeaderRecovery &&
		p.ElectedBroker == o.ElectedBroker && p.ElectedBrokerEpoch == o.ElectedBrokerEpoch &&
		maps.Equal(p.ISREpochs, o.ISREpochs)
}

// String is a compact, stable form used by transcript tests and logs.
func (p PartitionState) String() string {
	s := fmt.Sprintf("leader=%d epoch=%d pepoch=%d replicas=%v isr=%v", p.Leader, p.LeaderEpoch, p.PartitionEpoch, p.Replicas, p.ISR)
	if len(p.ELR) > 0 {
		s += fmt.Sprintf(" elr=%v", p.ELR)
	}
	if len(p.LastKnownELR) > 0 {
		s += fmt.Sprintf(" last_known_elr=%v", p.LastKnownELR)
	}
	if len(p.Adding) > 0 || len(p.Removing) > 0 {
		s += fmt.Sprintf(" adding=%v removing=%v", p.Adding, p.Removing)
	}
	if p.LeaderRecovery == Recovering {
		s += " recovering"
	}
	return s
}

// OfflineReplicas are the replicas whose broker is not live (Kafka's
// Metadata offline_replicas).
func (p PartitionState) OfflineReplicas(live func(int32) bool) []int32 {
	var out []int32
	for _, r := range p.Replicas {
		if !live(r) {
			out = append(out, r)
		}
	}
	return out
}

// TopicPartition names a partition by topic id and index.
type TopicPartition struct {
	TopicID   string
	Partition int32
}

// Partition is a partition's state as read from etcd, with the mod
// revision a compare-and-set must compare against.
type Partition struct {
	TopicPartition
	State       PartitionState
	ModRevision int64
}

// Config scopes of dynamic broker configuration (Kafka's
// ConfigResource.Type BROKER with an empty name = cluster default).
const DefaultBrokerScope int32 = -1

// sortedIDs returns the keys of a set sorted.
func sortedIDs(m map[int32]*Broker) []int32 {
	out := make([]int32, 0, len(m))
	for id := range m {
		out = append(out, id)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
