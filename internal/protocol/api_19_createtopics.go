package protocol

import (
	"context"
	"fmt"
	"time"

	"github.com/strata-io/strata/internal/broker"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka's controller bounds what one admin request may create:
// ReplicationControlManager.MAX_PARTITIONS_PER_BATCH (partitions of a
// CreateTopics request, "Excessively large number of partitions per
// request.") and QuorumController.MAX_RECORDS_PER_USER_OP (metadata
// records of one operation: per topic a TopicRecord, a PartitionRecord per
// partition and a ConfigRecord per config; "Unable to perform excessively
// large batch operation." from EventHandlerExceptionInfo), both 10,000.
// Either way every topic of the request is answered POLICY_VIOLATION and
// nothing is created.
const (
	maxPartitionsPerRequest = 10_000
	maxRecordsPerRequest    = 10_000
)

// handleCreateTopics (key 19, v2-7) creates topics (or only validates them
// with validate_only). The whole request is checked against the bounds
// above before anything is created. Each topic succeeds or fails as a
// whole: a bad config is INVALID_CONFIG and nothing is created. On a single node the
// topics of one request are created together (broker.CreateTopics:
// partitions in parallel, metadata written once); in a cluster they go
// through the metadata store together (Cluster.CreateTopics).
func (s *Server) handleCreateTopics(ctx context.Context, _ *conn, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.CreateTopicsRequest)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	seen := map[string]int{}
	for _, rt := range req.Topics {
		seen[rt.Topic]++
	}
	ctx, cancel := requestTimeout(ctx, req.TimeoutMillis)
	defer cancel()
	topics := make([]CreatedTopic, len(req.Topics))
	errs := make([]error, len(req.Topics))
	crs := make([]broker.CreateTopicRequest, len(req.Topics))
	assignments := make([]map[int32][]int32, len(req.Topics))
	for i, rt := range req.Topics {
		crs[i], assignments[i], errs[i] = s.createTopicRequest(req, rt, seen[rt.Topic])
	}
	if err := s.checkCreateBounds(req, errs); err != nil {
		for i := range errs {
			errs[i] = err
		}
	}
	var creates []broker.CreateTopicRequest
	var which []int
	var asg []map[int32][]int32
	for i := range req.Topics {
		if errs[i] == nil {
			creates = append(creates, crs[i])
			which = append(which, i)
			asg = append(asg, assignments[i])
		}
	}
	if len(creates) > 0 && s.cfg.Cluster != nil {
		ts, cerrs := s.cfg.Cluster.CreateTopics(ctx, creates, asg)
		for k, i := range which {
			topics[i], errs[i] = ts[k], cerrs[k]
		}
	} else if len(creates) > 0 {
		ts, cerrs := s.b.CreateTopics(creates)
		for k, i := range which {
			if errs[i] = cerrs[k]; errs[i] == nil {
				t := ts[k]
				topics[i] = CreatedTopic{ID: t.ID, Partitions: int32(len(t.Partitions)), ReplicationFactor: 1, Configs: t.Configs}
			}
		}
	}
	for i, rt := range req.Topics {
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = rt.Topic
		t, err := topics[i], errs[i]
		if err != nil {
			st.ErrorCode = errCode(err)
			st.ErrorMessage = errMessage(err)
			st.NumPartitions, st.ReplicationFactor = -1, -1
			resp.Topics = append(resp.Topics, st)
			continue
		}
		st.TopicID = t.ID
		st.NumPartitions = t.Partitions
		st.ReplicationFactor = t.ReplicationFactor
		if req.Version >= 5 {
			entries := describeOverrides(s.b, t.Configs)
			for _, e := range entries {
				c := kmsg.NewCreateTopicsResponseTopicConfig()
				c.Name = e.Name
				if !e.Null {
					v := e.Value
					c.Value = &v
				}
				c.ReadOnly, c.Source, c.IsSensitive = e.ReadOnly, int8(e.Source), e.Sensitive
				st.Configs = append(st.Configs, c)
			}
		}
		resp.Topics = append(resp.Topics, st)
	}
	return reply{msg: resp}, nil
}

