package protocol

import (
	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Fetch v13+ names topics by id (KIP-516) and v15 carries the follower's
// id and broker epoch in ReplicaState instead of the top-level replica id
// (KIP-903). The handlers work on topic names: resolveFetchTopicIDs turns
// a v13+ request's ids into names at the door, and the encoder writes the
// ids back (fetchReply.topicID).

// unknownFetchTopic is a v13+ topic id this broker does not know, with the
// partitions asked: each is answered UNKNOWN_TOPIC_ID (Kafka's
// KafkaApis.handleFetchRequest, erroneous partitions).
type unknownFetchTopic struct {
	id    [16]byte
	parts []int32
}

// fetchReplicaID is the replica id of a Fetch: ReplicaState.ReplicaId from
// v15 on (the top-level field is gone), the top-level ReplicaId before
// (FetchRequest.replicaId() in Kafka's FetchRequest.java).
func fetchReplicaID(req *kmsg.FetchRequest) int32 {
	if req.Version >= 15 {
		return req.ReplicaState.ID
	}
	return req.ReplicaID
}

// fetchBrokerEpoch is the follower's broker epoch (v15+), -1 before: the
// leader then cannot check it (Replica.updateFetchStateOrThrow).
func fetchBrokerEpoch(req *kmsg.FetchRequest) int64 {
	if req.Version >= 15 {
		return req.ReplicaState.Epoch
	}
	return -1
}

// resolveFetchTopicIDs names every topic of a v13+ request by its id, in
// place (topics and forgotten topics); topics whose id is unknown (or
// zero) are removed from the request and returned.
func (s *Server) resolveFetchTopicIDs(req *kmsg.FetchRequest) []unknownFetchTopic {
	if req.Version < 13 {
		return nil
	}
	var unknown []unknownFetchTopic
	kept := req.Topics[:0]
	for _, t := range req.Topics {
		if name, ok := s.topicName(t.TopicID); ok {
			t.Topic = name
			kept = append(kept, t)
			continue
		}
		u := unknownFetchTopic{id: t.TopicID}
		for _, p := range t.Partitions {
			u.parts = append(u.parts, p.Partition)
		}
		unknown = append(unknown, u)
	}
	req.Topics = kept
	keptF := req.ForgottenTopics[:0]
	for _, t := range req.ForgottenTopics {
		if name, ok := s.topicName(t.TopicID); ok {
			t.Topic = name
			keptF = append(keptF, t)
		}
	}
	req.ForgottenTopics = keptF
	return unknown
}

// topicName returns the name of the topic with id.
func (s *Server) topicName(id [16]byte) (string, bool) {
	if id == ([16]byte{}) {
		return "", false
	}
	t := s.b.TopicByID(uuid.UUID(id))
	if t == nil {
		return "", false
	}
	return t.Name, true
}

// topicID returns the id of the named topic (zero when unknown).
func (s *Server) topicID(name string) [16]byte {
	if t := s.b.Topic(name); t != nil {
		return t.ID
	}
	return [16]byte{}
}

// addUnknownTopics appends the UNKNOWN_TOPIC_ID answers (v13+).
func (fr *fetchReply) addUnknownTopics(unknown []unknownFetchTopic) {
	for _, u := range unknown {
		ft := fetchTopic{id: u.id, hasID: true}
		for _, p := range u.parts {
			ft.parts = append(ft.parts, fetchPart{partition: p, errorCode: kerr.UnknownTopicID.Code, hw: -1, lso: -1, logStart: -1})
		}
		fr.topics = append(fr.topics, ft)
		fr.hasError = true
	}
}
