package protocol

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/broker"
	"github.com/strata-io/strata/internal/meta"
)

// Cluster is this node's part in a cluster (docs/cluster.md): the
// metadata every broker answers from, and topic administration through the
// cluster metadata store, which any broker may run. server implements it;
// a nil Cluster serves a single node from the broker's own topics.
type Cluster interface {
	// View is the current metadata snapshot (immutable).
	View() *meta.View
	// SyncView is View once it reflects every change the store committed
	// before the call (meta.Cache.Sync): admin requests decide on it, as
	// Kafka's controller decides on its committed state, so that what was
	// just done through another broker is seen.
	SyncView(ctx context.Context) (*meta.View, error)
	// CreateTopic creates a topic; req has the request's values (-1 for
	// the defaults), assignment is CreateTopics' replica_assignment.
	CreateTopic(ctx context.Context, req broker.CreateTopicRequest, assignment map[int32][]int32) (CreatedTopic, error)
	// CreateTopics creates the topics of one CreateTopics request together
	// (one placement pass, few transactions); one result per request.
	CreateTopics(ctx context.Context, reqs []broker.CreateTopicRequest, assignments []map[int32][]int32) ([]CreatedTopic, []error)
	// CreatePartitions grows a topic to total partitions.
	CreatePartitions(ctx context.Context, topic string, total int32, assignment [][]int32, validateOnly bool) error
	// DeleteTopic deletes a topic; it returns once no broker serves it.
	DeleteTopic(ctx context.Context, topic string) error
	// AlterTopicConfigs replaces a topic's configs with edit's result on
	// the stored ones, validated first.
	AlterTopicConfigs(ctx context.Context, topic string, edit func(cur map[string]string) (map[string]string, error), validateOnly bool) error
	// AlterBrokerConfigs replaces the dynamic configs of a broker (scope:
	// its node id) or of the cluster default (meta.DefaultBrokerScope)
	// with edit's result on the stored ones, validated first.
	AlterBrokerConfigs(ctx context.Context, scope int32, edit func(cur map[string]string) (map[string]string, error), validateOnly bool) error
	// EnsureInternalTopic starts creating an internal topic
	// (__consumer_offsets, __transaction_state) unless it exists.
	EnsureInternalTopic(name string)
	// ElectLeaders runs ElectLeaders' elections (typ 0 PREFERRED, 1
	// UNCLEAN); parts nil means every partition.
	ElectLeaders(ctx context.Context, typ int8, parts map[string][]int32) ([]PartitionResult, error)
	// AlterReassignments starts (or, with a nil target, cancels) partition
	// reassignments; one result per entry, in order.
	AlterReassignments(ctx context.Context, rs []Reassignment, allowRFChange bool) []PartitionResult
	// ListReassignments lists reassignments in progress among parts (nil:
	// all), decided on a view synced with the store.
	ListReassignments(ctx context.Context, parts map[string][]int32) ([]Reassigning, error)
	// UnregisterBroker removes broker id's registration (UnregisterBroker,
	// KIP-631); BROKER_ID_NOT_REGISTERED when there is none.
	UnregisterBroker(ctx context.Context, id int32) error
}

// Reassignment is one AlterPartitionReassignments entry (Target nil
// cancels).
type Reassignment struct {
	Topic     string
	Partition int32
	Target    []int32
}

// Reassigning is a partition with a reassignment in progress.
type Reassigning struct {
	Topic                      string
	Partition                  int32
	Replicas, Adding, Removing []int32
}

// PartitionResult is one partition's outcome of a cluster operation; Err
// wraps the Kafka error (kerr) with its message, nil on success.
type PartitionResult struct {
	Topic     string
	Partition int32
	Err       error
}

// CreatedTopic is what CreateTopics answers about a new topic.
type CreatedTopic struct {
	ID                uuid.UUID
	Partitions        int32
	ReplicationFactor int16
	Configs           map[string]string
}

// notLeaderError is NOT_LEADER_OR_FOLLOWER with the leader this broker
// knows (KIP-951: Produce v10+ and Fetch v12+ carry it back).
type notLeaderError struct {
	err    error
	leader int32
	epoch  int32
}

func (e *notLeaderError) Error() string { return e.err.Error() }
func (e *notLeaderError) Unwrap() error { return e.err }

// currentLeader returns the leader and epoch an error names (-1, -1 when
// it is not a NOT_LEADER_OR_FOLLOWER with a known leader).
func currentLeader(err error) (int32, int32) {
	var nl *notLeaderError
	if errors.As(err, &nl) {
		return nl.leader, nl.epoch
	}
	return -1, -1
}

// leaderPartition returns a partition this broker leads, for a leader-only
// request (produce, consumer fetch, list offsets, delete records) with the
// client's current leader epoch (-1: none, KIP-320). A partition the
// cluster has but this broker does not lead is NOT_LEADER_OR_FOLLOWER
// (Kafka's ReplicaManager.getPartitionOrError), with the current leader; a
// partition nobody has is UNKNOWN_TOPIC_OR_PARTITION.
func (s *Server) leaderPartition(topic string, idx int32, currentEpoch int32) (*broker.Partition, error) {
	p, err := s.b.Partition(topic, idx)
	if s.cfg.Cluster != nil {
		v := s.cfg.Cluster.View()
		t, part, ok := v.Partition(topic, idx)
		if !ok || t.Deleting {
			return nil, fmt.Errorf("partition %s-%d: %w", topic, idx, kerr.UnknownTopicOrPartition)
		}
		if err != nil {
			return nil, s.notLeader(topic, idx, part.State)
		}
		if r := p.Replica(); r == nil && (part.State.Leader != s.b.NodeID() || len(part.State.Replicas) > 1) {
			// Not the leader, or a replicated partition whose replication
			// state is not attached yet (the reconciler creates the log,
			// then hands it to the replica Manager): served once it is,
			// never as a single replica.
			return nil, s.notLeader(topic, idx, part.State)
		}
	}
	if err != nil {
		return nil, err
	}
	if err := checkLeaderEpoch(p, currentEpoch); err != nil {
		if errors.Is(err, kerr.NotLeaderForPartition) && s.cfg.Cluster != nil {
			if _, part, ok := s.cfg.Cluster.View().Partition(topic, idx); ok {
				return nil, s.notLeader(topic, idx, part.State)
			}
		}
		return nil, err
	}
	return p, nil
}

