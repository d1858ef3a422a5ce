package txn

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/clock"
	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/storage"
	"github.com/strata-io/strata/internal/vfs"
)

// markerCall is one recorded WriteMarkers call.
type markerCall struct {
	pid        int64
	epoch      int16
	coordEpoch int32
	commit     bool
	parts      []TopicPartition
}

// testDeps implements Deps over real __transaction_state logs in a temp
// dir (append, then wait for the fsync, as the server does) and records
// the markers the coordinator asks for.
type testDeps struct {
	t      testing.TB
	dir    string
	n      int32
	syncer *storage.Syncer
	logs   []*storage.Log
	fsys   vfs.FS // vfs.Default() unless a power-loss test swaps in a CrashFS
	clean  bool   // open the logs as after a clean shutdown

	nextPID     atomic.Int64
	leaderEpoch atomic.Int32 // stamped on state appends

	mu       sync.Mutex
	missing  map[TopicPartition]bool // partitions that do not exist
	markers  []markerCall
	markErr  error                         // WriteMarkers fails with it when set
	markHook func()                        // runs inside WriteMarkers (blocking tests)
	appendFn func(p int32, b []byte) error // runs before each state append; an error fails it
	// stall keeps state appends from ever becoming durable (an ISR that
	// does not replicate): the wait ends only with its context.
	stall bool
}

func openDeps(t testing.TB, dir string, n int32) *testDeps {
	t.Helper()
	d := &testDeps{t: t, dir: dir, n: n, missing: map[TopicPartition]bool{}, fsys: vfs.Default(), clean: true}
	d.nextPID.Store(1000)
	d.open()
	return d
}

func (d *testDeps) open() {
	d.t.Helper()
	d.syncer = storage.NewSyncer(nil)
	cfg := storage.DefaultConfig()
	cfg.Compact, cfg.Delete = true, false
	d.logs = nil
	for p := int32(0); p < d.n; p++ {
		l, err := storage.Open(filepath.Join(d.dir, fmt.Sprintf("__transaction_state-%d", p)), [16]byte{7}, cfg, d.clean,
			storage.Options{FS: d.fsys, Syncer: d.syncer})
		if err != nil {
			d.t.Fatal(err)
		}
		d.logs = append(d.logs, l)
	}
}

func (d *testDeps) close() {
	d.t.Helper()
	for _, l := range d.logs {
		if err := l.Close(); err != nil {
			d.t.Fatal(err)
		}
	}
	d.syncer.Close()
}

func (d *testDeps) NewProducerID() (int64, error) { return d.nextPID.Add(1), nil }

func (d *testDeps) PartitionExists(topic string, partition int32) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return !d.missing[TopicPartition{topic, partition}]
}

