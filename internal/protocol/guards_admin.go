package protocol

import (
	"context"

	"github.com/google/uuid"
	"github.com/strata-io/strata/internal/authz"
	"github.com/strata-io/strata/internal/quota"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Admin APIs (Kafka's ControllerApis for what a KRaft broker forwards,
// KafkaApis and ConfigHelper for the rest).

// Kafka's default messages (Errors.message()) of the errors answered here.
var (
	msgTopicDenied   = kmsg.StringPtr("Topic authorization failed.")
	msgGroupDenied   = kmsg.StringPtr("Group authorization failed.")
	msgClusterDenied = kmsg.StringPtr("Cluster authorization failed.")
	msgThrottled     = kmsg.StringPtr("The throttling quota has been exceeded.")
)

// mutationQuota is the request's controller mutation quota (KIP-599):
// strict from the version each API made it so, permissive before.
func (c *conn) mutationQuota(strict bool) *quota.Mutation {
	if c == nil || c.s.cfg.Quotas == nil {
		return nil
	}
	return c.s.cfg.Quotas.Mutation(c.principal.Name, c.clientID, strict)
}

// guardCreateTopics (ControllerApis.createTopics): CREATE on the cluster
// or on each topic, else TOPIC_AUTHORIZATION_FAILED ("Authorization
// failed."); a created topic's configs are returned only with
// DESCRIBE_CONFIGS on it (else its config error is
// TOPIC_AUTHORIZATION_FAILED); each topic's partitions count against the
// controller mutation quota, strictly from v6 (THROTTLING_QUOTA_EXCEEDED).
func guardCreateTopics(s *Server, ctx context.Context, c *conn, kreq kmsg.Request, next handlerFn) (reply, error) {
	req := kreq.(*kmsg.CreateTopicsRequest)
	mq := c.mutationQuota(req.Version >= 6)
	if s.cfg.Authorizer == nil && mq == nil {
		return next(ctx, c, kreq)
	}
	clusterCreate := c.allowedCluster(authz.OpCreate)
	defaultParts := s.b.Config().Int64("num.partitions")
	permits := func(t kmsg.CreateTopicsRequestTopic) float64 {
		switch {
		case len(t.ReplicaAssignment) > 0:
			return float64(len(t.ReplicaAssignment))
		case t.NumPartitions == -1:
			return float64(defaultParts)
		}
		return float64(max(t.NumPartitions, 0))
	}
	denied := make([]*kmsg.CreateTopicsResponseTopic, len(req.Topics))
	part := *req
	part.Topics = nil
	for i, t := range req.Topics {
		var code int16
		var msg *string
		switch {
		case !clusterCreate && !c.allowed(authz.OpCreate, authz.ResourceTopic, t.Topic):
			code, msg = kerr.TopicAuthorizationFailed.Code, kmsg.StringPtr("Authorization failed.")
		case !mq.Record(permits(t)):
			code, msg = kerr.ThrottlingQuotaExceeded.Code, msgThrottled
		default:
			part.Topics = append(part.Topics, t)
			continue
		}
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic, rt.ErrorCode, rt.ErrorMessage = t.Topic, code, msg
		rt.NumPartitions, rt.ReplicationFactor = -1, -1
		denied[i] = &rt
	}
	rep, err := nextIfAny(ctx, c, next, req, &part, len(part.Topics))
	if err != nil || rep.msg == nil {
		return rep, err
	}
	resp := rep.msg.(*kmsg.CreateTopicsResponse)
	resp.Topics = inRequestOrder(denied, resp.Topics, func(i int, rt *kmsg.CreateTopicsResponseTopic) {
		if rt.ErrorCode != 0 {
			mq.Refund(permits(req.Topics[i]))
		} else if req.Version >= 5 && !c.allowed(authz.OpDescribeConfigs, authz.ResourceTopic, rt.Topic) {
			rt.Configs, rt.ConfigErrorCode = nil, kerr.TopicAuthorizationFailed.Code
			rt.NumPartitions, rt.ReplicationFactor = -1, -1
		}
	})
	rep.throttleMs = mq.ThrottleMs()
	return rep, nil
}

// guardDeleteTopics (ControllerApis.deleteTopics): DELETE on the cluster,
// or DESCRIBE and DELETE on each topic, else TOPIC_AUTHORIZATION_FAILED (a
// topic named by id shows its name only when describable); each topic's
// partitions count against the controller mutation quota, strictly from v5.
func guardDeleteTopics(s *Server, ctx context.Context, c *conn, kreq kmsg.Request, next handlerFn) (reply, error) {
	req := kreq.(*kmsg.DeleteTopicsRequest)
	mq := c.mutationQuota(req.Version >= 5)
	if s.cfg.Authorizer == nil && mq == nil {
		return next(ctx, c, kreq)
	}
	clusterDelete := c.allowedCluster(authz.OpDelete)
	type target struct {
		byName bool
		name   string
		id     [16]byte
	}
	var targets []target
	if req.Version >= 6 {
		for _, t := range req.Topics {
			if t.Topic != nil {
				targets = append(targets, target{byName: true, name: *t.Topic})
				continue
			}
			tg := target{id: t.TopicID}
			if tp := s.b.TopicByID(uuid.UUID(t.TopicID)); tp != nil {
				tg.name = tp.Name
			}
			targets = append(targets, tg)
		}
	} else {
		for _, n := range req.TopicNames {
			targets = append(targets, target{byName: true, name: n})
		}
	}
	permitsOf := func(name string) float64 {
		if t := s.b.Topic(name); t != nil {
			return float64(len(t.Partitions))
		}
		return 0
	}
	denied := make([]*kmsg.DeleteTopicsResponseTopic, len(targets))
	part := *req
	part.TopicNames, part.Topics = nil, nil
	for i, tg := range targets {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.ErrorCode = kerr.TopicAuthorizationFailed.Code
		if tg.name != "" && !clusterDelete {
			describable := c.allowed(authz.OpDescribe, authz.ResourceTopic, tg.name)
			deletable := c.allowed(authz.OpDelete, authz.ResourceTopic, tg.name)
			if !deletable || (tg.byName && !describable) {
				n := tg.name
				if tg.byName || describable {
					rt.Topic = &n
				}
				rt.TopicID = tg.id
				denied[i] = &rt
				continue
			}
		}
		if tg.name != "" && !mq.Record(permitsOf(tg.name)) {
			n := tg.name
			rt.Topic, rt.TopicID, rt.ErrorCode, rt.ErrorMessage = &n, tg.id, kerr.ThrottlingQuotaExceeded.Code, msgThrottled
			denied[i] = &rt
			continue
		}
		if req.Version >= 6 {
			part.Topics = append(part.Topics, req.Topics[i])
		} else {
			part.TopicNames = append(part.TopicNames, tg.name)
		}
	}
	rep, err := nextIfAny(ctx, c, next, req, &part, len(part.Topics)+len(part.TopicNames))
	if err != nil || rep.msg == nil {
		return rep, err
	}
	resp := rep.msg.(*kmsg.DeleteTopicsResponse)
	resp.Topics = inRequestOrder(denied, resp.Topics, func(i int, rt *kmsg.DeleteTopicsResponseTopic) {
		if rt.ErrorCode != 0 && targets[i].name != "" {
			mq.Refund(permitsOf(targets[i].name))
		}
	})
	rep.throttleMs = mq.ThrottleMs()
	return rep, nil
}

// guardCreatePartitions (ControllerApis.createPartitions): ALTER on each
// topic; the partitions added count against the controller mutation quota,
// strictly from v3.
func guardCreatePartitions(s *Server, ctx context.Context, c *conn, kreq kmsg.Request, next handlerFn) (reply, error) {
	req := kreq.(*kmsg.CreatePartitionsRequest)
	mq := c.mutationQuota(req.Version >= 3)
	if s.cfg.Authorizer == nil && mq == nil {
		return next(ctx, c, kreq)
	}
	permits := func(t kmsg.CreatePartitionsRequestTopic) float64 {
		if tp := s.b.Topic(t.Topic); tp != nil && int(t.Count) > len(tp.Partitions) {
			return float64(int(t.Count) - len(tp.Partitions))
		}
		return 0
	}
	denied := make([]*kmsg.CreatePartitionsResponseTopic, len(req.Topics))
	part := *req
	part.Topics = nil
	for i, t := range req.Topics {
		rt := kmsg.NewCreatePartitionsResponseTopic()
		rt.Topic = t.Topic
		switch {
		case !c.allowed(authz.OpAlter, authz.ResourceTopic, t.Topic):
			rt.ErrorCode = kerr.TopicAuthorizationFailed.Code
		case !mq.Record(permits(t)):
			rt.ErrorCode, rt.ErrorMessage = kerr.ThrottlingQuotaExceeded.Code, msgThrottled
		default:
			part.Topics = append(part.Topics, t)
			continue
		}
		denied[i] = &rt
	}
	rep, err := nextIfAny(ctx, c, next, req, &part, len(part.Topics))
	if err != nil || rep.msg == nil {
		return rep, err
	}
	resp := rep.msg.(*kmsg.CreatePartitionsResponse)
	resp.Topics = inRequestOrder(denied, resp.Topics, func(i int, rt *kmsg.CreatePartitionsResponseTopic) {
		if rt.ErrorCode != 0 {
			mq.Refund(permits(req.Topics[i]))
		}
	})
	rep.throttleMs = mq.ThrottleMs()
	return rep, nil
}

// guardDeleteRecords: DELETE on each topic.
func guardDeleteRecords(s *Server, ctx context.Context, c *conn, kreq kmsg.Request, next handlerFn) (reply, error) {
	req := kreq.(*kmsg.DeleteRecordsRequest)
	if s.cfg.Authorizer == nil {
		return next(ctx, c, kreq)
	}
	tf := c.topics(authz.OpDelete)
	part := *req
	var denied []kmsg.DeleteRecordsRequestTopic
	part.Topics, denied = split(req.Topics, func(t kmsg.DeleteRecordsRequestTopic) bool { return tf.ok(t.Topic) })
	return serveAllowed(ctx, c, next, kreq, &part, len(denied), len(part.Topics), func(r kmsg.Response) {
		resp := r.(*kmsg.DeleteRecordsResponse)
		for _, t := range denied {
			rt := kmsg.NewDeleteRecordsResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewDeleteRecordsResponseTopicPartition()
				rp.Partition, rp.LowWatermark, rp.ErrorCode = p.Partition, -1, kerr.TopicAuthorizationFailed.Code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	})
}

// guardOffsetForLeaderEpoch: CLUSTER_ACTION on the cluster allows every
// topic; otherwise DESCRIBE on each.
func guardOffsetForLeaderEpoch(s *Server, ctx context.Context, c *conn, kreq kmsg.Request, next handlerFn) (reply, error) {
	req := kreq.(*kmsg.OffsetForLeaderEpochRequest)
	if s.cfg.Authorizer == nil || c.allowedCluster(authz.OpClusterAction) {
		return next(ctx, c, kreq)
	}
	tf := c.topics(authz.OpDescribe)
	part := *req
	var denied []kmsg.OffsetForLeaderEpochRequestTopic
	part.Topics, denied = split(req.Topics, func(t kmsg.OffsetForLeaderEpochRequestTopic) bool { return tf.ok(t.Topic) })
	return serveAllowed(ctx, c, next, kreq, &part, len(denied), len(part.Topics), func(r kmsg.Response) {
		resp := r.(*kmsg.OffsetForLeaderEpochResponse)
		for _, t := range denied {
			rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.LeaderEpoch, rp.EndOffset = p.Partition, kerr.TopicAuthorizationFailed.Code, -1, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	})
}

// Config resource types (Kafka's ConfigResource.Type).
const (
	configTopic        = 2
	configBroker       = 4
	configBrokerLogger = 8
	configGroup        = 32
)

// configAllowed is the config APIs' rule (ConfigHelper and
// ControllerApis.authorizeAlterResource): broker (and broker logger)
// configs need op on the cluster, topic configs op on the topic, group
// configs op on the group. It returns the error code and message of a
// refusal (0 when allowed; other types are left to the handler).
func (c *conn) configAllowed(op authz.Operation, rt int8, name string) (int16, *string) {
	switch rt {
	case configBroker, configBrokerLogger:
		if !c.allowedCluster(op) {
			return kerr.ClusterAuthorizationFailed.Code, msgClusterDenied
		}
	case configTopic:
		if !c.allowed(op, authz.ResourceTopic, name) {
			return kerr.TopicAuthorizationFailed.Code, msgTopicDenied
		}
	case configGroup:
		if !c.allowed(op, authz.ResourceGroup, name) {
			return kerr.GroupAuthorizationFailed.Code, msgGroupDenied
		}
	}
	return 0, nil
}

// splitConfigs divides a config request's resources into those the
// principal may op (configAllowed) and the refused ones' answers, made by
// deny with the refusal's code and message.
func splitConfigs[R, A any](c *conn, op authz.Operation, resources []R, key func(R) (kmsg.ConfigResourceType, string),
	deny func(r R, code int16, msg *string) A) (allowed []R, denied []A) {
	for _, r := range resources {
		rt, name := key(r)
		if code, msg := c.configAllowed(op, int8(rt), name); code != 0 {
			denied = append(denied, deny(r, code, msg))
		} else {
			allowed = append(allowed, r)
		}
	}
	return allowed, denied
}

// guardDescribeConfigs: DESCRIBE_CONFIGS on each resource.
func guardDescribeConfigs(s *Server, ctx context.Context, c *conn, kreq kmsg.Request, next handlerFn) (reply, error) {
	req := kreq.(*kmsg.DescribeConfigsRequest)
	if s.cfg.Authorizer == nil {
		return next(ctx, c, kreq)
	}
	part := *req
	var denied []kmsg.DescribeConfigsResponseResource
	part.Resources, denied = splitConfigs(c, authz.OpDescribeConfigs, req.Resources,
		func(r kmsg.DescribeConfigsRequestResource) (kmsg.ConfigResourceType, string) {
			return r.ResourceType, r.ResourceName
		},
		func(r kmsg.DescribeConfigsRequestResource, code int16, msg *string) kmsg.DescribeConfigsResponseResource {
			rr := kmsg.NewDescribeConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode, rr.ErrorMessage = r.ResourceType, r.ResourceName, code, msg
			rr.Configs = []kmsg.DescribeConfigsResponseResourceConfig{}
			return rr
		})
	return serveAllowed(ctx, c, next, kreq, &part, len(denied), len(part.Resources), func(r kmsg.Response) {
		resp := r.(*kmsg.DescribeConfigsResponse)
		resp.Resources = append(resp.Resources, denied...)
	})
}

// guardAlterConfigs: ALTER_CONFIGS on each resource.
func guardAlterConfigs(s *Server, ctx context.Context, c *conn, kreq kmsg.Request, next handlerFn) (reply, error) {
	req := kreq.(*kmsg.AlterConfigsRequest)
	if s.cfg.Authorizer == nil {
		return next(ctx, c, kreq)
	}
	part := *req
	var denied []kmsg.AlterConfigsResponseResource
	part.Resources, denied = splitConfigs(c, authz.OpAlterConfigs, req.Resources,
		func(r kmsg.AlterConfigsRequestResource) (kmsg.ConfigResourceType, string) {
			return r.ResourceType, r.ResourceName
		},
		func(r kmsg.AlterConfigsRequestResource, code int16, msg *string) kmsg.AlterConfigsResponseResource {
			rr := kmsg.NewAlterConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode, rr.ErrorMessage = r.ResourceType, r.ResourceName, code, msg
			return rr
		})
	return serveAllowed(ctx, c, next, kreq, &part, len(denied), len(part.Resources), func(r kmsg.Response) {
		resp := r.(*kmsg.AlterConfigsResponse)
		resp.Resources = append(resp.Resources, denied...)
	})
}

// guardIncrementalAlterConfigs: ALTER_CONFIGS on each resource.
func guardIncrementalAlterConfigs(s *Server, ctx context.Context, c *conn, kreq kmsg.Request, next handlerFn) (reply, error) {
	req := kreq.(*kmsg.IncrementalAlterConfigsRequest)
	if s.cfg.Authorizer == nil {
		return next(ctx, c, kreq)
	}
	part := *req
	var denied []kmsg.IncrementalAlterConfigsResponseResource
	part.Resources, denied = splitConfigs(c, authz.OpAlterConfigs, req.Resources,
		func(r kmsg.IncrementalAlterConfigsRequestResource) (kmsg.ConfigResourceType, string) {
			return r.ResourceType, r.ResourceName
		},
		func(r kmsg.IncrementalAlterConfigsRequestResource, code int16, msg *string) kmsg.IncrementalAlterConfigsResponseResource {
			rr := kmsg.NewIncrementalAlterConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode, rr.ErrorMessage = r.ResourceType, r.ResourceName, code, msg
			return rr
		})
	return serveAllowed(ctx, c, next, kreq, &part, len(denied), len(part.Resources), func(r kmsg.Response) {
		resp := r.(*kmsg.IncrementalAlterConfigsResponse)
		resp.Resources = append(resp.Resources, denied...)
	})
}

// guardDescribeLogDirs: DESCRIBE on the cluster, else an empty answer
// (with CLUSTER_AUTHORIZATION_FAILED from v3).
func guardDescribeLogDirs(s *Server, ctx context.Context, c *conn, kreq kmsg.Request, next handlerFn) (reply, error) {
	if c.allowedCluster(authz.OpDescribe) {
		return next(ctx, c, kreq)
	}
	resp := kreq.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
	return reply{msg: resp}, nil
}

// guardElectLeaders: ALTER on the cluster (Kafka's code; its operations
// table says CLUSTER_ACTION).
func guardElectLeaders(s *Server, ctx context.Context, c *conn, kreq kmsg.Request, next handlerFn) (reply, error) {
	req := kreq.(*kmsg.ElectLeadersRequest)
	if c.allowedCluster(authz.OpAlter) {
		return next(ctx, c, kreq)
	}
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
	for _, t := range req.Topics {
		rt := kmsg.NewElectLeadersResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewElectLeadersResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p, kerr.ClusterAuthorizationFailed.Code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return reply{msg: resp}, nil
}

// guardAlterPartitionReassignments: ALTER on the cluster.
func guardAlterPartitionReassignments(s *Server, ctx context.Context, c *conn, kreq kmsg.Request, next handlerFn) (reply, error) {
	req := kreq.(*kmsg.AlterPartitionAssignmentsRequest)
	if c.allowedCluster(authz.OpAlter) {
		return next(ctx, c, kreq)
	}
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	resp.ErrorCode, resp.ErrorMessage = kerr.ClusterAuthorizationFailed.Code, msgClusterDenied
	for _, t := range req.Topics {
		rt := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			rp.Partition, rp.ErrorCode, rp.ErrorMessage = p.Partition, kerr.ClusterAuthorizationFailed.Code, msgClusterDenied
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return reply{msg: resp}, nil
}

// guardListPartitionReassignments: DESCRIBE on the cluster.
func guardListPartitionReassignments(s *Server, ctx context.Context, c *conn, kreq kmsg.Request, next handlerFn) (reply, error) {
	if c.allowedCluster(authz.OpDescribe) {
		return next(ctx, c, kreq)
	}
	resp := kreq.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	resp.ErrorCode, resp.ErrorMessage = kerr.ClusterAuthorizationFailed.Code, msgClusterDenied
	return reply{msg: resp}, nil
}

// guardDescribeUserScram: DESCRIBE on the cluster.
func guardDescribeUserScram(s *Server, ctx context.Context, c *conn, kreq kmsg.Request, next handlerFn) (reply, error) {
	req := kreq.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	if c.allowedCluster(authz.OpDescribe) {
		return next(ctx, c, kreq)
	}
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	resp.ErrorCode, resp.ErrorMessage = kerr.ClusterAuthorizationFailed.Code, msgClusterDenied
	for range req.Users {
		r := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		r.ErrorCode, r.ErrorMessage = kerr.ClusterAuthorizationFailed.Code, msgClusterDenied
		resp.Results = append(resp.Results, r)
	}
	return reply{msg: resp}, nil
}

// guardAlterUserScram: ALTER on the cluster.
func guardAlterUserScram(s *Server, ctx context.Context, c *conn, kreq kmsg.Request, next handlerFn) (reply, error) {
	req := kreq.(*kmsg.AlterUserSCRAMCredentialsRequest)
	if c.allowedCluster(authz.OpAlter) {
		return next(ctx, c, kreq)
	}
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	seen := map[string]bool{}
	add := func(u string) {
		if seen[u] {
			return
		}
		seen[u] = true
		r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		r.User, r.ErrorCode, r.ErrorMessage = u, kerr.ClusterAuthorizationFailed.Code, msgClusterDenied
		resp.Results = append(resp.Results, r)
	}
	for _, d := range req.Deletions {
		add(d.Name)
	}
	for _, u := range req.Upsertions {
		add(u.Name)
	}
	return reply{msg: resp}, nil
}

// guardDescribeCluster: include_cluster_authorized_operations answered (0
// without DESCRIBE on the cluster). Kafka's code checks nothing else; its
// operations table lists DESCRIBE on the cluster.
func guardDescribeCluster(s *Server, ctx context.Context, c *conn, kreq kmsg.Request, next handlerFn) (reply, error) {
	req := kreq.(*kmsg.DescribeClusterRequest)
	rep, err := next(ctx, c, kreq)
	if err != nil || rep.msg == nil || !req.IncludeClusterAuthorizedOperations {
		return rep, err
	}
	resp := rep.msg.(*kmsg.DescribeClusterResponse)
	resp.ClusterAuthorizedOperations = 0
	if c.allowedCluster(authz.OpDescribe) {
		resp.ClusterAuthorizedOperations = c.authorizedOps(authz.ResourceCluster, authz.ClusterName)
	}
	return rep, nil
}

// guardDescribeProducers: READ on each topic.
func guardDescribeProducers(s *Server, ctx context.Context, c *conn, kreq kmsg.Request, next handlerFn) (reply, error) {
	req := kreq.(*kmsg.DescribeProducersRequest)
	if s.cfg.Authorizer == nil {
		return next(ctx, c, kreq)
	}
	tf := c.topics(authz.OpRead)
	part := *req
	var denied []kmsg.DescribeProducersRequestTopic
	part.Topics, denied = split(req.Topics, func(t kmsg.DescribeProducersRequestTopic) bool { return tf.ok(t.Topic) })
	return serveAllowed(ctx, c, next, kreq, &part, len(denied), len(part.Topics), func(r kmsg.Response) {
		resp := r.(*kmsg.DescribeProducersResponse)
		for _, t := range denied {
			rt := kmsg.NewDescribeProducersResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewDescribeProducersResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.ErrorMessage = p, kerr.TopicAuthorizationFailed.Code, msgTopicDenied
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	})
}

// split divides items into those ok accepts and the rest, each in order
// (a guard's allowed and denied resources; allowed is nil when none is).
func split[T any](items []T, ok func(T) bool) (allowed, denied []T) {
	for _, it := range items {
		if ok(it) {
			allowed = append(allowed, it)
		} else {
			denied = append(denied, it)
		}
	}
	return allowed, denied
}

// serveAllowed answers a request of which some resources were denied:
// the allowed part (when any) goes to next, and addDenied appends the
// denied resources' answers to its response (or to an empty one).
func serveAllowed(ctx context.Context, c *conn, next handlerFn, req, part kmsg.Request, denied, allowed int, addDenied func(kmsg.Response)) (reply, error) {
	if denied == 0 {
		return next(ctx, c, req)
	}
	rep, err := nextIfAny(ctx, c, next, req, part, allowed)
	if err != nil || rep.msg == nil {
		return rep, err
	}
	addDenied(rep.msg)
	return rep, nil
}

// nextIfAny hands the allowed part of a request to next when it holds any
// resource (allowed > 0), and otherwise answers an empty response of the
// request's kind, for the guard to add the denied resources' answers to.
func nextIfAny(ctx context.Context, c *conn, next handlerFn, req, part kmsg.Request, allowed int) (reply, error) {
	if allowed == 0 {
		return reply{msg: req.ResponseKind()}, nil
	}
	return next(ctx, c, part)
}

// inRequestOrder merges the handler's answers (to the allowed resources,
// in order) with the guard's (denied[i] for the request's i-th resource,
// nil when it was allowed) back into the request's order. answered sees
// each handler answer with its resource's index in the request, and may
// change it.
func inRequestOrder[A any](denied []*A, answers []A, answered func(i int, a *A)) []A {
	out := make([]A, 0, len(denied))
	j := 0
	for i, d := range denied {
		switch {
		case d != nil:
			out = append(out, *d)
		case j < len(answers):
			a := answers[j]
			j++
			answered(i, &a)
			out = append(out, a)
		}
	}
	return out
}
