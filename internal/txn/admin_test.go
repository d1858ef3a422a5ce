package txn

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestDescribeTransactions(t *testing.T) {
	h := newHarness(t)
	pid, epoch := h.init("tx")
	h.add("tx", pid, epoch, tp("b", 1), tp("a", 2), tp("a", 0))
	r := kmsg.NewPtrDescribeTransactionsRequest()
	r.TransactionalIDs = []string{"tx", "", "nope"}
	resp := h.do(r).(*kmsg.DescribeTransactionsResponse)
	if len(resp.TransactionStates) != 3 {
		t.Fatalf("states: %+v", resp.TransactionStates)
	}
	st := resp.TransactionStates[0]
	if st.ErrorCode != 0 || st.TransactionalID != "tx" || st.State != "Ongoing" || st.ProducerID != pid ||
		len(st.Topics) != 2 || st.Topics[0].Topic != "a" || len(st.Topics[0].Partitions) != 2 || st.Topics[1].Topic != "b" {
		t.Fatalf("tx: %+v", st)
	}
	wantCode(t, "empty id", resp.TransactionStates[1].ErrorCode, kerr.InvalidRequest)
	wantCode(t, "unknown id", resp.TransactionStates[2].ErrorCode, kerr.TransactionalIDNotFound)

	c, err := NewCoordinator(h.cfg, h.d, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := c.Handle(context.Background(), r)
	wantCode(t, "before load", out.(*kmsg.DescribeTransactionsResponse).TransactionStates[0].ErrorCode, kerr.CoordinatorLoadInProgress)
	c.Close()
	out, _ = c.Handle(context.Background(), r)
	wantCode(t, "after close", out.(*kmsg.DescribeTransactionsResponse).TransactionStates[0].ErrorCode, kerr.CoordinatorNotAvailable)
}

func TestListTransactions(t *testing.T) {
	h := newHarness(t)
	ep, _ := h.init("app-empty")
	op, oe := h.init("app-ongoing")
	cp, ce := h.init("other-done")
	h.add("app-ongoing", op, oe, tp("a", 0))
	h.add("other-done", cp, ce, tp("a", 0))
	wantCode(t, "commit", h.end(4, "other-done", cp, ce, true), nil)
	h.clk.Advance(5000 * time.Millisecond)

	list := func(version int16, f func(r *kmsg.ListTransactionsRequest)) *kmsg.ListTransactionsResponse {
		r := kmsg.NewPtrListTransactionsRequest()
		r.Version = version
		if f != nil {
			f(r)
		}
		return h.do(r).(*kmsg.ListTransactionsResponse)
	}
	ids := func(resp *kmsg.ListTransactionsResponse) string {
		var s []string
		for _, ts := range resp.TransactionStates {
			s = append(s, ts.TransactionalID+"="+ts.TransactionState)
		}
		return strings.Join(s, ",")
	}
	if got := ids(list(0, nil)); got != "app-empty=Empty,app-ongoing=Ongoing,other-done=CompleteCommit" {
		t.Fatalf("all: %s", got)
	}
	resp := list(0, func(r *kmsg.ListTransactionsRequest) { r.StateFilters = []string{"Ongoing", "Bogus"} })
	if got := ids(resp); got != "app-ongoing=Ongoing" || len(resp.UnknownStateFilters) != 1 || resp.UnknownStateFilters[0] != "Bogus" {
		t.Fatalf("state filter: %s unknown %v", got, resp.UnknownStateFilters)
	}
	if got := ids(list(0, func(r *kmsg.ListTransactionsRequest) { r.StateFilters = []string{"Bogus"} })); got != "" {
		t.Fatalf("only unknown states: %s", got)
	}
	if got := ids(list(0, func(r *kmsg.ListTransactionsRequest) { r.ProducerIDFilters = []int64{ep, cp} })); got != "app-empty=Empty,other-done=CompleteCommit" {
		t.Fatalf("pid filter: %s", got)
	}
	// v1: running longer than the duration (Kafka: now - start > duration;
	// an id with no transaction has start -1, so it is always older).
	if got := ids(list(1, func(r *kmsg.ListTransactionsRequest) { r.DurationFilterMillis = 4999 })); !strings.Contains(got, "app-ongoing") {
		t.Fatalf("duration 4999: %s", got)
	}
	if got := ids(list(1, func(r *kmsg.ListTransactionsRequest) { r.DurationFilterMillis = 5000 })); strings.Contains(got, "app-ongoing") {
		t.Fatalf("duration 5000: %s", got)
	}
	// v0 has no duration filter.
	if got := ids(list(0, func(r *kmsg.ListTransactionsRequest) { r.DurationFilterMillis = 1 << 40 })); !strings.Contains(got, "app-ongoing") {
		t.Fatalf("v0 duration ignored: %s", got)
	}
	pattern := func(p string) func(r *kmsg.ListTransactionsRequest) {
		return func(r *kmsg.ListTransactionsRequest) { r.TransactionalIDPattern = &p }
	}
	if got := ids(list(2, pattern("^app-"))); got != "app-empty=Empty,app-ongoing=Ongoing" {
		t.Fatalf("pattern: %s", got)
	}
	if got := ids(list(1, pattern("^app-"))); !strings.Contains(got, "other-done") {
		t.Fatalf("v1 ignores the pattern: %s", got)
	}
	wantCode(t, "bad pattern", list(2, pattern("(")).ErrorCode, kerr.InvalidRegularExpression)
}

func TestMetrics(t *testing.T) {
	h := newHarness(t)
	reg := prometheus.NewRegistry()
	c, err := NewCoordinator(h.cfg, h.d, nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.c.Close()
	h.c = c
	pid, epoch := h.init("tx")
	h.add("tx", pid, epoch, tp("a", 0))
	wantCode(t, "commit", h.end(4, "tx", pid, epoch, true), nil)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			name := mf.GetName()
			for _, l := range m.GetLabel() {
				name += "{" + l.GetValue() + "}"
			}
			if m.Counter != nil {
				got[name] = m.Counter.GetValue()
			} else if m.Gauge != nil {
				got[name] = m.Gauge.GetValue()
			}
		}
	}
	if got["strata_txn_commits_total"] != 1 || got["strata_txn_transactional_ids{CompleteCommit}"] != 1 {
		t.Fatalf("metrics: %v", got)
	}
}
