package txn

import (
	"regexp"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleDescribe answers DescribeTransactions v0 (Kafka's
// handleDescribeTransactions): partitions are those still awaiting
// markers, i.e. every partition of an Ongoing or preparing transaction.
func (c *Coordinator) handleDescribe(r *kmsg.DescribeTransactionsRequest) *kmsg.DescribeTransactionsResponse {
	resp := r.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	for _, id := range r.TransactionalIDs {
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID = id
		switch {
		case c.closed.Load():
			st.ErrorCode = kerr.CoordinatorNotAvailable.Code
		case id == "":
			st.ErrorCode = kerr.InvalidRequest.Code
		case c.availability(id) != nil:
			st.ErrorCode = c.availability(id).Code
		default:
			c.describeOne(&st)
		}
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return resp
}

func (c *Coordinator) describeOne(st *kmsg.DescribeTransactionsResponseTransactionState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.txns[st.TransactionalID]
	if m == nil || m.state == stateDead {
		st.ErrorCode = kerr.TransactionalIDNotFound.Code
		return
	}
	st.State = m.state.String()
	st.TimeoutMillis = m.timeoutMs
	st.StartTimestamp = m.startMs
	st.ProducerID = m.producerID
	st.ProducerEpoch = m.epoch
	for _, tp := range sortedParts(m.parts) {
		n := len(st.Topics)
		if n == 0 || st.Topics[n-1].Topic != tp.Topic {
			t := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
			t.Topic = tp.Topic
			st.Topics = append(st.Topics, t)
			n++
		}
		st.Topics[n-1].Partitions = append(st.Topics[n-1].Partitions, tp.Partition)
	}
}

// handleList answers ListTransactions v0-2 (Kafka's
// listTransactionStates): unknown state names are echoed in
// UnknownStateFilters; v1 keeps only transactions running longer than
// DurationFilterMillis (when >= 0); v2 filters ids by a regular
// expression (INVALID_REGULAR_EXPRESSION when it does not compile).
func (c *Coordinator) handleList(r *kmsg.ListTransactionsRequest) *kmsg.ListTransactionsResponse {
	resp := r.ResponseKind().(*kmsg.ListTransactionsResponse)
	resp.UnknownStateFilters = []string{}
	switch {
	case c.closed.Load():
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp
	case c.loading():
		resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
		return resp
	}
	var pattern *regexp.Regexp
	if r.Version >= 2 && r.TransactionalIDPattern != nil && *r.TransactionalIDPattern != "" {
		re, err := regexp.Compile(*r.TransactionalIDPattern)
		if err != nil {
			resp.ErrorCode = kerr.InvalidRegularExpression.Code
			return resp
		}
		pattern = re
	}
	states := map[state]bool{}
	for _, name := range r.StateFilters {
		if s, ok := stateFromName(name); ok {
			states[s] = true
		} else {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, name)
		}
	}
	duration := int64(-1)
	if r.Version >= 1 {
		duration = r.DurationFilterMillis
	}
	now := c.nowMs()
	c.mu.Lock()
	for id, m := range c.txns {
		switch {
		case m.state == stateDead:
			continue
		case len(r.ProducerIDFilters) > 0 && !slices.Contains(r.ProducerIDFilters, m.producerID):
			continue
		case len(r.StateFilters) > 0 && !states[m.state]:
			continue
		case duration >= 0 && now-m.startMs <= duration:
			continue
		case pattern != nil && !pattern.MatchString(id):
			continue
		}
		ts := kmsg.NewListTransactionsResponseTransactionState()
		ts.TransactionalID = id
		ts.ProducerID = m.producerID
		ts.TransactionState = m.state.String()
		resp.TransactionStates = append(resp.TransactionStates, ts)
	}
	c.mu.Unlock()
	slices.SortFunc(resp.TransactionStates, func(a, b kmsg.ListTransactionsResponseTransactionState) int {
		return strings.Compare(a.TransactionalID, b.TransactionalID)
	})
	return resp
}
