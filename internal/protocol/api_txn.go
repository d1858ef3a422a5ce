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

// handleWriteTxnMarkers passes WriteTxnMarkers (key 27, v0-1) from another
// broker's transaction coordinator to the broker's marker writer.
func (s *Server) handleWriteTxnMarkers(ctx context.Context, _ *conn, req kmsg.Request) (reply, error) {
	return reply{msg: s.cfg.TxnMarkers.WriteTxnMarkers(ctx, req.(*kmsg.WriteTxnMarkersRequest))}, nil
}
