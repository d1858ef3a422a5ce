package group

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/record/recordtest"
)

// txnEnv is a harness with transactions enabled over either the in-memory
// store or real partition logs (restart = close and reopen the logs).
type txnEnv struct {
	*harness
	ls  *logStore // nil: in-memory store
	dir string
}

// newTxnEnv builds a txnEnv; real selects storage.Log partitions.
func newTxnEnv(t *testing.T, real bool, mod func(*Config)) *txnEnv {
	t.Helper()
	clk := newFakeClock()
	cfg := testConfig(clk)
	cfg.Transactions = true
	e := &txnEnv{harness: &harness{t: t, clk: clk, store: newMemStore()}}
	if real {
		cfg.NumPartitions = 3
		e.dir = t.TempDir()
		e.ls = openLogStore(t, e.dir, 3)
		e.backend = e.ls
		t.Cleanup(func() { e.ls.close(t) })
	}
	if mod != nil {
		mod(&cfg)
	}
	e.cfg = cfg
	e.start()
	return e
}

// forBoth runs f over the in-memory store and over real logs.
func forBoth(t *testing.T, mod func(*Config), f func(t *testing.T, e *txnEnv)) {
	for _, real := range []bool{false, true} {
		name := "mem"
		if real {
			name = "log"
		}
		t.Run(name, func(t *testing.T) { f(t, newTxnEnv(t, real, mod)) })
	}
}

// reboot closes the coordinator (and the logs) and loads a new one.
func (e *txnEnv) reboot() {
	e.t.Helper()
	e.c.Close()
	if e.ls != nil {
		e.ls.close(e.t)
		e.ls = openLogStore(e.t, e.dir, int(e.cfg.NumPartitions))
		e.backend = e.ls
	}
	e.start()
}

// end writes producer pid's COMMIT/ABORT marker (epoch 0) to group's
// partition and reports it, as the broker does for the transaction
// coordinator.
func (e *txnEnv) end(group string, pid int64, commit bool) { e.endAt(group, pid, 0, commit) }

func (e *txnEnv) endAt(group string, pid int64, epoch int16, commit bool) {
	e.t.Helper()
	p := PartitionFor(group, e.cfg.NumPartitions)
	var err error
	if e.ls != nil {
		err = e.ls.marker(p, pid, epoch, commit)
	} else {
		err = e.store.marker(p, pid, epoch, commit)
	}
	if err != nil {
		e.t.Fatal(err)
	}
	e.c.CompleteTxn(p, pid, commit)
}

func txnReq(group string, pid int64, gen int32, member, topic string, offsets map[int32]int64) *kmsg.TxnOffsetCommitRequest {
	r := kmsg.NewPtrTxnOffsetCommitRequest()
	r.Version = 3
	r.TransactionalID, r.Group, r.ProducerID, r.ProducerEpoch = "tx", group, pid, 0
	r.Generation, r.MemberID = gen, member
	t := kmsg.NewTxnOffsetCommitRequestTopic()
	t.Topic = topic
	for _, p := range slices.Sorted(maps.Keys(offsets)) {
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = p, offsets[p], 4
		md := "txn"
		rp.Metadata = &md
		t.Partitions = append(t.Partitions, rp)
	}
	r.Topics = append(r.Topics, t)
	return r
}

// txnCommit sends r and returns its first partition's error code, failing
// if partitions disagree.
func (h *harness) txnCommit(r *kmsg.TxnOffsetCommitRequest) int16 {
	h.t.Helper()
	resp := h.do(r).(*kmsg.TxnOffsetCommitResponse)
	if len(resp.Topics) != len(r.Topics) {
		h.t.Fatalf("txn commit: %d topics answered, %d sent", len(resp.Topics), len(r.Topics))
	}
	code := resp.Topics[0].Partitions[0].ErrorCode
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != code {
				h.t.Fatalf("txn commit: mixed codes %+v", resp.Topics)
			}
		}
	}
	return code
}

