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
	return reply{msg: resp}, nil
}