// notLeader is the NOT_LEADER_OR_FOLLOWER answer for a partition whose
// state the metadata has.
//
// The leader named (KIP-951's CurrentLeader) is the one Metadata names
// (meta.View.ServingLeader): none while the partition has no live leader
// or one elected for an earlier incarnation of a restarted broker.
func (s *Server) notLeader(topic string, idx int32, st meta.PartitionState) error {
	if s.cfg.Cluster != nil && s.cfg.Cluster.View().ServingLeader(st) == meta.NoLeader {
		why := "has no leader now"
		if st.Leader != meta.NoLeader {
			why = fmt.Sprintf("has no leader now (broker %d was elected for an earlier incarnation or is not live; the controller elects again)", st.Leader)
		}
		return &notLeaderError{
			err:    fmt.Errorf("%s-%d %s, and this broker (%d) does not lead it: %w", topic, idx, why, s.b.NodeID(), kerr.NotLeaderForPartition),
			leader: -1, epoch: -1,
		}
	}
	return &notLeaderError{
		err: fmt.Errorf("%s-%d is led by broker %d (leader epoch %d), not by this broker (%d): %w",
			topic, idx, st.Leader, st.LeaderEpoch, s.b.NodeID(), kerr.NotLeaderForPartition),
		leader: st.Leader, epoch: st.LeaderEpoch,
	}
}

// endpoint returns broker id's address on the listener name (false when
// it is not live or has no such listener).
func endpoint(v *meta.View, id int32, listener string) (meta.Endpoint, string, bool) {
	b := v.Brokers[id]
	if b == nil {
		return meta.Endpoint{}, "", false
	}
	e, ok := b.Listener(listener)
	return e, b.Rack, ok
}

// leaderEndpoints lists the endpoints (on the connection's listener) of
// the leaders named in NOT_LEADER_OR_FOLLOWER answers (KIP-951
// NodeEndpoints).
func (s *Server) leaderEndpoints(c *conn, ids map[int32]bool) []kmsg.ProduceResponseBroker {
	if s.cfg.Cluster == nil || len(ids) == 0 {
		return nil
	}
	v := s.cfg.Cluster.View()
	var out []kmsg.ProduceResponseBroker
	for _, id := range v.BrokerIDs() {
		if !ids[id] {
			continue
		}
		e, rack, ok := endpoint(v, id, s.listenerName(c))
		if !ok {
			continue
		}
		b := kmsg.NewProduceResponseBroker()
		b.NodeID, b.Host, b.Port = id, e.Host, e.Port
		if rack != "" {
			b.Rack = &rack
		}
		out = append(out, b)
	}
	return out
}

// listenerName is the name of the listener c came in on.
func (s *Server) listenerName(c *conn) string {
	if c == nil {
		return s.defaultListener().Name
	}
	return c.l.Name
}

// followerRead is the partition a consumer fetch of v11+ reads from when
// this broker is not its leader but one of its followers (KIP-392: Kafka's
// Partition.fetchRecords with fetchOnlyLeader false): whole batches up to
// this replica's high watermark, which replication sets (under
// strata.durable.acks never past what this replica fsynced), after the
// request's current leader epoch is checked against this replica's
// (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH, KIP-320). A broker holding
// no follower replica answers leaderErr, the leader's refusal.
func (s *Server) followerRead(topic string, idx int32, currentEpoch int32, leaderErr error) (*broker.Partition, error) {
	if errors.Is(leaderErr, kerr.FencedLeaderEpoch) || errors.Is(leaderErr, kerr.UnknownLeaderEpoch) {
		return nil, leaderErr
	}
	p, err := s.b.Partition(topic, idx)
	if err != nil {
		return nil, leaderErr
	}
	r := p.Replica()
	if r == nil {
		return nil, leaderErr
	}
	if err := r.CheckFollowerRead(currentEpoch); err != nil {
		if errors.Is(err, kerr.NotLeaderForPartition) {
			return nil, leaderErr
		}
		return nil, err
	}
	s.metrics.followerReads.Inc()
	return p, nil
}

// preferredReadReplica is the replica a consumer in rack should read p
// from, or -1 for this broker, its leader (KIP-392, Kafka's
// RackAwareReplicaSelector over the cluster's brokers and their
// broker.rack).
func (s *Server) preferredReadReplica(p *broker.Partition, fetchOffset int64, rack string) int32 {
	r := p.Replica()
	if r == nil || s.cfg.Cluster == nil {
		return -1
	}
	brokers := s.cfg.Cluster.View().Brokers
	sameRack := func(id int32) bool {
		b := brokers[id]
		return b != nil && b.Rack == rack
	}
	live := func(id int32) bool { return brokers[id] != nil }
	return r.PreferredReadReplica(fetchOffset, sameRack, live)
}
