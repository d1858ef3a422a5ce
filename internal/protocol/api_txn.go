package protocol

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleTxn passes the transaction-coordinator API keys (AddPartitionsToTxn,
// AddOffsetsToTxn, EndTxn, DescribeTransactions, ListTransactions and
// transactional InitProducerId) to the coordinator.
func (s *Server) handleTxn(ctx context.Context, _ *conn, req kmsg.Request) (reply, error) {
	resp, err := s.cfg.Txn.Handle(ctx, req)
	if err != nil {
		return reply{}, fmt.Errorf("transaction coordinator, api key %d: %w", req.Key(), err)
	}
	return reply{msg: resp}, nil
}