// checkCreateBounds refuses a request over Kafka's per-request bounds
// (POLICY_VIOLATION) before anything is created: the partitions it asks
// for, counted as Kafka's validateTotalNumberOfPartitions counts them (a
// replica assignment's length, else num_partitions, -1 meaning
// num.partitions), then the metadata records of the topics that pass
// their own checks (errs[i] == nil) would write.
func (s *Server) checkCreateBounds(req *kmsg.CreateTopicsRequest, errs []error) error {
	var n int64
	records := 0
	for i, rt := range req.Topics {
		var parts int64
		switch {
		case len(rt.ReplicaAssignment) > 0:
			parts = int64(len(rt.ReplicaAssignment))
		case rt.NumPartitions == -1:
			parts = s.b.Config().Int64("num.partitions")
		case rt.NumPartitions > 0:
			parts = int64(rt.NumPartitions)
		}
		n += parts
		if errs[i] == nil && parts <= maxPartitionsPerRequest {
			records += 1 + int(parts) + len(rt.Configs)
		}
	}
	if n > maxPartitionsPerRequest {
		return fmt.Errorf("Excessively large number of partitions per request (%d, at most %d).: %w", n, maxPartitionsPerRequest, kerr.PolicyViolation)
	}
	if records > maxRecordsPerRequest {
		return fmt.Errorf("Unable to perform excessively large batch operation (%d metadata records, at most %d).: %w", records, maxRecordsPerRequest, kerr.PolicyViolation)
	}
	return nil
}

// createTopicRequest checks what the request alone says about one topic
// and turns it into a broker request and, in a cluster, the request's
// replica_assignment (nil when none was given).
func (s *Server) createTopicRequest(req *kmsg.CreateTopicsRequest, rt kmsg.CreateTopicsRequestTopic, count int) (broker.CreateTopicRequest, map[int32][]int32, error) {
	var none broker.CreateTopicRequest
	if count > 1 {
		return none, nil, fmt.Errorf("topic %q is listed more than once in the request: %w", rt.Topic, kerr.InvalidRequest)
	}
	if len(rt.ReplicaAssignment) > 0 && (rt.NumPartitions != -1 || rt.ReplicationFactor != -1) {
		return none, nil, fmt.Errorf("both a replica assignment and partitions/replication factor were given: %w", kerr.InvalidRequest)
	}
	configs := make(map[string]*string, len(rt.Configs))
	for _, c := range rt.Configs {
		if _, dup := configs[c.Name]; dup {
			return none, nil, fmt.Errorf("config %s given twice: %w", c.Name, kerr.InvalidConfig)
		}
		configs[c.Name] = c.Value
	}
	var assignment map[int32][]int32
	if len(rt.ReplicaAssignment) > 0 {
		if s.cfg.Cluster != nil {
			assignment = make(map[int32][]int32, len(rt.ReplicaAssignment))
			for _, a := range rt.ReplicaAssignment {
				if _, dup := assignment[a.Partition]; dup {
					return none, nil, fmt.Errorf("partition %d is assigned twice: %w", a.Partition, kerr.InvalidReplicaAssignment)
				}
				assignment[a.Partition] = a.Replicas
			}
		} else {
			for _, a := range rt.ReplicaAssignment {
				if len(a.Replicas) != 1 || a.Replicas[0] != s.b.NodeID() {
					return none, nil, fmt.Errorf("replica assignment %v of partition %d names brokers other than node %d: %w",
						a.Replicas, a.Partition, s.b.NodeID(), kerr.InvalidReplicaAssignment)
				}
			}
			rt.NumPartitions = int32(len(rt.ReplicaAssignment))
			rt.ReplicationFactor = 1
		}
	}
	return broker.CreateTopicRequest{
		Name: rt.Topic, NumPartitions: rt.NumPartitions, ReplicationFactor: rt.ReplicationFactor,
		Configs: configs, ValidateOnly: req.ValidateOnly,
	}, assignment, nil
}

// requestTimeout bounds an administrative request by its timeout_ms (at
// least a second, at most a minute; 0 or less: 30 s).
func requestTimeout(ctx context.Context, ms int32) (context.Context, context.CancelFunc) {
	d := 30 * time.Second
	if ms > 0 {
		d = min(max(time.Duration(ms)*time.Millisecond, time.Second), time.Minute)
	}
	return context.WithTimeout(ctx, d)
}

// describeOverrides lists a topic's full config for CreateTopics v5+.
func describeOverrides(b *broker.Broker, overrides map[string]string) []broker.ConfigEntry {
	return b.DescribeConfigsFor(overrides)
}