// fetchStable is OffsetFetch v8 with RequireStable for group's partitions
// of topic (all when topic is ""): offset and error code per partition.
func (h *harness) fetchStable(group, topic string, parts ...int32) (map[int32]int64, map[int32]int16) {
	h.t.Helper()
	r := kmsg.NewPtrOffsetFetchRequest()
	r.Version = 8
	r.RequireStable = true
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = group
	if topic != "" {
		rt := kmsg.NewOffsetFetchRequestGroupTopic()
		rt.Topic, rt.Partitions = topic, parts
		rg.Topics = append(rg.Topics, rt)
	}
	r.Groups = append(r.Groups, rg)
	resp := h.do(r).(*kmsg.OffsetFetchResponse)
	offs, codes := map[int32]int64{}, map[int32]int16{}
	for _, g := range resp.Groups {
		if g.ErrorCode != 0 {
			h.t.Fatalf("fetch %s: group error %d", group, g.ErrorCode)
		}
		for _, t := range g.Topics {
			for _, p := range t.Partitions {
				offs[p.Partition], codes[p.Partition] = p.Offset, p.ErrorCode
			}
		}
	}
	return offs, codes
}

const unstable = 88 // UNSTABLE_OFFSET_COMMIT

func TestTxnOffsetCommitThenCommit(t *testing.T) {
	forBoth(t, nil, func(t *testing.T, e *txnEnv) {
		e.do(commitReq("g", "", -1, "t", map[int32]int64{0: 5, 1: 6}))
		if c := e.txnCommit(txnReq("g", 7, -1, "", "t", map[int32]int64{0: 10, 2: 12})); c != 0 {
			t.Fatalf("txn commit: %d", c)
		}
		// Pending: invisible to plain fetches, unstable to stable ones.
		if got := e.fetch("g", "t", 0, 1, 2); got["t"][0] != 5 || got["t"][1] != 6 || got["t"][2] != -1 {
			t.Fatalf("pending visible: %v", got)
		}
		offs, codes := e.fetchStable("g", "t", 0, 1, 2)
		if codes[0] != unstable || codes[2] != unstable || codes[1] != 0 || offs[0] != -1 || offs[1] != 6 {
			t.Fatalf("require stable: %v %v", offs, codes)
		}
		// Fetch-all lists committed partitions; the pending one is unstable.
		offs, codes = e.fetchStable("g", "")
		if len(offs) != 2 || codes[0] != unstable || offs[1] != 6 {
			t.Fatalf("require stable, all: %v %v", offs, codes)
		}
		e.end("g", 7, true)
		if got := e.fetch("g", "t", 0, 1, 2); got["t"][0] != 10 || got["t"][1] != 6 || got["t"][2] != 12 {
			t.Fatalf("after commit: %v", got)
		}
		offs, codes = e.fetchStable("g", "t", 0, 2)
		if codes[0] != 0 || codes[2] != 0 || offs[0] != 10 || offs[2] != 12 {
			t.Fatalf("stable after commit: %v %v", offs, codes)
		}
		e.reboot()
		if got := e.fetch("g", "t", 0, 1, 2); got["t"][0] != 10 || got["t"][1] != 6 || got["t"][2] != 12 {
			t.Fatalf("after restart: %v", got)
		}
		// The committed offset keeps the transaction's metadata and epoch.
		r := kmsg.NewPtrOffsetFetchRequest()
		r.Version = 7
		r.Group = "g"
		r.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0}}}
		p := e.do(r).(*kmsg.OffsetFetchResponse).Topics[0].Partitions[0]
		if p.Offset != 10 || p.LeaderEpoch != 4 || p.Metadata == nil || *p.Metadata != "txn" {
			t.Fatalf("committed txn offset: %+v", p)
		}
	})
}

