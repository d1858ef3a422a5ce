package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleInitProducerID (key 22, v0-4) hands out idempotent producer ids.
// Transactions are not supported: a transactional id is refused.
func (s *Server) handleInitProducerID(_ context.Context, _ *conn, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return reply{msg: resp}, nil
	}
	id, epoch, err := s.b.InitProducerID()
	if err != nil {
		resp.ErrorCode = errCode(err)
		return reply{msg: resp}, nil
	}
	resp.ProducerID, resp.ProducerEpoch = id, epoch
	return reply{msg: resp}, nil
}
