// Package controller decides Strata's partition placement and leadership:
// where a new topic's replicas go (rack-aware, balanced leaders, or an
// explicit replica_assignment), and what happens to partitions when
// brokers leave and return (leader elections: ISR, then KIP-966 eligible
// leader replicas, then unclean only when the topic allows it).
//
// The decisions are pure functions of a State and return the intended
// partition changes (Decision), each carrying the mod revision it was
// decided on; the driver (driver.go) commits them as compare-and-set
// transactions, so a decision made on stale metadata is simply lost and
// made again. Transcript tests in testdata/ drive the pure part.
package controller

import (
	"sort"
	"strconv"

	"github.com/strata-io/strata/internal/meta"
)

// BrokerInfo is what placement and elections need to know of a live
// broker.
type BrokerInfo struct {
	ID   int32
	Rack string
	// UncleanShutdown is set when the broker's previous run ended without
	// a clean shutdown and its log may miss acknowledged records (only
	// possible with strata.durable.acks=false): KIP-966 removes such a
	// broker from the eligible leader replicas.
	UncleanShutdown bool
	// Epoch is the broker epoch (its registration's create revision,
	// KIP-903): it changes at every restart; 0 when unknown.
	Epoch int64
}

// Policy is a topic's election policy.
type Policy struct {
	// MinISR is min.insync.replicas.
	MinISR int
	// Unclean is unclean.leader.election.enable.
	Unclean bool
}

// TopicInfo is one topic's partitions and policy.
type TopicInfo struct {
	Name   string
	ID     string
	Policy Policy
	Parts  []meta.Partition
	// Deleting topics take no further decisions.
	Deleting bool
}

// State is the controller's input: the live brokers and every topic.
type State struct {
	Brokers map[int32]BrokerInfo
	Topics  map[string]*TopicInfo
}

// Live reports whether a broker is registered.
func (s *State) Live(id int32) bool { _, ok := s.Brokers[id]; return ok }

// BrokerIDs returns the live brokers sorted by id.
func (s *State) BrokerIDs() []int32 {
	out := make([]int32, 0, len(s.Brokers))
	for id := range s.Brokers {
		out = append(out, id)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// TopicNames returns the topic names sorted.
func (s *State) TopicNames() []string {
	out := make([]string, 0, len(s.Topics))
	for n := range s.Topics {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// FromView builds a State from a metadata view; policy gives each topic's
// election policy (from its configs and the broker defaults).
func FromView(v *meta.View, policy func(*meta.Topic) Policy) *State {
	s := BrokersFromView(v)
	s.Topics = make(map[string]*TopicInfo, len(v.Topics))
	for name, t := range v.Topics {
		s.Topics[name] = &TopicInfo{Name: name, ID: t.ID, Policy: policy(t), Parts: v.Parts[t.ID], Deleting: t.Deleting}
	}
	return s
}

// BrokersFromView builds a State of the view's live brokers only (no
// topics): enough for NextLeader.
func BrokersFromView(v *meta.View) *State {
	s := &State{Brokers: make(map[int32]BrokerInfo, len(v.Brokers))}
	for id, b := range v.Brokers {
		s.Brokers[id] = BrokerInfo{ID: id, Rack: b.Rack, UncleanShutdown: b.UncleanShutdown, Epoch: b.Epoch}
	}
	return s
}

// Decision is one intended partition change: write New over the state
// read at Expect (0: create).
type Decision struct {
	Topic  string
	TP     meta.TopicPartition
	Expect int64
	New    meta.PartitionState
	// Reason says why, for logs.
	Reason string
}

// load is how many replicas and leaderships each broker holds.
type load struct {
	replicas map[int32]int
	leaders  map[int32]int
}

func (s *State) load() load {
	l := load{replicas: map[int32]int{}, leaders: map[int32]int{}}
	for _, t := range s.Topics {
		for _, p := range t.Parts {
			for _, r := range p.State.Replicas {
				l.replicas[r]++
			}
			if p.State.Leader != meta.NoLeader {
				l.leaders[p.State.Leader]++
			}
		}
	}
	return l
}

func itoa(n int) string { return strconv.Itoa(n) }