func TestTxnOffsetCommitThenAbort(t *testing.T) {
	forBoth(t, nil, func(t *testing.T, e *txnEnv) {
		e.do(commitReq("g", "", -1, "t", map[int32]int64{0: 5}))
		if c := e.txnCommit(txnReq("g", 7, -1, "", "t", map[int32]int64{0: 10})); c != 0 {
			t.Fatalf("txn commit: %d", c)
		}
		// A group known only through an aborted transaction.
		if c := e.txnCommit(txnReq("only-txn", 7, -1, "", "t", map[int32]int64{0: 3})); c != 0 {
			t.Fatalf("txn commit: %d", c)
		}
		if e.c.lookup("only-txn") == nil {
			t.Fatal("group with pending offsets missing")
		}
		e.end("g", 7, false)
		e.end("only-txn", 7, false)
		if got := e.fetch("g", "t", 0); got["t"][0] != 5 {
			t.Fatalf("after abort: %v", got)
		}
		if _, codes := e.fetchStable("g", "t", 0); codes[0] != 0 {
			t.Fatalf("unstable after abort: %v", codes)
		}
		if e.c.lookup("only-txn") != nil {
			t.Fatal("empty group kept after abort")
		}
		e.reboot()
		if got := e.fetch("g", "t", 0); got["t"][0] != 5 {
			t.Fatalf("after restart: %v", got)
		}
		if e.c.lookup("only-txn") != nil {
			t.Fatal("aborted-only group back after restart")
		}
	})
}

// TestTxnOffsetOrdering: when plain and transactional commits of a
// partition mix, the record later in the log wins once the transaction
// commits (Kafka's rule), live and after replay.
func TestTxnOffsetOrdering(t *testing.T) {
	forBoth(t, nil, func(t *testing.T, e *txnEnv) {
		// Transactional write first, plain commit later: the plain one stays.
		e.txnCommit(txnReq("a", 7, -1, "", "t", map[int32]int64{0: 10}))
		e.do(commitReq("a", "", -1, "t", map[int32]int64{0: 20}))
		// Plain commit first, transactional write later: the txn one wins.
		e.do(commitReq("b", "", -1, "t", map[int32]int64{0: 20}))
		e.txnCommit(txnReq("b", 8, -1, "", "t", map[int32]int64{0: 10}))
		e.end("a", 7, true)
		e.end("b", 8, true)
		check := func(when string) {
			if got := e.fetch("a", "t", 0); got["t"][0] != 20 {
				t.Fatalf("%s: older txn offset overrode a later plain commit: %v", when, got)
			}
			if got := e.fetch("b", "t", 0); got["t"][0] != 10 {
				t.Fatalf("%s: later txn offset did not override the plain commit: %v", when, got)
			}
		}
		check("live")
		e.reboot()
		check("replayed")
		// After the restart, new commits still order after replayed ones.
		e.txnCommit(txnReq("a", 9, -1, "", "t", map[int32]int64{0: 30}))
		e.end("a", 9, true)
		if got := e.fetch("a", "t", 0); got["t"][0] != 30 {
			t.Fatalf("txn after restart: %v", got)
		}
	})
}

// TestTxnReplayPending: a restart sees committed, aborted and still-open
// transactions; the open one stays pending until its marker.
func TestTxnReplayPending(t *testing.T) {
	forBoth(t, nil, func(t *testing.T, e *txnEnv) {
		for _, g := range []string{"committed", "aborted", "open"} {
			e.do(commitReq(g, "", -1, "t", map[int32]int64{0: 1}))
		}
		e.txnCommit(txnReq("committed", 1, -1, "", "t", map[int32]int64{0: 11}))
		e.txnCommit(txnReq("aborted", 2, -1, "", "t", map[int32]int64{0: 12}))
		e.txnCommit(txnReq("open", 3, -1, "", "t", map[int32]int64{0: 13}))
		// A second commit in the same open transaction replaces the first.
		e.txnCommit(txnReq("open", 3, -1, "", "t", map[int32]int64{0: 14, 1: 15}))
		e.end("committed", 1, true)
		e.end("aborted", 2, false)
		e.reboot()
		want := map[string]int64{"committed": 11, "aborted": 1, "open": 1}
		for g, w := range want {
			if got := e.fetch(g, "t", 0); got["t"][0] != w {
				t.Fatalf("%s after restart: %v, want %d", g, got, w)
			}
		}
		if _, codes := e.fetchStable("open", "t", 0, 1); codes[0] != unstable || codes[1] != unstable {
			t.Fatalf("open txn not pending after restart: %v", codes)
		}
		if _, codes := e.fetchStable("committed", "t", 0); codes[0] != 0 {
			t.Fatalf("committed txn unstable: %v", codes)
		}
		// A marker of another producer changes nothing.
		e.end("open", 99, true)
		if _, codes := e.fetchStable("open", "t", 0); codes[0] != unstable {
			t.Fatalf("foreign marker completed the txn: %v", codes)
		}
		e.end("open", 3, true)
		if got := e.fetch("open", "t", 0, 1); got["t"][0] != 14 || got["t"][1] != 15 {
			t.Fatalf("open txn committed after restart: %v", got)
		}
		e.reboot()
		if got := e.fetch("open", "t", 0, 1); got["t"][0] != 14 || got["t"][1] != 15 {
			t.Fatalf("after second restart: %v", got)
		}
		// Records carry the producer and the transactional attribute.
		if e.ls == nil {
			var seen bool
			_ = e.store.Replay(PartitionFor("open", 50), func(b []byte) error {
				rb := record.Batch(b)
				if rb.IsTransactional() && !rb.IsControl() {
					seen = true
					if rb.ProducerID() != 3 || rb.ProducerEpoch() != 0 || rb.BaseSequence() != -1 {
						t.Fatalf("txn batch header: pid %d epoch %d seq %d", rb.ProducerID(), rb.ProducerEpoch(), rb.BaseSequence())
					}
				}
				return nil
			})
			if !seen {
				t.Fatal("no transactional batch written")
			}
		}
	})
}

