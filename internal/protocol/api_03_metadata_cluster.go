package protocol

import (
	"context"
	"errors"
	"slices"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/broker"
	"github.com/strata-io/strata/internal/meta"
)

// clusterMetadata answers Metadata from the cluster metadata view: every
// live broker with its address on the listener the request came in on
// (Kafka's MetadataCache.getAliveBrokerNodes(listenerName)), and per
// partition its leader, leader epoch, replicas, ISR and offline replicas.
// A partition whose leader is not live is LEADER_NOT_AVAILABLE with leader
// -1; one whose leader has no such listener is LISTENER_NOT_FOUND
// (KafkaMetadataCache.getPartitionMetadata). Topics being deleted are not
// listed.
func (s *Server) clusterMetadata(ctx context.Context, c *conn, req *kmsg.MetadataRequest, resp *kmsg.MetadataResponse) {
	v := s.cfg.Cluster.View()
	ln := s.listenerName(c)
	for _, id := range v.BrokerIDs() {
		e, rack, ok := endpoint(v, id, ln)
		if !ok {
			continue
		}
		br := kmsg.NewMetadataResponseBroker()
		br.NodeID, br.Host, br.Port = id, e.Host, e.Port
		if rack != "" {
			br.Rack = &rack
		}
		resp.Brokers = append(resp.Brokers, br)
	}
	cid := v.ClusterID
	if cid == "" {
		cid = s.b.ClusterID()
	}
	resp.ClusterID = &cid
	resp.ControllerID = metadataController(v, ln, s.b.NodeID())

	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	if all {
		for _, name := range v.TopicNames() {
			if t := v.Topics[name]; !t.Deleting {
				resp.Topics = append(resp.Topics, viewTopicMetadata(v, t, ln, req.Version >= 6))
			}
		}
		return
	}
	autoCreate := s.cfg.AutoCreateTopics && (req.Version < 4 || req.AllowAutoTopicCreation)
	for _, rt := range req.Topics {
		var t *meta.Topic
		if rt.Topic == nil {
			t = v.TopicsByID[uuid.UUID(rt.TopicID).String()]
			if t == nil || t.Deleting {
				mt := kmsg.NewMetadataResponseTopic()
				mt.TopicID = rt.TopicID
				mt.ErrorCode = kerr.UnknownTopicID.Code
				resp.Topics = append(resp.Topics, mt)
				continue
			}
		} else if t = v.Topics[*rt.Topic]; t != nil && t.Deleting {
			t = nil
		}
		if t == nil {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic = rt.Topic
			mt.ErrorCode = kerr.UnknownTopicOrPartition.Code
			if autoCreate && v.Topics[*rt.Topic] == nil {
				mt.ErrorCode = errCode(s.autoCreate(ctx, *rt.Topic))
			}
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		resp.Topics = append(resp.Topics, viewTopicMetadata(v, t, ln, req.Version >= 6))
	}
}

// autoCreate creates a topic for a Metadata request (auto.create.topics.enable).
// As in Kafka, the request that creates it is answered LEADER_NOT_AVAILABLE
// without partitions; clients retry and find it on their next request.
// __consumer_offsets and __transaction_state are created as FindCoordinator
// creates them, with their own partition counts, replication factors and
// configs (Kafka's AutoTopicCreationManager.creatableTopic): created with
// the defaults for ordinary topics they would have num.partitions
// partitions, and every coordinator would refuse them (sarama asks for
// __consumer_offsets' metadata before its transactional producer's
// AddOffsetsToTxn).
func (s *Server) autoCreate(ctx context.Context, name string) error {
	if name == offsetsTopic || name == transactionTopic {
		s.cfg.Cluster.EnsureInternalTopic(name)
		return kerr.LeaderNotAvailable
	}
	_, err := s.cfg.Cluster.CreateTopic(ctx, broker.CreateTopicRequest{Name: name, NumPartitions: -1, ReplicationFactor: -1}, nil)
	if err == nil || errors.Is(err, kerr.TopicAlreadyExists) {
		return kerr.LeaderNotAvailable
	}
	return err
}

// metadataController is the controller id Metadata reports: the active
// controller when it is a live broker reachable on the listener, else this
// broker. Clients send admin requests to it, and any Strata broker serves
// them (Kafka's KRaft brokers likewise report a live broker, not the
// controller, which clients cannot reach).
func metadataController(v *meta.View, listener string, self int32) int32 {
	if _, _, ok := endpoint(v, v.Controller, listener); ok {
		return v.Controller
	}
	return self
}

// viewTopicMetadata describes one topic from the view, the leaders at their
// endpoints on listener. A live leader without that listener is
// LISTENER_NOT_FOUND when errorUnavailableListeners (Metadata v6+), else
// LEADER_NOT_AVAILABLE (Kafka's KafkaApis.handleTopicMetadataRequest and
// KRaftMetadataCache.getPartitionMetadata).
func viewTopicMetadata(v *meta.View, t *meta.Topic, listener string, errorUnavailableListeners bool) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.Name
	mt.Topic = &name
	if id, err := uuid.Parse(t.ID); err == nil {
		mt.TopicID = id
	}
	mt.IsInternal = t.Internal
	for i, p := range v.Parts[t.ID] {
		if p.ModRevision == 0 {
			continue
		}
		st := p.State
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = int32(i)
		mp.Leader, mp.LeaderEpoch = st.Leader, st.LeaderEpoch
		mp.Replicas = slices.Clone(st.Replicas)
		mp.ISR = slices.Clone(st.ISR)
		mp.OfflineReplicas = st.OfflineReplicas(v.Live)
		if mp.OfflineReplicas == nil {
			mp.OfflineReplicas = []int32{}
		}
		switch _, _, ok := endpoint(v, st.Leader, listener); {
		case v.ServingLeader(st) == meta.NoLeader:
			mp.Leader = -1
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
		case !ok && errorUnavailableListeners:
			mp.Leader = -1
			mp.ErrorCode = kerr.ListenerNotFound.Code
		case !ok:
			mp.Leader = -1
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
		}
		mt.Partitions = append(mt.Partitions, mp)
	}
	if len(mt.Partitions) < int(t.Partitions) {
		// A topic whose partition keys are still being written (a large
		// CreateTopics) is not listed complete.
		mt.ErrorCode = kerr.LeaderNotAvailable.Code
	}
	return mt
}
