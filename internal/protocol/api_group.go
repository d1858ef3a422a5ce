package protocol

import (
	"context"
	"fmt"

	"github.com/strata-io/strata/internal/group"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleGroup passes the group-coordinator API keys to the coordinator,
// with the request's client id and the client's address (DescribeGroups
// shows them).
func (s *Server) handleGroup(ctx context.Context, c *conn, req kmsg.Request) (reply, error) {
	if r, ok := req.(*kmsg.FindCoordinatorRequest); ok && s.cfg.Cluster != nil {
		return reply{msg: s.clusterFindCoordinator(c, r)}, nil
	}
	if c != nil {
		ctx = group.WithClientInfo(ctx, c.clientID, c.clientHost())
	}
	resp, err := s.cfg.Group.Handle(ctx, req)
	if err != nil {
		return reply{}, fmt.Errorf("group coordinator, api key %d: %w", req.Key(), err)
	}
	if fc, ok := resp.(*kmsg.FindCoordinatorResponse); ok && c != nil {
		// A single node coordinates everything: its address on the
		// listener the request came in on (Kafka answers the
		// coordinator's endpoint for the request's listener).
		l := c.listener()
		me := s.b.NodeID()
		if fc.NodeID == me {
			fc.Host, fc.Port = l.host, l.port
		}
		for i := range fc.Coordinators {
			if fc.Coordinators[i].NodeID == me {
				fc.Coordinators[i].Host, fc.Coordinators[i].Port = l.host, l.port
			}
		}
	}
	return reply{msg: resp}, nil
}
