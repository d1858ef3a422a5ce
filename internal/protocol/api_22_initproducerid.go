package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleInitProducerID (key 22, v0-4) hands out idempotent producer ids;
// a request with a transactional id goes to the transaction coordinator
// (refused when none is wired).
func (s *Server) handleInitProducerID(ctx context.Context, c *conn, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.InitProducerIDRequest)
	if req.TransactionalID != nil && s.cfg.Txn != nil {
		return s.handleTxn(ctx, c, kreq)
	}
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
