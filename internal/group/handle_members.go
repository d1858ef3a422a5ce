package group

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (c *Coordinator) findCoordinator(r *kmsg.FindCoordinatorRequest) *kmsg.FindCoordinatorResponse {
	resp := r.ResponseKind().(*kmsg.FindCoordinatorResponse)
	keys := r.CoordinatorKeys
	if r.Version < 4 {
		keys = []string{r.CoordinatorKey}
	}
	for _, key := range keys {
		co := kmsg.NewFindCoordinatorResponseCoordinator()
		co.Key = key
		co.NodeID, co.Host, co.Port = -1, "", -1
		switch r.CoordinatorType {
		case 0:
			co.NodeID, co.Host, co.Port = c.cfg.NodeID, c.cfg.Host, c.cfg.Port
		case 1:
			if c.cfg.Transactions {
				co.NodeID, co.Host, co.Port = c.cfg.NodeID, c.cfg.Host, c.cfg.Port
				break
			}
			co.ErrorCode = kerr.CoordinatorNotAvailable.Code
			msg := "Strata has no transaction coordinator"
			co.ErrorMessage = &msg
		default:
			co.ErrorCode = kerr.InvalidRequest.Code
			msg := "unsupported coordinator type"
			co.ErrorMessage = &msg
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

func (c *Coordinator) joinGroup(ctx context.Context, r *kmsg.JoinGroupRequest) (kmsg.Response, error) {
	resp := r.ResponseKind().(*kmsg.JoinGroupResponse)
	fail := func(code int16) (kmsg.Response, error) {
		resp.ErrorCode, resp.Generation, resp.MemberID = code, -1, r.MemberID
		if r.Version < 7 {
			empty := ""
			resp.Protocol = &empty
		}
		return resp, nil
	}
	switch {
	case r.Group == "":
		return fail(kerr.InvalidGroupID.Code)
	case c.status(r.Group) != 0:
		return fail(c.status(r.Group))
	}
	session := time.Duration(r.SessionTimeoutMillis) * time.Millisecond
	if session < c.cfg.MinSessionTimeout || session > c.cfg.MaxSessionTimeout {
		return fail(kerr.InvalidSessionTimeout.Code)
	}
	rebalance := session
	if r.Version >= 1 && r.RebalanceTimeoutMillis > 0 {
		rebalance = time.Duration(r.RebalanceTimeoutMillis) * time.Millisecond
	}
	if r.ProtocolType == "" || len(r.Protocols) == 0 {
		return fail(kerr.InconsistentGroupProtocol.Code)
	}
	ci := clientFrom(ctx)
	p := joinParams{
		version:          r.Version,
		memberID:         r.MemberID,
		instanceID:       r.InstanceID,
		clientID:         ci.id,
		clientHost:       ci.host,
		sessionTimeout:   session,
		rebalanceTimeout: rebalance,
		protocolType:     r.ProtocolType,
	}
	for _, pr := range r.Protocols {
		p.protocols = append(p.protocols, protocol{name: pr.Name, metadata: pr.Metadata})
	}
	g := c.lockGroup(r.Group, r.MemberID == "")
	if g == nil {
		if code := c.status(r.Group); code != 0 {
			return fail(code)
		}
		return fail(kerr.UnknownMemberID.Code)
	}
	res, ch := g.join(p)
	if code := c.unlockAndComplete(g, "join"); code != 0 && res != nil && res.err == 0 {
		res = &joinResult{err: code, memberID: r.MemberID}
	}
	if ch != nil {
		select {
		case jr := <-ch:
			res = &jr
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if res.err != 0 {
		resp.ErrorCode, resp.Generation, resp.MemberID = res.err, -1, res.memberID
		if r.Version < 7 {
			empty := ""
			resp.Protocol = &empty
		}
		return resp, nil
	}
	resp.Generation = res.generation
	pt, pn := res.protocolType, res.protocol
	resp.ProtocolType, resp.Protocol = &pt, &pn
	resp.LeaderID = res.leader
	resp.MemberID = res.memberID
	resp.SkipAssignment = res.skipAssignment
	resp.Members = res.members
	return resp, nil
}

func (c *Coordinator) syncGroup(ctx context.Context, r *kmsg.SyncGroupRequest) (kmsg.Response, error) {
	resp := r.ResponseKind().(*kmsg.SyncGroupResponse)
	g, code := c.lockExisting(r.Group, kerr.UnknownMemberID.Code)
	if g == nil {
		resp.ErrorCode = code
		return resp, nil
	}
	p := syncParams{
		memberID:     r.MemberID,
		instanceID:   r.InstanceID,
		generation:   r.Generation,
		protocolType: r.ProtocolType,
		protocol:     r.Protocol,
		assignments:  map[string][]byte{},
	}
	for _, a := range r.GroupAssignment {
		p.assignments[a.MemberID] = a.MemberAssignment
	}
	res, ch, leader := g.sync(p)
	if leader {
		// The assignment is stored before anyone gets it: appended now,
		// completed once durable, without holding the group meanwhile. A
		// failure reloads the group, which answers every waiting
		// SyncGroup (the leader's too) with the error.
		gen := g.generation
		w := c.writeMetadataLocked(g, true)
		if w.err == nil {
			g.appendedAssignment(gen)
		}
		g.mu.Unlock()
		err := c.await(w)
		g.mu.Lock()
		if c.settleLocked(g, w, err, "sync") == 0 {
			g.finishSync(gen)
		}
	}
	c.unlockAndComplete(g, "sync")
	if ch != nil {
		select {
		case sr := <-ch:
			res = &sr
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	resp.ErrorCode = res.err
	if res.err == 0 {
		resp.MemberAssignment = res.assignment
		if resp.MemberAssignment == nil {
			resp.MemberAssignment = []byte{}
		}
		resp.ProtocolType, resp.Protocol = r.ProtocolType, r.Protocol
	}
	return resp, nil
}

func (c *Coordinator) heartbeat(r *kmsg.HeartbeatRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.HeartbeatResponse)
	g, code := c.lockExisting(r.Group, kerr.UnknownMemberID.Code)
	if g == nil {
		resp.ErrorCode = code
		return resp
	}
	resp.ErrorCode = g.heartbeatReq(r.MemberID, r.InstanceID, r.Generation)
	if code := c.unlockAndComplete(g, "heartbeat"); code != 0 && resp.ErrorCode == 0 {
		resp.ErrorCode = code
	}
	return resp
}

func (c *Coordinator) leaveGroup(ctx context.Context, r *kmsg.LeaveGroupRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.LeaveGroupResponse)
	ls := make([]leaveMember, 0, len(r.Members)+1)
	if r.Version < 3 {
		ls = append(ls, leaveMember{memberID: r.MemberID})
	} else {
		for _, m := range r.Members {
			ls = append(ls, leaveMember{memberID: m.MemberID, instanceID: m.InstanceID})
		}
	}
	var codes []int16
	switch {
	case r.Group == "":
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp
	case c.status(r.Group) != 0:
		resp.ErrorCode = c.status(r.Group)
		return resp
	}
	if g := c.lockGroup(r.Group, false); g != nil {
		codes = g.leave(ls)
		if code := c.unlockAndComplete(g, "leave"); code != 0 {
			// Kafka answers a failed write with the top-level error only.
			resp.ErrorCode = code
			return resp
		}
	} else {
		codes = make([]int16, len(ls))
		for i := range codes {
			codes[i] = kerr.UnknownMemberID.Code
		}
	}
	if r.Version < 3 {
		resp.ErrorCode = codes[0]
		return resp
	}
	for i, l := range ls {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID, rm.ErrorCode = l.memberID, l.instanceID, codes[i]
		resp.Members = append(resp.Members, rm)
	}
	return resp
}
