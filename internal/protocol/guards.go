package protocol

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/strata-io/strata/internal/authz"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Authorization of every API: each guard wraps one API key's handler and
// does what Kafka's KafkaApis (and, for what a KRaft broker forwards,
// ControllerApis) checks for that key, with Kafka's codes: requests or
// parts the principal may not touch are answered TOPIC_ (29), GROUP_ (30),
// CLUSTER_ (31) or TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53), and only
// the authorized rest reaches the handler, whose answer the guard
// completes. The table of APIs, resources and operations is Kafka's
// documentation's "Operations and Resources on Protocols"; where Kafka's
// code differs from that table, the code is followed (noted below).

// handlerFn is a handler's function.
type handlerFn func(ctx context.Context, c *conn, req kmsg.Request) (reply, error)

// guardFn authorizes one request and calls next with what may proceed.
type guardFn func(s *Server, ctx context.Context, c *conn, req kmsg.Request, next handlerFn) (reply, error)

// guards maps API keys to their guards. Keys without one need no
// authorization (ApiVersions, SaslHandshake, SaslAuthenticate) or check
// inside their handler (Fetch: its session's partitions; the ACL and quota
// APIs).
var guards = map[int16]guardFn{
	0:  guardProduce,
	2:  guardListOffsets,
	3:  guardMetadata,
	8:  guardOffsetCommit,
	9:  guardOffsetFetch,
	10: guardFindCoordinator,
	11: guardGroupRead,
	12: guardGroupRead,
	13: guardGroupRead,
	14: guardGroupRead,
	15: guardDescribeGroups,
	16: guardListGroups,
	19: guardCreateTopics,
	20: guardDeleteTopics,
	21: guardDeleteRecords,
	22: guardInitProducerID,
	23: guardOffsetForLeaderEpoch,
	24: guardAddPartitionsToTxn,
	25: guardAddOffsetsToTxn,
	26: guardEndTxn,
	27: guardWriteTxnMarkers,
	28: guardTxnOffsetCommit,
	32: guardDescribeConfigs,
	33: guardAlterConfigs,
	35: guardDescribeLogDirs,
	37: guardCreatePartitions,
	42: guardDeleteGroups,
	43: guardElectLeaders,
	44: guardIncrementalAlterConfigs,
	45: guardAlterPartitionReassignments,
	46: guardListPartitionReassignments,
	47: guardOffsetDelete,
	50: guardDescribeUserScram,
	51: guardAlterUserScram,
	60: guardDescribeCluster,
	61: guardDescribeProducers,
	64: guardUnregisterBroker,
	65: guardDescribeTransactions,
	66: guardListTransactions,
	68: guardConsumerGroupHeartbeat,
	69: guardConsumerGroupDescribe,
}

// guard wraps the served handlers with their guards.
func (s *Server) guard(h map[int16]handler) map[int16]handler {
	for key, g := range guards {
		hd, ok := h[key]
		if !ok {
			continue
		}
		next, g := hd.fn, g
		hd.fn = func(ctx context.Context, c *conn, req kmsg.Request) (reply, error) {
			return g(s, ctx, c, req, next)
		}
		h[key] = hd
	}
	return h
}

