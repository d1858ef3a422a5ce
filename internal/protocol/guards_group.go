package protocol

import (
	"context"

	"github.com/strata-io/strata/internal/authz"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Group APIs (Kafka's KafkaApis handlers of the group coordinator keys).

var groupDenied = kerr.GroupAuthorizationFailed.Code

// guardGroupRead: JoinGroup, Heartbeat, LeaveGroup, SyncGroup and
// ConsumerGroupHeartbeat need READ on the group; otherwise the request's
// error response with GROUP_AUTHORIZATION_FAILED.
func guardGroupRead(s *Server, ctx context.Context, c *conn, kreq kmsg.Request, next handlerFn) (reply, error) {
	var group string
	switch r := kreq.(type) {
	case *kmsg.JoinGroupRequest:
		group = r.Group
	case *kmsg.HeartbeatRequest:
		group = r.Group
	case *kmsg.LeaveGroupRequest:
		group = r.Group
	case *kmsg.SyncGroupRequest:
		group = r.Group
	case *kmsg.ConsumerGroupHeartbeatRequest:
		group = r.Group
	}
	if c.allowed(authz.OpRead, authz.ResourceGroup, group) {
		return next(ctx, c, kreq)
	}
	resp := kreq.ResponseKind()
	switch r := resp.(type) {
	case *kmsg.JoinGroupResponse:
		r.ErrorCode, r.Generation = groupDenied, -1
		if r.Version < 7 {
			r.Protocol = kmsg.StringPtr("")
		}
	case *kmsg.HeartbeatResponse:
		r.ErrorCode = groupDenied
	case *kmsg.LeaveGroupResponse:
		r.ErrorCode = groupDenied
	case *kmsg.SyncGroupResponse:
		r.ErrorCode, r.MemberAssignment = groupDenied, []byte{}
	case *kmsg.ConsumerGroupHeartbeatResponse:
		r.ErrorCode = groupDenied
	}
	return reply{msg: resp}, nil
}

// guardConsumerGroupHeartbeat: READ on the group (guardGroupRead), then
// DESCRIBE on every topic the member subscribes to by name. KAFKA-18813
// (Kafka 4.0, KafkaApis.handleConsumerGroupHeartbeat): a topic it may not
// describe fails the whole heartbeat with TOPIC_AUTHORIZATION_FAILED,
// naming no topic, and the coordinator never sees it. A regex
// subscription is resolved by the coordinator.
func guardConsumerGroupHeartbeat(s *Server, ctx context.Context, c *conn, kreq kmsg.Request, next handlerFn) (reply, error) {
	return guardGroupRead(s, ctx, c, kreq, func(ctx context.Context, c *conn, kreq kmsg.Request) (reply, error) {
		r := kreq.(*kmsg.ConsumerGroupHeartbeatRequest)
		tf := c.topics(authz.OpDescribe)
		for _, n := range r.SubscribedTopicNames {
			if !tf.ok(n) {
				resp := r.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
				resp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				return reply{msg: resp}, nil
			}
		}
		return next(ctx, c, kreq)
	})
}

// guardOffsetCommit: READ on the group (every partition
// GROUP_AUTHORIZATION_FAILED), then READ on each topic.
func guardOffsetCommit(s *Server, ctx context.Context, c *conn, kreq kmsg.Request, next handlerFn) (reply, error) {
	req := kreq.(*kmsg.OffsetCommitRequest)
	if s.cfg.Authorizer == nil {
		return next(ctx, c, kreq)
	}
	answer := func(resp *kmsg.OffsetCommitResponse, topics []kmsg.OffsetCommitRequestTopic, code int16) {
		for _, t := range topics {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
	if !c.allowed(authz.OpRead, authz.ResourceGroup, req.Group) {
		resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
		answer(resp, req.Topics, groupDenied)
		return reply{msg: resp}, nil
	}
	tf := c.topics(authz.OpRead)
	allowed, denied := split(req.Topics, func(t kmsg.OffsetCommitRequestTopic) bool { return tf.ok(t.Topic) })
	part := *req
	part.Topics = allowed
	return serveAllowed(ctx, c, next, kreq, &part, len(denied), len(allowed), func(resp kmsg.Response) {
		answer(resp.(*kmsg.OffsetCommitResponse), denied, kerr.TopicAuthorizationFailed.Code)
	})
}

// guardOffsetFetch: DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED),
// and DESCRIBE on each topic: named topics the principal may not describe
// get TOPIC_AUTHORIZATION_FAILED partitions, and from an all-topics fetch
// they are left out.
func guardOffsetFetch(s *Server, ctx context.Context, c *conn, kreq kmsg.Request, next handlerFn) (reply, error) {
	req := kreq.(*kmsg.OffsetFetchRequest)
	if s.cfg.Authorizer == nil {
		return next(ctx, c, kreq)
	}
	tf := c.topics(authz.OpDescribe)
	if req.Version < 8 {
		if !c.allowed(authz.OpDescribe, authz.ResourceGroup, req.Group) {
			resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
			resp.ErrorCode = groupDenied
			return reply{msg: resp}, nil
		}
		part := *req
		var denied []kmsg.OffsetFetchRequestTopic
		if req.Topics != nil {
			part.Topics = []kmsg.OffsetFetchRequestTopic{}
			for _, t := range req.Topics {
				if tf.ok(t.Topic) {
					part.Topics = append(part.Topics, t)
				} else {
					denied = append(denied, t)
				}
			}
		}
		rep, err := next(ctx, c, &part)
		if err != nil || rep.msg == nil {
			return rep, err
		}
		resp := rep.msg.(*kmsg.OffsetFetchResponse)
		kept := resp.Topics[:0]
		for _, t := range resp.Topics {
			if tf.ok(t.Topic) {
				kept = append(kept, t)
			}
		}
		resp.Topics = kept
		for _, t := range denied {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.Offset, rp.ErrorCode = p, -1, kerr.TopicAuthorizationFailed.Code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return rep, nil
	}
	part := *req
	part.Groups = nil
	deniedGroup := map[int]bool{}
	deniedTopics := map[int][]kmsg.OffsetFetchRequestGroupTopic{}
	for i, g := range req.Groups {
		if !c.allowed(authz.OpDescribe, authz.ResourceGroup, g.Group) {
			deniedGroup[i] = true
			continue
		}
		if g.Topics != nil {
			var ok []kmsg.OffsetFetchRequestGroupTopic
			for _, t := range g.Topics {
				if tf.ok(t.Topic) {
					ok = append(ok, t)
				} else {
					deniedTopics[i] = append(deniedTopics[i], t)
				}
			}
			if ok == nil {
				ok = []kmsg.OffsetFetchRequestGroupTopic{}
			}
			g.Topics = ok
		}
		part.Groups = append(part.Groups, g)
	}
	var answered []kmsg.OffsetFetchResponseGroup
	if len(part.Groups) > 0 {
		rep, err := next(ctx, c, &part)
		if err != nil || rep.msg == nil {
			return rep, err
		}
		answered = rep.msg.(*kmsg.OffsetFetchResponse).Groups
	}
	byGroup := map[string]kmsg.OffsetFetchResponseGroup{}
	for _, g := range answered {
		kept := g.Topics[:0]
		for _, t := range g.Topics {
			if tf.ok(t.Topic) {
				kept = append(kept, t)
			}
		}
		g.Topics = kept
		byGroup[g.Group] = g
	}
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	for i, g := range req.Groups {
		if deniedGroup[i] {
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group, rg.ErrorCode = g.Group, groupDenied
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		rg, ok := byGroup[g.Group]
		if !ok {
			rg = kmsg.NewOffsetFetchResponseGroup()
			rg.Group = g.Group
		}
		if rg.ErrorCode == 0 {
			for _, t := range deniedTopics[i] {
				rt := kmsg.NewOffsetFetchResponseGroupTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					rp.Partition, rp.Offset, rp.ErrorCode = p, -1, kerr.TopicAuthorizationFailed.Code
					rt.Partitions = append(rt.Partitions, rp)
				}
				rg.Topics = append(rg.Topics, rt)
			}
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return reply{msg: resp}, nil
}

// guardFindCoordinator: DESCRIBE on the group (key type 0) or on the
// transactional id (key type 1), per key on v4+.
func guardFindCoordinator(s *Server, ctx context.Context, c *conn, kreq kmsg.Request, next handlerFn) (reply, error) {
	req := kreq.(*kmsg.FindCoordinatorRequest)
	if s.cfg.Authorizer == nil {
		return next(ctx, c, kreq)
	}
	denied := func(key string) int16 {
		switch req.CoordinatorType {
		case 0:
			if !c.allowed(authz.OpDescribe, authz.ResourceGroup, key) {
				return groupDenied
			}
		case 1:
			if !c.allowed(authz.OpDescribe, authz.ResourceTransactionalID, key) {
				return kerr.TransactionalIDAuthorizationFailed.Code
			}
		}
		return 0
	}
	if req.Version < 4 {
		if code := denied(req.CoordinatorKey); code != 0 {
			resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
			resp.ErrorCode, resp.NodeID, resp.Port = code, -1, -1
			return reply{msg: resp}, nil
		}
		return next(ctx, c, kreq)
	}
	part := *req
	part.CoordinatorKeys = nil
	codes := make([]int16, len(req.CoordinatorKeys))
	for i, k := range req.CoordinatorKeys {
		if codes[i] = denied(k); codes[i] == 0 {
			part.CoordinatorKeys = append(part.CoordinatorKeys, k)
		}
	}
	if len(part.CoordinatorKeys) == len(req.CoordinatorKeys) {
		return next(ctx, c, kreq)
	}
	rep, err := nextIfAny(ctx, c, next, req, &part, len(part.CoordinatorKeys))
	if err != nil || rep.msg == nil {
		return rep, err
	}
	resp := rep.msg.(*kmsg.FindCoordinatorResponse)
	answered := resp.Coordinators
	resp.Coordinators = nil
	j := 0
	for i, k := range req.CoordinatorKeys {
		if codes[i] == 0 && j < len(answered) {
			resp.Coordinators = append(resp.Coordinators, answered[j])
			j++
			continue
		}
		rc := kmsg.NewFindCoordinatorResponseCoordinator()
		rc.Key, rc.ErrorCode, rc.NodeID, rc.Port = k, codes[i], -1, -1
		resp.Coordinators = append(resp.Coordinators, rc)
	}
	return rep, nil
}

// guardDescribeGroups: DESCRIBE on each group; include_authorized_operations
// (v3+) answered for the groups described.
func guardDescribeGroups(s *Server, ctx context.Context, c *conn, kreq kmsg.Request, next handlerFn) (reply, error) {
	req := kreq.(*kmsg.DescribeGroupsRequest)
	part := *req
	var denied []string
	part.Groups, denied = split(req.Groups, func(g string) bool { return c.allowed(authz.OpDescribe, authz.ResourceGroup, g) })
	rep, err := nextIfAny(ctx, c, next, req, &part, len(part.Groups))
	if err != nil || rep.msg == nil {
		return rep, err
	}
	resp := rep.msg.(*kmsg.DescribeGroupsResponse)
	if req.Version >= 3 && req.IncludeAuthorizedOperations {
		for i := range resp.Groups {
			if resp.Groups[i].ErrorCode == 0 {
				resp.Groups[i].AuthorizedOperations = c.authorizedOps(authz.ResourceGroup, resp.Groups[i].Group)
			}
		}
	}
	for _, g := range denied {
		rg := kmsg.NewDescribeGroupsResponseGroup()
		rg.Group, rg.ErrorCode = g, groupDenied
		resp.Groups = append(resp.Groups, rg)
	}
	return rep, nil
}

// guardConsumerGroupDescribe: DESCRIBE on each group (Kafka's code; its
// operations table says READ), include_authorized_operations answered.
func guardConsumerGroupDescribe(s *Server, ctx context.Context, c *conn, kreq kmsg.Request, next handlerFn) (reply, error) {
	req := kreq.(*kmsg.ConsumerGroupDescribeRequest)
	part := *req
	var denied []string
	part.Groups, denied = split(req.Groups, func(g string) bool { return c.allowed(authz.OpDescribe, authz.ResourceGroup, g) })
	rep, err := nextIfAny(ctx, c, next, req, &part, len(part.Groups))
	if err != nil || rep.msg == nil {
		return rep, err
	}
	resp := rep.msg.(*kmsg.ConsumerGroupDescribeResponse)
	if req.IncludeAuthorizedOperations {
		for i := range resp.Groups {
			if resp.Groups[i].ErrorCode == 0 {
				resp.Groups[i].AuthorizedOperations = c.authorizedOps(authz.ResourceGroup, resp.Groups[i].Group)
			}
		}
	}
	for _, g := range denied {
		rg := kmsg.NewConsumerGroupDescribeResponseGroup()
		rg.Group, rg.ErrorCode = g, groupDenied
		resp.Groups = append(resp.Groups, rg)
	}
	return rep, nil
}

// guardListGroups: everything with DESCRIBE on the cluster, else only the
// groups the principal may DESCRIBE (never CLUSTER_AUTHORIZATION_FAILED).
func guardListGroups(s *Server, ctx context.Context, c *conn, kreq kmsg.Request, next handlerFn) (reply, error) {
	rep, err := next(ctx, c, kreq)
	if err != nil || rep.msg == nil || s.cfg.Authorizer == nil || c.allowedCluster(authz.OpDescribe) {
		return rep, err
	}
	resp := rep.msg.(*kmsg.ListGroupsResponse)
	kept := resp.Groups[:0]
	for _, g := range resp.Groups {
		if c.allowed(authz.OpDescribe, authz.ResourceGroup, g.Group) {
			kept = append(kept, g)
		}
	}
	resp.Groups = kept
	return rep, nil
}

// guardDeleteGroups: DELETE on each group.
func guardDeleteGroups(s *Server, ctx context.Context, c *conn, kreq kmsg.Request, next handlerFn) (reply, error) {
	req := kreq.(*kmsg.DeleteGroupsRequest)
	part := *req
	var denied []string
	part.Groups, denied = split(req.Groups, func(g string) bool { return c.allowed(authz.OpDelete, authz.ResourceGroup, g) })
	return serveAllowed(ctx, c, next, kreq, &part, len(denied), len(part.Groups), func(r kmsg.Response) {
		resp := r.(*kmsg.DeleteGroupsResponse)
		for _, g := range denied {
			rg := kmsg.NewDeleteGroupsResponseGroup()
			rg.Group, rg.ErrorCode = g, groupDenied
			resp.Groups = append(resp.Groups, rg)
		}
	})
}

// guardOffsetDelete: DELETE on the group (GROUP_AUTHORIZATION_FAILED),
// then READ on each topic.
func guardOffsetDelete(s *Server, ctx context.Context, c *conn, kreq kmsg.Request, next handlerFn) (reply, error) {
	req := kreq.(*kmsg.OffsetDeleteRequest)
	if s.cfg.Authorizer == nil {
		return next(ctx, c, kreq)
	}
	if !c.allowed(authz.OpDelete, authz.ResourceGroup, req.Group) {
		resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
		resp.ErrorCode = groupDenied
		return reply{msg: resp}, nil
	}
	tf := c.topics(authz.OpRead)
	part := *req
	var denied []kmsg.OffsetDeleteRequestTopic
	part.Topics, denied = split(req.Topics, func(t kmsg.OffsetDeleteRequestTopic) bool { return tf.ok(t.Topic) })
	if len(denied) == 0 {
		return next(ctx, c, kreq)
	}
	rep, err := next(ctx, c, &part)
	if err != nil || rep.msg == nil {
		return rep, err
	}
	resp := rep.msg.(*kmsg.OffsetDeleteResponse)
	if resp.ErrorCode != 0 {
		return rep, nil
	}
	for _, t := range denied {
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, kerr.TopicAuthorizationFailed.Code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return rep, nil
}