// TestTxnCompleteOnlyItsPartition: one producer commits offsets of groups
// in two __consumer_offsets partitions; each marker completes its own.
func TestTxnCompleteOnlyItsPartition(t *testing.T) {
	h := newTxnEnv(t, false, nil)
	a, b := "a", "b"
	for PartitionFor(b, 50) == PartitionFor(a, 50) {
		b += "x"
	}
	h.txnCommit(txnReq(a, 5, -1, "", "t", map[int32]int64{0: 1}))
	h.txnCommit(txnReq(b, 5, -1, "", "t", map[int32]int64{0: 2}))
	h.end(a, 5, true)
	if got := h.fetch(a, "t", 0); got["t"][0] != 1 {
		t.Fatalf("a: %v", got)
	}
	if _, codes := h.fetchStable(b, "t", 0); codes[0] != unstable {
		t.Fatalf("b completed by a's partition marker: %v", codes)
	}
	h.reboot()
	if _, codes := h.fetchStable(b, "t", 0); codes[0] != unstable {
		t.Fatalf("b after restart: %v", codes)
	}
	h.end(b, 5, false)
	if h.c.lookup(b) != nil {
		t.Fatal("b kept after abort")
	}
}

func TestTxnOffsetCommitValidation(t *testing.T) {
	var verifyErr error
	h := newTxnEnv(t, false, func(c *Config) {
		c.TopicPartitionExists = func(topic string, p int32) bool { return topic == "t" && p < 2 }
		c.VerifyTxn = func(id string, pid int64, epoch int16, p int32) error {
			if id != "tx" {
				return fmt.Errorf("verify %s %d: %w", id, p, kerr.InvalidTxnState)
			}
			if verifyErr != nil && p != PartitionFor("g", 50) {
				return fmt.Errorf("verify asked about partition %d", p)
			}
			return verifyErr
		}
	})
	id1, id2, gen := twoMembers(t, h.harness, "g")
	code := func(r *kmsg.TxnOffsetCommitRequest) int16 { return h.txnCommit(r) }
	cases := []struct {
		name string
		r    *kmsg.TxnOffsetCommitRequest
		want int16
	}{
		{"member", txnReq("g", 1, gen, id1, "t", map[int32]int64{0: 5}), 0},
		{"other member", txnReq("g", 1, gen, id2, "t", map[int32]int64{1: 5}), 0},
		{"no member fields in a live group", txnReq("g", 1, -1, "", "t", map[int32]int64{0: 5}), 0},
		{"stale generation", txnReq("g", 1, gen-1, id1, "t", map[int32]int64{0: 5}), kerr.IllegalGeneration.Code},
		{"unknown member", txnReq("g", 1, gen, "who", "t", map[int32]int64{0: 5}), kerr.UnknownMemberID.Code},
		{"member without generation", txnReq("g", 1, -1, "who", "t", map[int32]int64{0: 5}), kerr.UnknownMemberID.Code},
		{"unknown group with generation", txnReq("nope", 1, 3, "m", "t", map[int32]int64{0: 5}), kerr.IllegalGeneration.Code},
		{"unknown partition", txnReq("g", 1, gen, id1, "t", map[int32]int64{5: 5}), kerr.UnknownTopicOrPartition.Code},
		{"empty group id", txnReq("", 1, -1, "", "t", map[int32]int64{0: 5}), kerr.InvalidGroupID.Code},
		{"no producer id", txnReq("g", -1, gen, id1, "t", map[int32]int64{0: 5}), kerr.InvalidProducerIDMapping.Code},
	}
	for _, c := range cases {
		if got := code(c.r); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
	if h.c.lookup("nope") != nil {
		t.Fatal("rejected commit created a group")
	}
	inst := "i"
	r := txnReq("g", 1, gen, id1, "t", map[int32]int64{0: 5})
	r.InstanceID = &inst
	if c := code(r); c != kerr.UnknownMemberID.Code {
		t.Fatalf("unknown static member: %d", c)
	}
	// Before v3 the member fields do not exist: the commit is accepted.
	r = txnReq("g", 1, 77, "ignored", "t", map[int32]int64{0: 5})
	r.Version = 0
	if c := code(r); c != 0 {
		t.Fatalf("v0: %d", c)
	}
	big := txnReq("g", 1, gen, id1, "t", map[int32]int64{0: 5})
	md := string(make([]byte, 5000))
	big.Topics[0].Partitions[0].Metadata = &md
	if c := code(big); c != kerr.OffsetMetadataTooLarge.Code {
		t.Fatalf("big metadata: %d", c)
	}
	// Producer-state errors from the log are answered as they are.
	for _, err := range []error{kerr.InvalidProducerEpoch, kerr.ProducerFenced, kerr.InvalidTxnState} {
		h.store.failTxn = fmt.Errorf("append: %w", err)
		if c := code(txnReq("g", 1, gen, id1, "t", map[int32]int64{0: 9})); c != err.(*kerr.Error).Code {
			t.Fatalf("store error %v: %d", err, c)
		}
	}
	h.store.failTxn = errStoreDown
	if c := code(txnReq("g", 1, gen, id1, "t", map[int32]int64{0: 9})); c != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("store down: %d", c)
	}
	h.store.failTxn = nil
	verifyErr = fmt.Errorf("verify: %w", kerr.ProducerFenced)
	if c := code(txnReq("g", 1, gen, id1, "t", map[int32]int64{0: 9})); c != kerr.ProducerFenced.Code {
		t.Fatalf("verify fenced: %d", c)
	}
	verifyErr = errors.New("not added")
	if c := code(txnReq("g", 1, gen, id1, "t", map[int32]int64{0: 9})); c != kerr.InvalidTxnState.Code {
		t.Fatalf("verify failed: %d", c)
	}
	verifyErr = nil
	h.end("g", 1, true)
	if got := h.fetch("g", "t", 0, 1); got["t"][0] != 5 || got["t"][1] != 5 {
		t.Fatalf("after validation rounds: %v", got)
	}
}

