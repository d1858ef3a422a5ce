package txn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/clock"
	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/storage"
)

// Config holds the coordinator's settings (Kafka's broker config names in
// the comments). Zero durations take Kafka's defaults.
type Config struct {
	NodeID                int32
	NumPartitions         int32         // transaction.state.log.num.partitions (50)
	MaxTimeout            time.Duration // transaction.max.timeout.ms (900000)
	IDExpiration          time.Duration // transactional.id.expiration.ms (604800000)
	AbortTimedOutInterval time.Duration // transaction.abort.timed.out.transaction.cleanup.interval.ms (10000)
	RemoveExpiredInterval time.Duration // transaction.remove.expired.transaction.cleanup.interval.ms (3600000)
	// MarkerRetryInterval is how often the markers of transactions left in
	// PrepareCommit/PrepareAbort by a failed attempt are tried again (1s;
	// Kafka's TransactionMarkerChannelManager re-enqueues a failed marker
	// at once, at the partition's leader of the moment).
	MarkerRetryInterval time.Duration
	Clock               clock.Clock // the time source; nil = clock.Real()
	// Partitioned makes the coordinator serve only the __transaction_state
	// partitions handed to it with LoadPartition (a cluster: the leader of
	// a transactional id's partition is its coordinator); the others
	// answer NOT_COORDINATOR. False: every partition, loaded by Load.
	Partitioned bool
	// Leads, with Partitioned, reports whether this broker leads
	// __transaction_state partition p in the metadata: a partition led but
	// not handed over yet answers COORDINATOR_LOAD_IN_PROGRESS rather than
	// NOT_COORDINATOR. Nil: NOT_COORDINATOR.
	Leads func(p int32) bool
}

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// Deps is what the coordinator needs from the rest of the broker (the
// server implements it).
type Deps interface {
	// NewProducerID returns a never-used producer id.
	NewProducerID() (int64, error)
	// PartitionExists reports whether a partition exists (AddPartitionsToTxn
	// answers UNKNOWN_TOPIC_OR_PARTITION otherwise; markers skip it).
	PartitionExists(topic string, partition int32) bool
	// WriteMarkers appends a COMMIT/ABORT marker to every partition and
	// waits until all are durable; for __consumer_offsets partitions it
	// also lets the group coordinator apply/drop the offsets.
	WriteMarkers(ctx context.Context, pid int64, epoch int16, coordinatorEpoch int32, commit bool, parts []TopicPartition) error
	// StateAppend durably appends one v2 batch (built with internal/record)
	// to __transaction_state partition p.
	StateAppend(ctx context.Context, partition int32, batch []byte) error
	// StateLog returns __transaction_state partition p's log for replay at
	// Load (nil: nothing to replay).
	StateLog(partition int32) *storage.Log
	// GroupPartition returns the __consumer_offsets partition of a group.
	GroupPartition(groupID string) int32
}

// groupTopic is the topic AddOffsetsToTxn adds to a transaction.
const groupTopic = "__consumer_offsets"

// Coordinator is the transaction coordinator of this broker: of every
// __transaction_state partition on a single node, of the partitions this
// broker leads in a cluster (ownership.go).
type Coordinator struct {
	cfg    Config
	deps   Deps
	logger *slog.Logger
	m      *metrics

	// parts holds each __transaction_state partition's ownership state
	// (ownership.go).
	parts  []atomic.Int32
	closed atomic.Bool

	// ctx bounds the coordinator's own work (state appends, markers, the
	// periodic work); Close cancels it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// completing counts the transaction completions running in the
	// background (completeAsync); Close waits for them.
	completing sync.WaitGroup

	mu          sync.Mutex // guards txns, coordEpochs, pctx, pcancel, looping, stopLoop and every txnMeta
	txns        map[string]*txnMeta
	coordEpochs []int32 // per __transaction_state partition
	// pctx bounds each owned partition's marker work (ownership.go).
	pctx     []context.Context
	pcancel  []context.CancelFunc
	looping  bool     // the periodic work was started (loop.go)
	stopLoop []func() // stops it
}

