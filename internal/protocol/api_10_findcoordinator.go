package protocol

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/coordkey"
	"github.com/strata-io/strata/internal/meta"
)

// Kafka's internal topics, whose partition leaders are the coordinators.
const (
	offsetsTopic     = "__consumer_offsets"
	transactionTopic = "__transaction_state"
)

// clusterFindCoordinator answers FindCoordinator (key 10, v0-5) in a
// cluster: a group's coordinator is the leader of its __consumer_offsets
// partition, a transactional id's the leader of its __transaction_state
// partition (Kafka's GroupCoordinator.partitionFor, Utils.abs(hashCode) %
// partitions), at its address on the request's listener. While the
// internal topic is being created, or its partition has no live leader,
// the answer is COORDINATOR_NOT_AVAILABLE (retriable), as Kafka's.
func (s *Server) clusterFindCoordinator(c *conn, r *kmsg.FindCoordinatorRequest) *kmsg.FindCoordinatorResponse {
	resp := r.ResponseKind().(*kmsg.FindCoordinatorResponse)
	keys := r.CoordinatorKeys
	if r.Version < 4 {
		keys = []string{r.CoordinatorKey}
	}
	v := s.cfg.Cluster.View()
	ln := s.listenerName(c)
	for _, key := range keys {
		co := kmsg.NewFindCoordinatorResponseCoordinator()
		co.Key = key
		co.NodeID, co.Host, co.Port = -1, "", -1
		topic := ""
		switch r.CoordinatorType {
		case 0:
			topic = offsetsTopic
		case 1:
			if s.cfg.Txn != nil {
				topic = transactionTopic
				break
			}
			co.ErrorCode = kerr.CoordinatorNotAvailable.Code
			co.ErrorMessage = kmsg.StringPtr("Strata has no transaction coordinator")
		default:
			co.ErrorCode = kerr.InvalidRequest.Code
			co.ErrorMessage = kmsg.StringPtr("unsupported coordinator type")
		}
		if topic != "" {
			s.locateCoordinator(v, ln, topic, key, &co)
		}
		resp.Coordinators = append(resp.Coordinators, co)
	}
	if r.Version < 4 {
		co := resp.Coordinators[0]
		resp.Coordinators = nil
		resp.ErrorCode, resp.ErrorMessage = co.ErrorCode, co.ErrorMessage
		resp.NodeID, resp.Host, resp.Port = co.NodeID, co.Host, co.Port
	}
	return resp
}

// locateCoordinator fills co with the leader of key's partition of topic.
func (s *Server) locateCoordinator(v *meta.View, listener, topic, key string, co *kmsg.FindCoordinatorResponseCoordinator) {
	t := v.Topics[topic]
	if t == nil || t.Deleting || t.Partitions <= 0 {
		s.cfg.Cluster.EnsureInternalTopic(topic)
		co.ErrorCode = kerr.CoordinatorNotAvailable.Code
		co.ErrorMessage = kmsg.StringPtr("the coordinator topic " + topic + " is being created")
		return
	}
	_, part, ok := v.Partition(topic, coordkey.Partition(key, t.Partitions))
	if !ok || !v.Live(part.State.Leader) {
		// A broker restarted within its session is still named while it
		// holds the partition under its previous incarnation's election:
		// it answers NOT_COORDINATOR until elected again, which clients
		// retry (kadm returned COORDINATOR_NOT_AVAILABLE to callers right
		// after a restart when that window answered it here).
		co.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return
	}
	e, _, ok := endpoint(v, part.State.Leader, listener)
	if !ok {
		co.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return
	}
	co.NodeID, co.Host, co.Port = part.State.Leader, e.Host, e.Port
}