// TestTxnOffsetCommitMixedPartitions: per-partition errors leave the other
// partitions committed.
func TestTxnOffsetCommitMixedPartitions(t *testing.T) {
	h := newTxnEnv(t, false, func(c *Config) {
		c.TopicPartitionExists = func(topic string, p int32) bool { return p < 2 }
	})
	r := txnReq("g", 1, -1, "", "t", map[int32]int64{0: 5, 1: 6, 9: 7})
	resp := h.do(r).(*kmsg.TxnOffsetCommitResponse)
	ps := resp.Topics[0].Partitions
	if ps[0].ErrorCode != 0 || ps[1].ErrorCode != 0 || ps[2].Partition != 9 || ps[2].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("mixed: %+v", ps)
	}
	h.end("g", 1, true)
	if got := h.fetch("g", "t", 0, 1, 9); got["t"][0] != 5 || got["t"][1] != 6 || got["t"][9] != -1 {
		t.Fatalf("after commit: %v", got)
	}
}

func TestTxnOffsetCommitConsumerProtocol(t *testing.T) {
	h := newTxnEnv(t, false, func(c *Config) {
		c.Topics = func() []TopicInfo { return []TopicInfo{topicT} }
	})
	resp := h.chb("cg", "m1", 0, []string{"t"}, "uniform", []int32{})
	if resp.ErrorCode != 0 {
		t.Fatalf("heartbeat: %d", resp.ErrorCode)
	}
	epoch := resp.MemberEpoch
	if c := h.txnCommit(txnReq("cg", 1, epoch, "m1", "t", map[int32]int64{0: 5})); c != 0 {
		t.Fatalf("member commit: %d", c)
	}
	if c := h.txnCommit(txnReq("cg", 1, epoch+1, "m1", "t", map[int32]int64{0: 5})); c != kerr.IllegalGeneration.Code {
		t.Fatalf("stale epoch: %d", c)
	}
	if c := h.txnCommit(txnReq("cg", 1, -1, "", "t", map[int32]int64{0: 5})); c != kerr.UnknownMemberID.Code {
		t.Fatalf("no member fields in a live consumer group: %d", c)
	}
}

