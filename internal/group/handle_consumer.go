package group

import (
	"context"
	"sort"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (c *Coordinator) consumerGroupHeartbeat(ctx context.Context, r *kmsg.ConsumerGroupHeartbeatRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	fail := func(code int16, msg string) kmsg.Response {
		resp.ErrorCode = code
		if msg != "" {
			resp.ErrorMessage = &msg
		}
		return resp
	}
	// Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid.
	switch {
	case r.Group == "":
		return fail(kerr.InvalidRequest.Code, "GroupId can't be empty")
	case c.status(r.Group) != 0:
		return fail(c.status(r.Group), "")
	case r.InstanceID != nil && *r.InstanceID == "":
		return fail(kerr.InvalidRequest.Code, "InstanceId can't be empty")
	case r.RackID != nil && *r.RackID == "":
		return fail(kerr.InvalidRequest.Code, "RackId can't be empty")
	case r.MemberEpoch < -2:
		return fail(kerr.InvalidRequest.Code, "MemberEpoch is invalid")
	case r.Version >= 1 && r.MemberID == "":
		return fail(kerr.InvalidRequest.Code, "MemberId can't be empty")
	case (r.MemberEpoch > 0 || r.MemberEpoch < 0) && r.MemberID == "":
		return fail(kerr.InvalidRequest.Code, "MemberId can't be empty")
	case r.MemberEpoch == memberEpochLeftStatic && r.InstanceID == nil:
		return fail(kerr.InvalidRequest.Code, "InstanceId can't be null")
	case r.MemberEpoch == 0 && r.RebalanceTimeoutMillis == -1:
		return fail(kerr.InvalidRequest.Code, "RebalanceTimeoutMs must be provided in first request")
	case r.MemberEpoch == 0 && r.SubscribedTopicNames == nil && r.SubscribedTopicRegex == nil:
		return fail(kerr.InvalidRequest.Code, "SubscribedTopicNames or SubscribedTopicRegex must be set in first request")
	case r.MemberEpoch == 0 && (r.Topics == nil || len(r.Topics) > 0):
		return fail(kerr.InvalidRequest.Code, "TopicPartitions must be empty when (re-)joining")
	}
	ix := newTopicIndex(c.cfg.Topics())
	ci := clientFrom(ctx)
	p := chbParams{
		memberID:   r.MemberID,
		epoch:      r.MemberEpoch,
		instanceID: r.InstanceID,
		rackID:     r.RackID,
		topics:     r.SubscribedTopicNames,
		regex:      r.SubscribedTopicRegex,
		assignor:   r.ServerAssignor,
		clientID:   ci.id,
		clientHost: ci.host,
	}
	if p.memberID == "" {
		p.memberID = uuid.NewString() // v0: the coordinator names members
	}
	if r.RebalanceTimeoutMillis > 0 {
		p.rebalanceTimeout = time.Duration(r.RebalanceTimeoutMillis) * time.Millisecond
	}
	if r.Topics != nil {
		p.owned = tpset{}
		for _, t := range r.Topics {
			name, ok := ix.byID[t.TopicID]
			if !ok {
				continue // deleted topic: nothing to release
			}
			for _, part := range t.Partitions {
				p.owned[tp{name, part}] = struct{}{}
			}
		}
	}
	g := c.lockGroup(r.Group, r.MemberEpoch == 0)
	if g == nil {
		if code := c.status(r.Group); code != 0 {
			return fail(code, "")
		}
		return fail(kerr.UnknownMemberID.Code, "")
	}
	if g.consumer == nil {
		if len(g.members) > 0 || len(g.pending) > 0 {
			g.mu.Unlock()
			return fail(kerr.GroupIDNotFound.Code, "group "+r.Group+" is a classic group with members")
		}
		g.consumer = newConsumerGroup()
		g.protocolType = "consumer"
	}
	res := g.consumerHeartbeat(p, ix, c.cfg.ConsumerSessionTimeout)
	// The state change is stored before it is answered (Kafka's
	// CoordinatorRuntime completes a heartbeat once its records are
	// committed); a group left without members or offsets is removed with
	// the tombstones of its records.
	var w *groupWrite
	if res.err == 0 && g.removable() {
		w = c.writeConsumerGoneLocked(g)
		c.removeGroup(g)
	} else {
		w = c.writeMetadataLocked(g, false)
	}
	g.mu.Unlock()
	if code := c.complete(g, w, "consumer group heartbeat"); code != 0 && res.err == 0 {
		return fail(code, "")
	}
	if res.err != 0 {
		return fail(res.err, res.msg)
	}
	resp.MemberID = &res.memberID
	resp.MemberEpoch = res.epoch
	resp.HeartbeatIntervalMillis = int32(c.cfg.ConsumerHeartbeatInterval.Milliseconds())
	if res.assignment != nil {
		a := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
		byTopic := map[string][]int32{}
		for _, k := range res.assignment.sorted() {
			byTopic[k.topic] = append(byTopic[k.topic], k.partition)
		}
		names := make([]string, 0, len(byTopic))
		for t := range byTopic {
			names = append(names, t)
		}
		sort.Strings(names)
		for _, t := range names {
			at := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
			at.TopicID, at.Partitions = ix.byName[t].ID, byTopic[t]
			a.Topics = append(a.Topics, at)
		}
		resp.Assignment = &a
	}
	return resp
}

// assignmentOf converts a partition set to ConsumerGroupDescribe's form.
func assignmentOf(s tpset, ix topicIndex) kmsg.Assignment {
	var a kmsg.Assignment
	for _, k := range s.sorted() {
		n := len(a.TopicPartitions)
		if n == 0 || a.TopicPartitions[n-1].Topic != k.topic {
			at := kmsg.NewAssignmentTopicPartition()
			at.Topic, at.TopicID = k.topic, ix.byName[k.topic].ID
			a.TopicPartitions = append(a.TopicPartitions, at)
			n++
		}
		a.TopicPartitions[n-1].Partitions = append(a.TopicPartitions[n-1].Partitions, k.partition)
	}
	return a
}

func (c *Coordinator) consumerGroupDescribe(r *kmsg.ConsumerGroupDescribeRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	for _, id := range r.Groups {
		dg := kmsg.NewConsumerGroupDescribeResponseGroup()
		dg.Group = id
		if r.IncludeAuthorizedOperations {
			dg.AuthorizedOperations = groupOperations
		}
		if code := c.status(id); code != 0 {
			dg.ErrorCode = code
			resp.Groups = append(resp.Groups, dg)
			continue
		}
		g := c.lockGroup(id, false)
		if g == nil || g.consumer == nil {
			if g != nil {
				g.mu.Unlock()
			}
			dg.ErrorCode = kerr.GroupIDNotFound.Code
			msg := "group " + id + " is not a consumer group"
			dg.ErrorMessage = &msg
			resp.Groups = append(resp.Groups, dg)
			continue
		}
		cg := g.consumer
		dg.State, dg.Epoch, dg.AssignmentEpoch, dg.AssignorName = cg.stateName(), cg.epoch, cg.assignmentEpoch, cg.assignorName()
		for _, m := range cg.members {
			dm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
			dm.MemberID, dm.InstanceID, dm.RackID, dm.MemberEpoch = m.id, m.instanceID, m.rackID, m.epoch
			dm.ClientID, dm.ClientHost = m.clientID, m.clientHost
			dm.SubscribedTopics = append([]string{}, m.topics...)
			if m.regex != "" {
				re := m.regex
				dm.SubscribedTopicRegex = &re
			}
			dm.Assignment = assignmentOf(m.assigned, cg.tops)
			dm.TargetAssignment = assignmentOf(cg.target[m.id], cg.tops)
			dm.MemberType = 1 // consumer protocol
			dg.Members = append(dg.Members, dm)
		}
		g.mu.Unlock()
		sort.Slice(dg.Members, func(i, j int) bool { return dg.Members[i].MemberID < dg.Members[j].MemberID })
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}

// classicView describes a KIP-848 group for DescribeGroups (as Kafka does,
// so lag tools work): protocol type "consumer", the assignor as protocol,
// subscriptions and assignments in the classic consumer encodings.
func (cg *consumerGroup) classicView(dg *kmsg.DescribeGroupsResponseGroup) []kmsg.DescribeGroupsResponseGroupMember {
	dg.ProtocolType = "consumer"
	if len(cg.members) > 0 {
		dg.Protocol = cg.assignorName()
	}
	var out []kmsg.DescribeGroupsResponseGroupMember
	for _, m := range cg.members {
		dm := kmsg.NewDescribeGroupsResponseGroupMember()
		dm.MemberID, dm.InstanceID, dm.ClientID, dm.ClientHost = m.id, m.instanceID, m.clientID, m.clientHost
		meta := kmsg.NewConsumerMemberMetadata()
		meta.Topics = append([]string{}, m.topics...)
		dm.ProtocolMetadata = meta.AppendTo(nil)
		as := kmsg.NewConsumerMemberAssignment()
		for _, k := range m.assigned.sorted() {
			n := len(as.Topics)
			if n == 0 || as.Topics[n-1].Topic != k.topic {
				at := kmsg.NewConsumerMemberAssignmentTopic()
				at.Topic = k.topic
				as.Topics = append(as.Topics, at)
				n++
			}
			as.Topics[n-1].Partitions = append(as.Topics[n-1].Partitions, k.partition)
		}
		dm.MemberAssignment = as.AppendTo(nil)
		out = append(out, dm)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].MemberID < out[j].MemberID })
	return out
}