// NewCoordinator builds a coordinator; call Load before serving requests
// (until then requests answer COORDINATOR_LOAD_IN_PROGRESS).
func NewCoordinator(cfg Config, deps Deps, logger *slog.Logger, reg prometheus.Registerer) (*Coordinator, error) {
	if cfg.NumPartitions <= 0 {
		return nil, fmt.Errorf("transaction.state.log.num.partitions %d must be positive", cfg.NumPartitions)
	}
	if deps == nil {
		return nil, errors.New("transaction coordinator needs its dependencies")
	}
	if cfg.MaxTimeout <= 0 {
		cfg.MaxTimeout = 15 * time.Minute
	}
	if cfg.IDExpiration <= 0 {
		cfg.IDExpiration = 7 * 24 * time.Hour
	}
	if cfg.AbortTimedOutInterval <= 0 {
		cfg.AbortTimedOutInterval = 10 * time.Second
	}
	if cfg.MarkerRetryInterval <= 0 {
		cfg.MarkerRetryInterval = time.Second
	}
	if cfg.RemoveExpiredInterval <= 0 {
		cfg.RemoveExpiredInterval = time.Hour
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	c := &Coordinator{
		cfg: cfg, deps: deps, logger: logger,
		txns: map[string]*txnMeta{}, coordEpochs: make([]int32, cfg.NumPartitions),
		parts: make([]atomic.Int32, cfg.NumPartitions),
		pctx:  make([]context.Context, cfg.NumPartitions), pcancel: make([]context.CancelFunc, cfg.NumPartitions),
	}
	if !cfg.Partitioned {
		for i := range c.parts {
			c.parts[i].Store(partLoading) // until Load
		}
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.m = newMetrics(c)
	if reg != nil {
		if err := reg.Register(c.m); err != nil {
			return nil, fmt.Errorf("register transaction metrics: %w", err)
		}
	}
	return c, nil
}

func (c *Coordinator) nowMs() int64 { return c.cfg.Clock.Now().UnixMilli() }

// partition returns the __transaction_state partition of id.
func (c *Coordinator) partition(id string) int32 { return PartitionFor(id, c.cfg.NumPartitions) }

// Close stops the loop and waits for it; requests then answer
// COORDINATOR_NOT_AVAILABLE.
func (c *Coordinator) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	c.cancel()
	c.mu.Lock()
	stops := c.stopLoop
	c.stopLoop = nil
	c.mu.Unlock()
	for _, stop := range stops {
		stop()
	}
	c.wg.Wait()
	c.completing.Wait()
	return nil
}

// awaitCompletions waits until the transaction completions started so far
// have run (tests, which check their markers).
func (c *Coordinator) awaitCompletions() { c.completing.Wait() }

// apiVersions are the API keys Handle serves with their version ranges
// (InitProducerId, key 22, is the protocol layer's to advertise).
var apiVersions = map[int16][2]int16{
	24: {0, 3}, // AddPartitionsToTxn (v4+ is broker-to-broker, KIP-890)
	25: {0, 3}, // AddOffsetsToTxn
	26: {0, 4}, // EndTxn (v5 is transaction version 2)
	65: {0, 0}, // DescribeTransactions
	66: {0, 2}, // ListTransactions
}

// clusterAPIVersions is apiVersions in a cluster: AddPartitionsToTxn v4,
// the batched, verify-only form partition leaders on other brokers send
// (KIP-890 part 1; Kafka 3.6+ advertises v0-4). Clients keep using v3 and
// below (v4 needs CLUSTER_ACTION).
var clusterAPIVersions = map[int16][2]int16{24: {0, 4}, 25: {0, 3}, 26: {0, 4}, 65: {0, 0}, 66: {0, 2}}

// APIVersions returns the API keys Handle serves with their version
// ranges (callers must not modify the map).
func (c *Coordinator) APIVersions() map[int16][2]int16 {
	if c.cfg.Partitioned {
		return clusterAPIVersions
	}
	return apiVersions
}

// Handle answers one transaction request: InitProducerId (requests with a
// transactional id), AddPartitionsToTxn v0-3, AddOffsetsToTxn v0-3,
// EndTxn v0-4, DescribeTransactions v0 and ListTransactions v0-2. An
// error means the request is not one of these (or an unsupported version).
func (c *Coordinator) Handle(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	if v, ok := c.APIVersions()[req.Key()]; ok && (req.GetVersion() < v[0] || req.GetVersion() > v[1]) {
		return nil, fmt.Errorf("txn: %s v%d: %w", kmsg.NameForKey(req.Key()), req.GetVersion(), kerr.UnsupportedVersion)
	}
	switch r := req.(type) {
	case *kmsg.InitProducerIDRequest:
		return c.handleInitProducerID(ctx, r), nil
	case *kmsg.AddPartitionsToTxnRequest:
		if r.Version >= 4 {
			return c.handleAddPartitionsBatched(r), nil
		}
		return c.handleAddPartitions(r), nil
	case *kmsg.AddOffsetsToTxnRequest:
		return c.handleAddOffsets(r), nil
	case *kmsg.EndTxnRequest:
		return c.handleEndTxn(r), nil
	case *kmsg.DescribeTransactionsRequest:
		return c.handleDescribe(r), nil
	case *kmsg.ListTransactionsRequest:
		return c.handleList(r), nil
	}
	return nil, fmt.Errorf("txn: request key %d (%s) is not a transaction request", req.Key(), kmsg.NameForKey(req.Key()))
}

// appendTransit writes tr for id to its __transaction_state partition.
func (c *Coordinator) appendTransit(id string, tr transit) error {
	b, err := buildBatch(c.cfg.Clock.Now(), []record.Record{{Key: stateKey(id), Value: stateValue(tr)}})
	if err != nil {
		return err
	}
	p := c.partition(id)
	// Kafka's TransactionStateManager.appendTransactionToLog gives the
	// append the transaction's own timeout (txnTimeoutMs): a transition
	// the ISR has not replicated by then fails with REQUEST_TIMED_OUT,
	// answered COORDINATOR_NOT_AVAILABLE (appendError), and the
	// transaction stays in its previous state.
	if err := c.stateAppend(p, b, time.Duration(tr.timeoutMs)*time.Millisecond); err != nil {
		return fmt.Errorf("append to __transaction_state-%d: %w", p, err)
	}
	return nil
}

// stateAppend appends b to __transaction_state partition p and waits at
// most timeout for it to be replicated and durable (a non-positive timeout:
// until the coordinator closes).
func (c *Coordinator) stateAppend(p int32, b []byte, timeout time.Duration) error {
	ctx := c.ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	err := c.deps.StateAppend(ctx, p, b)
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) && c.ctx.Err() == nil && !errors.Is(err, kerr.RequestTimedOut) {
		err = fmt.Errorf("not replicated within %v: %v: %w", timeout, err, kerr.RequestTimedOut)
	}
	return err
}