// TestTxnOffsetFetchV7 checks UNSTABLE_OFFSET_COMMIT per partition before
// the multi-group OffsetFetch.
func TestTxnOffsetFetchV7(t *testing.T) {
	h := newTxnEnv(t, false, nil)
	h.do(commitReq("g", "", -1, "t", map[int32]int64{0: 5, 1: 6}))
	h.txnCommit(txnReq("g", 1, -1, "", "t", map[int32]int64{0: 9}))
	r := kmsg.NewPtrOffsetFetchRequest()
	r.Version = 7
	r.Group = "g"
	r.RequireStable = true
	r.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0, 1}}}
	resp := h.do(r).(*kmsg.OffsetFetchResponse)
	ps := resp.Topics[0].Partitions
	if resp.ErrorCode != 0 || ps[0].ErrorCode != unstable || ps[0].Offset != -1 || ps[1].ErrorCode != 0 || ps[1].Offset != 6 {
		t.Fatalf("v7 require stable: %+v %+v", resp, ps)
	}
	r.RequireStable = false
	ps = h.do(r).(*kmsg.OffsetFetchResponse).Topics[0].Partitions
	if ps[0].ErrorCode != 0 || ps[0].Offset != 5 {
		t.Fatalf("v7 without require stable: %+v", ps)
	}
}

// TestTxnDeleteAndExpiry: deleting a group tombstones its pending offsets
// too; retention never expires an offset with a pending commit.
func TestTxnDeleteAndExpiry(t *testing.T) {
	forBoth(t, func(c *Config) { c.OffsetsRetention = time.Hour }, func(t *testing.T, e *txnEnv) {
		e.do(commitReq("del", "", -1, "t", map[int32]int64{0: 1}))
		e.txnCommit(txnReq("del", 4, -1, "", "t", map[int32]int64{1: 2}))
		dr := kmsg.NewPtrDeleteGroupsRequest()
		dr.Groups = []string{"del"}
		if d := e.do(dr).(*kmsg.DeleteGroupsResponse); d.Groups[0].ErrorCode != 0 {
			t.Fatalf("delete: %d", d.Groups[0].ErrorCode)
		}
		e.end("del", 4, true)
		if e.c.lookup("del") != nil {
			t.Fatal("deleted group back after its txn committed")
		}
		// OffsetDelete drops a pending offset too.
		e.txnCommit(txnReq("od", 5, -1, "", "t", map[int32]int64{0: 3, 1: 4}))
		or := kmsg.NewPtrOffsetDeleteRequest()
		or.Group = "od"
		or.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 1}}}}
		if resp := e.do(or).(*kmsg.OffsetDeleteResponse); resp.ErrorCode != 0 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("offset delete: %+v", resp)
		}
		e.end("od", 5, true)
		if got := e.fetch("od", "t", 0, 1); got["t"][0] != 3 || got["t"][1] != -1 {
			t.Fatalf("od after commit: %v", got)
		}
		// Expiry keeps an offset (and its group) while a txn is pending.
		e.do(commitReq("exp", "", -1, "t", map[int32]int64{0: 1}))
		e.txnCommit(txnReq("exp", 6, -1, "", "t", map[int32]int64{0: 2}))
		e.clk.Advance(2 * time.Hour)
		if e.c.lookup("exp") == nil {
			t.Fatal("group with a pending txn expired")
		}
		if _, codes := e.fetchStable("exp", "t", 0); codes[0] != unstable {
			t.Fatalf("pending lost: %v", codes)
		}
		e.end("exp", 6, false)
		e.clk.Advance(time.Hour)
		if e.c.lookup("exp") != nil || e.c.lookup("od") != nil {
			t.Fatal("groups not expired after the txn ended")
		}
		e.reboot()
		for _, g := range []string{"del", "od", "exp"} {
			if e.c.lookup(g) != nil {
				t.Fatalf("%s back after restart", g)
			}
		}
	})
}