func (d *testDeps) WriteMarkers(_ context.Context, pid int64, epoch int16, coordEpoch int32, commit bool, parts []TopicPartition) error {
	d.mu.Lock()
	hook := d.markHook
	d.mu.Unlock()
	if hook != nil {
		hook()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.markErr != nil {
		return d.markErr
	}
	d.markers = append(d.markers, markerCall{pid, epoch, coordEpoch, commit, slices.Clone(parts)})
	return nil
}

func (d *testDeps) StateAppend(ctx context.Context, p int32, batch []byte) error {
	d.mu.Lock()
	fn := d.appendFn
	d.mu.Unlock()
	if fn != nil {
		if err := fn(p, batch); err != nil {
			return err
		}
	}
	res, err := d.logs[p].Append(batch, storage.AppendOptions{RequireKeys: true, LeaderEpoch: d.leaderEpoch.Load()})
	if err != nil {
		return err
	}
	d.mu.Lock()
	stall := d.stall
	d.mu.Unlock()
	if stall {
		<-ctx.Done()
		return ctx.Err()
	}
	return d.logs[p].WaitDurable(ctx, res.LastOffset+1)
}

func (d *testDeps) StateLog(p int32) *storage.Log { return d.logs[p] }

func (d *testDeps) GroupPartition(group string) int32 { return int32(len(group)) % 5 }

func (d *testDeps) takeMarkers() []markerCall {
	d.mu.Lock()
	defer d.mu.Unlock()
	m := d.markers
	d.markers = nil
	return m
}

func (d *testDeps) set(f func(d *testDeps)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	f(d)
}

// records decodes every record of __transaction_state partition p.
func (d *testDeps) records(p int32) []stateRecord {
	d.t.Helper()
	var out []stateRecord
	_, err := replayLog(d.logs[p], func(b record.Batch) {
		if err := b.ForEachRecord(func(r *record.Record) error {
			sr, ok, err := decodeStateRecord(r.Key, r.Value)
			if err != nil || !ok {
				d.t.Fatalf("undecodable state record: %v", err)
			}
			out = append(out, sr)
			return nil
		}); err != nil {
			d.t.Fatal(err)
		}
	})
	if err != nil {
		d.t.Fatal(err)
	}
	return out
}

// newFakeClock is the manual clock of the coordinator tests.
func newFakeClock() *clock.Manual {
	return clock.NewManual(time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC))
}

// harness is a loaded coordinator over testDeps.
type harness struct {
	t   testing.TB
	c   *Coordinator
	d   *testDeps
	clk *clock.Manual
	cfg Config
	// async leaves transaction completions running in the background
	// after a request (by default do waits for them).
	async bool
}

const testPartitions = 3

func newHarness(t testing.TB) *harness {
	t.Helper()
	clk := newFakeClock()
	// The periodic work (loop.go) runs on the clock: the harness's tests
	// call its passes themselves, so its periods are beyond any Advance
	// (TestPeriodicWorkOnClock sets real ones).
	cfg := Config{NodeID: 1, NumPartitions: testPartitions, MaxTimeout: time.Minute, IDExpiration: time.Hour, Clock: clk,
		AbortTimedOutInterval: 1000 * time.Hour, RemoveExpiredInterval: 1000 * time.Hour, MarkerRetryInterval: 1000 * time.Hour}
	h := &harness{t: t, d: openDeps(t, t.TempDir(), testPartitions), clk: clk, cfg: cfg}
	h.start()
	t.Cleanup(func() {
		h.c.Close()
		h.d.close()
	})
	return h
}

// start builds and loads a coordinator over h.d.
func (h *harness) start() {
	h.t.Helper()
	c, err := NewCoordinator(h.cfg, h.d, nil, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := c.Load(context.Background()); err != nil {
		h.t.Fatal(err)
	}
	h.c = c
}

// restart closes the coordinator and the logs, reopens them and loads a
// new coordinator (a broker restart).
func (h *harness) restart() {
	h.t.Helper()
	h.c.Close()
	h.d.close()
	h.d.open()
	h.start()
}

func (h *harness) do(req kmsg.Request) kmsg.Response {
	h.t.Helper()
	resp, err := h.c.Handle(context.Background(), req)
	if err != nil {
		h.t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
	}
	// EndTxn (and a fencing InitProducerId) is answered before its
	// markers are written (finishEnd): the tests check them after.
	if !h.async {
		h.c.awaitCompletions()
	}
	return resp
}

func (h *harness) initReq(id string, version int16, timeoutMs int32, pid int64, epoch int16) *kmsg.InitProducerIDResponse {
	h.t.Helper()
	r := kmsg.NewPtrInitProducerIDRequest()
	r.Version = version
	if id != "-" {
		r.TransactionalID = &id
	}
	r.TransactionTimeoutMillis = timeoutMs
	r.ProducerID, r.ProducerEpoch = pid, epoch
	return h.do(r).(*kmsg.InitProducerIDResponse)
}

// init initializes id (v4, 30s timeout) and expects success.
func (h *harness) init(id string) (int64, int16) {
	h.t.Helper()
	resp := h.initReq(id, 4, 30000, -1, -1)
	if resp.ErrorCode != 0 {
		h.t.Fatalf("init %s: %v", id, kerr.ErrorForCode(resp.ErrorCode))
	}
	return resp.ProducerID, resp.ProducerEpoch
}

// add sends AddPartitionsToTxn (v3) and returns the per-partition codes in
// request order.
func (h *harness) addV(version int16, id string, pid int64, epoch int16, parts ...TopicPartition) []int16 {
	h.t.Helper()
	r := kmsg.NewPtrAddPartitionsToTxnRequest()
	r.Version = version
	r.TransactionalID, r.ProducerID, r.ProducerEpoch = id, pid, epoch
	for _, tp := range parts {
		n := len(r.Topics)
		if n == 0 || r.Topics[n-1].Topic != tp.Topic {
			t := kmsg.NewAddPartitionsToTxnRequestTopic()
			t.Topic = tp.Topic
			r.Topics = append(r.Topics, t)
			n++
		}
		r.Topics[n-1].Partitions = append(r.Topics[n-1].Partitions, tp.Partition)
	}
	resp := h.do(r).(*kmsg.AddPartitionsToTxnResponse)
	var codes []int16
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			codes = append(codes, p.ErrorCode)
		}
	}
	return codes
}