// guardProduce: WRITE on each topic (TOPIC_AUTHORIZATION_FAILED per
// partition), and WRITE on the transactional id for transactional
// records (TRANSACTIONAL_ID_AUTHORIZATION_FAILED on every partition).
// With acks=0 there is no answer to carry an error: the connection is
// closed, as Kafka does. Idempotent producers are authorized when they
// get their producer id (InitProducerId), as in Kafka 3.x (KIP-679).
func guardProduce(s *Server, ctx context.Context, c *conn, kreq kmsg.Request, next handlerFn) (reply, error) {
	req := kreq.(*kmsg.ProduceRequest)
	if s.cfg.Authorizer == nil {
		return next(ctx, c, kreq)
	}
	fail := func(code int16, which func(topic string) bool) *kmsg.ProduceResponse {
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		for _, t := range req.Topics {
			if !which(t.Topic) {
				continue
			}
			rt := kmsg.NewProduceResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewProduceResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code
				rp.BaseOffset, rp.LogAppendTime, rp.LogStartOffset = -1, -1, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	if req.TransactionID != nil && hasTransactional(req) &&
		!c.allowed(authz.OpWrite, authz.ResourceTransactionalID, *req.TransactionID) {
		if req.Acks == 0 {
			return reply{}, fmt.Errorf("produce (acks=0) to transactional id %q: %w", *req.TransactionID, kerr.TransactionalIDAuthorizationFailed)
		}
		return reply{msg: fail(kerr.TransactionalIDAuthorizationFailed.Code, func(string) bool { return true })}, nil
	}
	tf := c.topics(authz.OpWrite)
	denied := func(topic string) bool { return !tf.ok(topic) }
	allowed := req.Topics[:0:0]
	for _, t := range req.Topics {
		if tf.ok(t.Topic) {
			allowed = append(allowed, t)
		}
	}
	if len(allowed) == len(req.Topics) {
		return next(ctx, c, kreq)
	}
	if req.Acks == 0 {
		return reply{}, fmt.Errorf("produce (acks=0) to a topic the principal may not write: %w", kerr.TopicAuthorizationFailed)
	}
	part := *req
	part.Topics = allowed
	rep, err := next(ctx, c, &part)
	if err != nil || rep.msg == nil {
		return rep, err
	}
	resp := rep.msg.(*kmsg.ProduceResponse)
	resp.Topics = append(resp.Topics, fail(kerr.TopicAuthorizationFailed.Code, denied).Topics...)
	return rep, nil
}

// fetchAuth is the fetch handler's per-topic check of a consumer's fetch
// (Kafka's handleFetchRequest): READ on each topic. A follower's fetch
// needs CLUSTER_ACTION on the cluster instead (handleFetch, deniedFetch).
func (c *conn) fetchAuth(req *kmsg.FetchRequest) func(topic string) bool {
	if c == nil || c.s.cfg.Authorizer == nil {
		return nil
	}
	return c.topics(authz.OpRead).ok
}

// guardListOffsets: DESCRIBE on each topic.
func guardListOffsets(s *Server, ctx context.Context, c *conn, kreq kmsg.Request, next handlerFn) (reply, error) {
	req := kreq.(*kmsg.ListOffsetsRequest)
	if s.cfg.Authorizer == nil {
		return next(ctx, c, kreq)
	}
	tf := c.topics(authz.OpDescribe)
	allowed, denied := split(req.Topics, func(t kmsg.ListOffsetsRequestTopic) bool { return tf.ok(t.Topic) })
	if len(denied) == 0 {
		return next(ctx, c, kreq)
	}
	part := *req
	part.Topics = allowed
	rep, err := next(ctx, c, &part)
	if err != nil || rep.msg == nil {
		return rep, err
	}
	resp := rep.msg.(*kmsg.ListOffsetsResponse)
	for _, t := range denied {
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewListOffsetsResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, kerr.TopicAuthorizationFailed.Code
			rp.Timestamp, rp.Offset = -1, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return rep, nil
}

// guardMetadata (Kafka's handleTopicMetadataRequest): topics the principal
// may not DESCRIBE are left out of an all-topics answer and answered
// TOPIC_AUTHORIZATION_FAILED when named (without revealing whether they
// exist; by topic id, the id is kept); auto-creating a topic needs CREATE
// on the cluster or on the topic, else TOPIC_AUTHORIZATION_FAILED and no
// topic; include_cluster_authorized_operations (v8-10) and
// include_topic_authorized_operations (v8+) are answered.
func guardMetadata(s *Server, ctx context.Context, c *conn, kreq kmsg.Request, next handlerFn) (reply, error) {
	req := kreq.(*kmsg.MetadataRequest)
	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	describe := c.topics(authz.OpDescribe)
	var denied []kmsg.MetadataResponseTopic
	part := *req
	if !all && s.cfg.Authorizer != nil {
		autoCreate := s.cfg.AutoCreateTopics && (req.Version < 4 || req.AllowAutoTopicCreation)
		var create *bool
		part.Topics = nil
		for _, rt := range req.Topics {
			name := ""
			if rt.Topic != nil {
				name = *rt.Topic
			} else if t := s.b.TopicByID(uuid.UUID(rt.TopicID)); t != nil {
				name = t.Name
			} else {
				part.Topics = append(part.Topics, rt) // unknown id: the handler answers it
				continue
			}
			mt := kmsg.NewMetadataResponseTopic()
			mt.ErrorCode = kerr.TopicAuthorizationFailed.Code
			if rt.Topic != nil {
				mt.Topic = rt.Topic
			} else {
				mt.TopicID = rt.TopicID // ids are not secret (Kafka keeps them)
			}
			if !describe.ok(name) {
				denied = append(denied, mt)
				continue
			}
			if autoCreate && rt.Topic != nil && s.b.Topic(name) == nil {
				if create == nil {
					v := c.allowedCluster(authz.OpCreate)
					create = &v
				}
				if !*create && !c.allowed(authz.OpCreate, authz.ResourceTopic, name) {
					denied = append(denied, mt)
					continue
				}
			}
			part.Topics = append(part.Topics, rt)
		}
		if len(part.Topics) == 0 {
			part.Topics = []kmsg.MetadataRequestTopic{} // not null: that would mean all topics
		}
	}
	rep, err := next(ctx, c, &part)
	if err != nil || rep.msg == nil {
		return rep, err
	}
	resp := rep.msg.(*kmsg.MetadataResponse)
	if !all && len(part.Topics) == 0 {
		resp.Topics = nil // every named topic was refused (an empty v0 list would read as all)
	}
	if all && s.cfg.Authorizer != nil {
		kept := resp.Topics[:0]
		for _, t := range resp.Topics {
			if t.Topic != nil && describe.ok(*t.Topic) {
				kept = append(kept, t)
			}
		}
		resp.Topics = kept
	}
	if req.Version >= 8 && req.IncludeTopicAuthorizedOperations {
		for i := range resp.Topics {
			if resp.Topics[i].Topic != nil {
				resp.Topics[i].AuthorizedOperations = c.authorizedOps(authz.ResourceTopic, *resp.Topics[i].Topic)
			}
		}
	}
	if req.Version >= 8 && req.Version <= 10 && req.IncludeClusterAuthorizedOperations {
		resp.AuthorizedOperations = 0
		if c.allowedCluster(authz.OpDescribe) {
			resp.AuthorizedOperations = c.authorizedOps(authz.ResourceCluster, authz.ClusterName)
		}
	}
	resp.Topics = append(resp.Topics, denied...)
	return rep, nil
}