// TestTxnCompleteBeforeLoad: a completion reported while loading is
// applied once the load finishes.
func TestTxnCompleteBeforeLoad(t *testing.T) {
	h := newTxnEnv(t, false, nil)
	h.txnCommit(txnReq("g", 3, -1, "", "t", map[int32]int64{0: 8}))
	h.c.Close()
	c, err := NewCoordinator(h.cfg, h.store, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p := PartitionFor("g", 50)
	c.CompleteTxn(p, 3, true) // marker not in the store: only the report
	if err := c.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.c = c
	if got := h.fetch("g", "t", 0); got["t"][0] != 8 {
		t.Fatalf("early completion lost: %v", got)
	}
}

func TestTxnFindCoordinatorAndVersions(t *testing.T) {
	h := newTxnEnv(t, false, nil)
	r := kmsg.NewPtrFindCoordinatorRequest()
	r.Version = 4
	r.CoordinatorType = 1
	r.CoordinatorKeys = []string{"tx1", "tx2"}
	resp := h.do(r).(*kmsg.FindCoordinatorResponse)
	for _, co := range resp.Coordinators {
		if co.ErrorCode != 0 || co.NodeID != 1 || co.Host != "127.0.0.1" || co.Port != 9092 {
			t.Fatalf("txn coordinator: %+v", co)
		}
	}
	if vr, ok := h.c.APIVersions()[kmsg.TxnOffsetCommit.Int16()]; !ok || vr != [2]int16{0, 4} {
		t.Fatalf("TxnOffsetCommit versions %v %v", vr, ok)
	}
	off := newHarness(t, nil)
	if _, ok := off.c.APIVersions()[kmsg.TxnOffsetCommit.Int16()]; ok {
		t.Fatal("TxnOffsetCommit advertised without transactions")
	}
	if _, err := off.c.Handle(context.Background(), txnReq("g", 1, -1, "", "t", map[int32]int64{0: 1})); err == nil {
		t.Fatal("TxnOffsetCommit served without transactions")
	}
	req := txnReq("g", 1, -1, "", "t", map[int32]int64{0: 1})
	req.Version = 5
	if _, err := h.c.Handle(context.Background(), req); err == nil {
		t.Fatal("TxnOffsetCommit v5 served")
	}
}

// TestTxnFencedByLog: after the transaction coordinator fenced a producer
// (abort marker at a bumped epoch), the log rejects its old-epoch
// transactional offset commit and the client sees INVALID_PRODUCER_EPOCH
// (real logs: the epoch check is the storage's).
func TestTxnFencedByLog(t *testing.T) {
	e := newTxnEnv(t, true, nil)
	if c := e.txnCommit(txnReq("g", 7, -1, "", "t", map[int32]int64{0: 10})); c != 0 {
		t.Fatalf("txn commit: %d", c)
	}
	e.endAt("g", 7, 1, false)
	c := e.txnCommit(txnReq("g", 7, -1, "", "t", map[int32]int64{0: 11}))
	if c != kerr.InvalidProducerEpoch.Code && c != kerr.ProducerFenced.Code {
		t.Fatalf("old epoch commit: %d", c)
	}
	if e.c.lookup("g") != nil {
		t.Fatal("group kept after a rejected first commit")
	}
	r := txnReq("g", 7, -1, "", "t", map[int32]int64{0: 12})
	r.ProducerEpoch = 1
	if c := e.txnCommit(r); c != 0 {
		t.Fatalf("current epoch commit: %d", c)
	}
	e.endAt("g", 7, 1, true)
	e.reboot()
	if got := e.fetch("g", "t", 0); got["t"][0] != 12 {
		t.Fatalf("after restart: %v", got)
	}
}

// BenchmarkTxnOffsetCommit measures one transactional commit of three
// partitions and its completion (the exactly-once consume-transform-produce
// loop's per-transaction group work).
func BenchmarkTxnOffsetCommit(b *testing.B) {
	cfg := testConfig(newFakeClock())
	cfg.Transactions = true
	c, err := NewCoordinator(cfg, newMemStore(), nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	if err := c.Load(context.Background()); err != nil {
		b.Fatal(err)
	}
	req := txnReq("bench", 1, -1, "", "t", map[int32]int64{0: 1, 1: 2, 2: 3})
	p := PartitionFor("bench", cfg.NumPartitions)
	b.ReportAllocs()
	for b.Loop() {
		resp, err := c.Handle(context.Background(), req)
		if err != nil || resp.(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode != 0 {
			b.Fatal(err, resp)
		}
		c.CompleteTxn(p, 1, true)
	}
}

// BenchmarkReplayTxn measures Load's folding of one transactional batch
// of three offsets and its COMMIT marker.
func BenchmarkReplayTxn(b *testing.B) {
	var recs []record.Record
	for p := int32(0); p < 3; p++ {
		o := offset{offset: int64(p), leaderEpoch: -1, metadata: "m", commitMs: 1, expireMs: -1}
		recs = append(recs, record.Record{Key: offsetKey("g", tp{"t", p}), Value: offsetValue(o)})
	}
	data, err := buildTxnBatch(time.Unix(1, 0), 1, 0, recs)
	if err != nil {
		b.Fatal(err)
	}
	marker := recordtest.Marker(record.BatchHeader{ProducerID: 1}, true, 0)
	r := newReplayer()
	b.ReportAllocs()
	for b.Loop() {
		_ = r.applyBatch(data)
		_ = r.applyBatch(marker)
	}
}

// TestTxnConcurrent runs transactional and plain commits of shared groups
// from several goroutines (run with -race); every group ends with the
// last committed transaction's offsets.
func TestTxnConcurrent(t *testing.T) {
	h := newTxnEnv(t, false, nil)
	const workers, rounds = 4, 50
	done := make(chan error, workers)
	for w := 0; w < workers; w++ {
		go func(w int) {
			group := fmt.Sprintf("g%d", w%2)
			pid := int64(100 + w)
			p := PartitionFor(group, 50)
			for i := 0; i < rounds; i++ {
				resp, err := h.c.Handle(context.Background(), txnReq(group, pid, -1, "", "t", map[int32]int64{int32(w): int64(i)}))
				if err != nil {
					done <- err
					return
				}
				if c := resp.(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode; c != 0 {
					done <- fmt.Errorf("worker %d: code %d", w, c)
					return
				}
				if _, err := h.c.Handle(context.Background(), commitReq(group, "", -1, "u", map[int32]int64{int32(w): int64(i)})); err != nil {
					done <- err
					return
				}
				if err := h.store.marker(p, pid, 0, true); err != nil {
					done <- err
					return
				}
				h.c.CompleteTxn(p, pid, true)
			}
			done <- nil
		}(w)
	}
	for w := 0; w < workers; w++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	check := func(when string) {
		for w := 0; w < workers; w++ {
			got := h.fetch(fmt.Sprintf("g%d", w%2), "", 0)
			if got["t"][int32(w)] != rounds-1 || got["u"][int32(w)] != rounds-1 {
				t.Fatalf("%s: worker %d offsets %v", when, w, got)
			}
		}
	}
	check("live")
	h.reboot()
	check("replayed")
}
