package protocol

import (
	"context"
	"errors"

	"github.com/google/uuid"
	"github.com/strata-io/strata/internal/broker"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleMetadata (key 3, v0-12) describes this broker and the requested
// topics (all topics when the list is null, or empty before v1),
// auto-creating unknown ones when auto.create.topics.enable and the client
// allows it.
func (s *Server) handleMetadata(ctx context.Context, c *conn, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	if s.cfg.Cluster != nil {
		s.clusterMetadata(ctx, c, req, resp)
		return reply{msg: resp}, nil
	}
	br := kmsg.NewMetadataResponseBroker()
	br.NodeID, br.Host, br.Port = s.b.NodeID(), c.listener().host, c.listener().port
	resp.Brokers = append(resp.Brokers, br)
	cid := s.b.ClusterID()
	resp.ClusterID = &cid
	resp.ControllerID = s.b.NodeID()

	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	if all {
		for _, t := range s.b.Topics() {
			resp.Topics = append(resp.Topics, topicMetadata(t, req.Version))
		}
		return reply{msg: resp}, nil
	}
	autoCreate := s.cfg.AutoCreateTopics && (req.Version < 4 || req.AllowAutoTopicCreation)
	for _, rt := range req.Topics {
		var t *broker.Topic
		if rt.Topic == nil {
			id := uuid.UUID(rt.TopicID)
			t = s.b.TopicByID(id)
			if t == nil {
				mt := kmsg.NewMetadataResponseTopic()
				mt.TopicID = rt.TopicID
				mt.ErrorCode = kerr.UnknownTopicID.Code
				resp.Topics = append(resp.Topics, mt)
				continue
			}
		} else {
			t = s.b.Topic(*rt.Topic)
		}
		if t == nil && autoCreate {
			var err error
			t, err = s.b.CreateTopic(broker.CreateTopicRequest{Name: *rt.Topic, NumPartitions: -1, ReplicationFactor: -1})
			if errors.Is(err, kerr.TopicAlreadyExists) {
				t, err = s.b.Topic(*rt.Topic), nil
			} else if err == nil {
				// As in Kafka, the request that auto-creates a topic is
				// answered LEADER_NOT_AVAILABLE without partitions; clients
				// retry and find it on their next metadata request.
				err = kerr.LeaderNotAvailable
			}
			if err != nil {
				mt := kmsg.NewMetadataResponseTopic()
				mt.Topic = rt.Topic
				mt.ErrorCode = errCode(err)
				resp.Topics = append(resp.Topics, mt)
				continue
			}
		}
		if t == nil {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic = rt.Topic
			mt.ErrorCode = kerr.UnknownTopicOrPartition.Code
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		resp.Topics = append(resp.Topics, topicMetadata(t, req.Version))
	}
	return reply{msg: resp}, nil
}

// topicMetadata describes one topic and its partitions.
func topicMetadata(t *broker.Topic, _ int16) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.Name
	mt.Topic = &name
	mt.TopicID = t.ID
	mt.IsInternal = t.Internal
	for _, p := range t.Partitions {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = p.Index
		l := p.Leadership()
		mp.Leader = l.Leader
		mp.LeaderEpoch = l.LeaderEpoch
		mp.Replicas = append([]int32(nil), l.Replicas...)
		mp.ISR = append([]int32(nil), l.ISR...)
		if r := p.Replica(); r != nil {
			// A replicated partition: its replication state is current.
			st := r.State()
			mp.Leader, mp.LeaderEpoch, mp.Replicas, mp.ISR = st.Leader, st.LeaderEpoch, st.Replicas, st.ISR
		}
		mp.OfflineReplicas = []int32{}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}
