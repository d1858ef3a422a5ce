package protocol

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleGroup passes the group-coordinator API keys to the coordinator.
func (s *Server) handleGroup(ctx context.Context, _ *conn, req kmsg.Request) (reply, error) {
	resp, err := s.cfg.Group.Handle(ctx, req)
	if err != nil {
		return reply{}, fmt.Errorf("group coordinator, api key %d: %w", req.Key(), err)
	}
	return reply{msg: resp}, nil
}