// add adds partitions and expects success.
func (h *harness) add(id string, pid int64, epoch int16, parts ...TopicPartition) {
	h.t.Helper()
	for _, c := range h.addV(3, id, pid, epoch, parts...) {
		if c != 0 {
			h.t.Fatalf("add partitions to %s: %v", id, kerr.ErrorForCode(c))
		}
	}
}

func (h *harness) addOffsets(version int16, id string, pid int64, epoch int16, group string) int16 {
	h.t.Helper()
	r := kmsg.NewPtrAddOffsetsToTxnRequest()
	r.Version = version
	r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.Group = id, pid, epoch, group
	return h.do(r).(*kmsg.AddOffsetsToTxnResponse).ErrorCode
}

func (h *harness) end(version int16, id string, pid int64, epoch int16, commit bool) int16 {
	h.t.Helper()
	r := kmsg.NewPtrEndTxnRequest()
	r.Version = version
	r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.Commit = id, pid, epoch, commit
	return h.do(r).(*kmsg.EndTxnResponse).ErrorCode
}

func (h *harness) describe(id string) kmsg.DescribeTransactionsResponseTransactionState {
	h.t.Helper()
	r := kmsg.NewPtrDescribeTransactionsRequest()
	r.TransactionalIDs = []string{id}
	return h.do(r).(*kmsg.DescribeTransactionsResponse).TransactionStates[0]
}

// wantCode fails unless got is want's code (nil = NONE).
func wantCode(t testing.TB, what string, got int16, want *kerr.Error) {
	t.Helper()
	if got != code(want) {
		t.Fatalf("%s: got %v, want %v", what, kerr.ErrorForCode(got), kerr.ErrorForCode(code(want)))
	}
}

// wantState checks id's described state, producer id and epoch.
func (h *harness) wantState(id string, st string, pid int64, epoch int16) kmsg.DescribeTransactionsResponseTransactionState {
	h.t.Helper()
	d := h.describe(id)
	if d.ErrorCode != 0 || d.State != st || d.ProducerID != pid || d.ProducerEpoch != epoch {
		h.t.Fatalf("describe %s: err %v state %s pid %d epoch %d; want %s pid %d epoch %d",
			id, kerr.ErrorForCode(d.ErrorCode), d.State, d.ProducerID, d.ProducerEpoch, st, pid, epoch)
	}
	return d
}

var errDisk = errors.New("disk on fire")

func tp(topic string, p int32) TopicPartition { return TopicPartition{topic, p} }

func errorsIs(err error, target *kerr.Error) bool { return errors.Is(err, target) }