// write persists the transition m.prepare accepted, then applies it (or
// drops it on failure, returning the coordinator error Kafka's
// appendTransactionToLog maps the append error to).
func (c *Coordinator) write(m *txnMeta, tr transit) *kerr.Error {
	err := c.appendTransit(m.id, tr)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		m.clearPending()
		c.logger.Warn("transaction state append failed", "transactional_id", m.id, "state", tr.state, "err", err)
		return appendError(err)
	}
	m.apply(tr)
	return nil
}

// appendError maps a failed __transaction_state append to the error the
// client gets (TransactionStateManager.appendTransactionToLog): retriable
// append errors become COORDINATOR_NOT_AVAILABLE, a storage failure
// NOT_COORDINATOR, oversized records UNKNOWN_SERVER_ERROR.
func appendError(err error) *kerr.Error {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		switch ke {
		case kerr.UnknownTopicOrPartition, kerr.NotEnoughReplicas, kerr.NotEnoughReplicasAfterAppend, kerr.RequestTimedOut:
			return kerr.CoordinatorNotAvailable
		case kerr.NotLeaderForPartition, kerr.KafkaStorageError:
			return kerr.NotCoordinator
		case kerr.MessageTooLarge, kerr.RecordListTooLarge:
			return kerr.UnknownServerError
		}
		return ke
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return kerr.CoordinatorNotAvailable
	}
	return kerr.NotCoordinator // a local storage failure (Kafka's KAFKA_STORAGE_ERROR)
}

// code returns e's code, 0 for nil.
func code(e *kerr.Error) int16 {
	if e == nil {
		return 0
	}
	return e.Code
}

// fenced maps PRODUCER_FENCED to INVALID_PRODUCER_EPOCH for request
// versions older than fencedSince (KIP-588: clients before it do not know
// the new code; KafkaApis does this per API).
func fenced(e *kerr.Error, version, fencedSince int16) *kerr.Error {
	if e == kerr.ProducerFenced && version < fencedSince {
		return kerr.InvalidProducerEpoch
	}
	return e
}
