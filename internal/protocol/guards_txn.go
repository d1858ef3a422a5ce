package protocol

import (
	"context"

	"github.com/strata-io/strata/internal/authz"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Producer-id and transaction APIs (Kafka's KafkaApis handlers).

var txnDenied = kerr.TransactionalIDAuthorizationFailed.Code

// guardInitProducerID: a transactional producer needs WRITE on its
// transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); an idempotent
// one IDEMPOTENT_WRITE on the cluster or WRITE on some topic (KIP-679,
// Authorizer.authorizeByResourceType), else CLUSTER_AUTHORIZATION_FAILED.
func guardInitProducerID(s *Server, ctx context.Context, c *conn, kreq kmsg.Request, next handlerFn) (reply, error) {
	req := kreq.(*kmsg.InitProducerIDRequest)
	a := s.cfg.Authorizer
	if a == nil {
		return next(ctx, c, kreq)
	}
	code := int16(0)
	switch {
	case req.TransactionalID != nil:
		if !c.allowed(authz.OpWrite, authz.ResourceTransactionalID, *req.TransactionalID) {
			code = txnDenied
		}
	case !c.allowedCluster(authz.OpIdempotentWrite) && !a.AuthorizeByResourceType(c.subject, authz.OpWrite, authz.ResourceTopic):
		code = kerr.ClusterAuthorizationFailed.Code
	}
	if code == 0 {
		return next(ctx, c, kreq)
	}
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = code, -1, -1
	return reply{msg: resp}, nil
}

// guardAddPartitionsToTxn (v0-3): WRITE on the transactional id (every
// partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then WRITE on each
// topic (internal topics are never authorized here, as Kafka); when any
// topic fails, nothing is added: the others answer OPERATION_NOT_ATTEMPTED.
func guardAddPartitionsToTxn(s *Server, ctx context.Context, c *conn, kreq kmsg.Request, next handlerFn) (reply, error) {
	req := kreq.(*kmsg.AddPartitionsToTxnRequest)
	if s.cfg.Authorizer == nil {
		return next(ctx, c, kreq)
	}
	if req.Version >= 4 {
		// The broker-to-broker form (KIP-890): CLUSTER_ACTION, else the
		// whole request is CLUSTER_AUTHORIZATION_FAILED (KafkaApis).
		if c.allowedCluster(authz.OpClusterAction) {
			return next(ctx, c, kreq)
		}
		resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return reply{msg: resp}, nil
	}
	tf := c.topics(authz.OpWrite)
	txnOK := c.allowed(authz.OpWrite, authz.ResourceTransactionalID, req.TransactionalID)
	anyDenied := false
	if txnOK {
		for _, t := range req.Topics {
			if isInternalTopic(t.Topic) || !tf.ok(t.Topic) {
				anyDenied = true
			}
		}
	}
	if txnOK && !anyDenied {
		return next(ctx, c, kreq)
	}
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	for _, t := range req.Topics {
		code := txnDenied
		if txnOK {
			code = kerr.OperationNotAttempted.Code
			if isInternalTopic(t.Topic) || !tf.ok(t.Topic) {
				code = kerr.TopicAuthorizationFailed.Code
			}
		}
		rt := kmsg.NewAddPartitionsToTxnResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return reply{msg: resp}, nil
}

// isInternalTopic is Kafka's Topic.isInternal.
func isInternalTopic(t string) bool { return t == "__consumer_offsets" || t == "__transaction_state" }

// guardAddOffsetsToTxn: WRITE on the transactional id, then READ on the group.
func guardAddOffsetsToTxn(s *Server, ctx context.Context, c *conn, kreq kmsg.Request, next handlerFn) (reply, error) {
	req := kreq.(*kmsg.AddOffsetsToTxnRequest)
	code := int16(0)
	switch {
	case !c.allowed(authz.OpWrite, authz.ResourceTransactionalID, req.TransactionalID):
		code = txnDenied
	case !c.allowed(authz.OpRead, authz.ResourceGroup, req.Group):
		code = groupDenied
	}
	if code == 0 {
		return next(ctx, c, kreq)
	}
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	resp.ErrorCode = code
	return reply{msg: resp}, nil
}

// guardEndTxn: WRITE on the transactional id.
func guardEndTxn(s *Server, ctx context.Context, c *conn, kreq kmsg.Request, next handlerFn) (reply, error) {
	req := kreq.(*kmsg.EndTxnRequest)
	if c.allowed(authz.OpWrite, authz.ResourceTransactionalID, req.TransactionalID) {
		return next(ctx, c, kreq)
	}
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	resp.ErrorCode = txnDenied
	return reply{msg: resp}, nil
}

// guardTxnOffsetCommit: WRITE on the transactional id, then READ on the
// group (either failing: every partition), then READ on each topic.
func guardTxnOffsetCommit(s *Server, ctx context.Context, c *conn, kreq kmsg.Request, next handlerFn) (reply, error) {
	req := kreq.(*kmsg.TxnOffsetCommitRequest)
	if s.cfg.Authorizer == nil {
		return next(ctx, c, kreq)
	}
	answer := func(resp *kmsg.TxnOffsetCommitResponse, topics []kmsg.TxnOffsetCommitRequestTopic, code int16) {
		for _, t := range topics {
			rt := kmsg.NewTxnOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
	code := int16(0)
	switch {
	case !c.allowed(authz.OpWrite, authz.ResourceTransactionalID, req.TransactionalID):
		code = txnDenied
	case !c.allowed(authz.OpRead, authz.ResourceGroup, req.Group):
		code = groupDenied
	}
	if code != 0 {
		resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
		answer(resp, req.Topics, code)
		return reply{msg: resp}, nil
	}
	tf := c.topics(authz.OpRead)
	part := *req
	var denied []kmsg.TxnOffsetCommitRequestTopic
	part.Topics, denied = split(req.Topics, func(t kmsg.TxnOffsetCommitRequestTopic) bool { return tf.ok(t.Topic) })
	return serveAllowed(ctx, c, next, kreq, &part, len(denied), len(part.Topics), func(resp kmsg.Response) {
		answer(resp.(*kmsg.TxnOffsetCommitResponse), denied, kerr.TopicAuthorizationFailed.Code)
	})
}

// guardDescribeTransactions: DESCRIBE on each transactional id; the topics
// of a transaction the principal may not DESCRIBE are left out.
func guardDescribeTransactions(s *Server, ctx context.Context, c *conn, kreq kmsg.Request, next handlerFn) (reply, error) {
	req := kreq.(*kmsg.DescribeTransactionsRequest)
	if s.cfg.Authorizer == nil {
		return next(ctx, c, kreq)
	}
	part := *req
	part.TransactionalIDs = nil
	denied := map[string]bool{}
	for _, id := range req.TransactionalIDs {
		if c.allowed(authz.OpDescribe, authz.ResourceTransactionalID, id) {
			part.TransactionalIDs = append(part.TransactionalIDs, id)
		} else {
			denied[id] = true
		}
	}
	rep, err := nextIfAny(ctx, c, next, req, &part, len(part.TransactionalIDs))
	if err != nil || rep.msg == nil {
		return rep, err
	}
	resp := rep.msg.(*kmsg.DescribeTransactionsResponse)
	tf := c.topics(authz.OpDescribe)
	for i := range resp.TransactionStates {
		st := &resp.TransactionStates[i]
		kept := st.Topics[:0]
		for _, t := range st.Topics {
			if tf.ok(t.Topic) {
				kept = append(kept, t)
			}
		}
		st.Topics = kept
	}
	for _, id := range req.TransactionalIDs {
		if denied[id] {
			st := kmsg.NewDescribeTransactionsResponseTransactionState()
			st.TransactionalID, st.ErrorCode = id, txnDenied
			resp.TransactionStates = append(resp.TransactionStates, st)
		}
	}
	return rep, nil
}

// guardListTransactions: only transactional ids the principal may DESCRIBE.
func guardListTransactions(s *Server, ctx context.Context, c *conn, kreq kmsg.Request, next handlerFn) (reply, error) {
	rep, err := next(ctx, c, kreq)
	if err != nil || rep.msg == nil || s.cfg.Authorizer == nil {
		return rep, err
	}
	resp := rep.msg.(*kmsg.ListTransactionsResponse)
	kept := resp.TransactionStates[:0]
	for _, st := range resp.TransactionStates {
		if c.allowed(authz.OpDescribe, authz.ResourceTransactionalID, st.TransactionalID) {
			kept = append(kept, st)
		}
	}
	resp.TransactionStates = kept
	return rep, nil
}

// guardWriteTxnMarkers: CLUSTER_ACTION on the cluster (a broker's
// transaction coordinator), else every partition
// CLUSTER_AUTHORIZATION_FAILED (KafkaApis.handleWriteTxnMarkersRequest).
func guardWriteTxnMarkers(s *Server, ctx context.Context, c *conn, kreq kmsg.Request, next handlerFn) (reply, error) {
	if s.cfg.Authorizer == nil || c.allowedCluster(authz.OpClusterAction) {
		return next(ctx, c, kreq)
	}
	req := kreq.(*kmsg.WriteTxnMarkersRequest)
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	for _, m := range req.Markers {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		for _, t := range m.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition, rp.ErrorCode = p, kerr.ClusterAuthorizationFailed.Code
				rt.Partitions = append(rt.Partitions, rp)
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	return reply{msg: resp}, nil
}
