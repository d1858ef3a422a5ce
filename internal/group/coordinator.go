package group

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/clock"
	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/storage"
)

// Storage is the __consumer_offsets topic as the coordinator sees it.
type Storage interface {
	// Append appends one v2 record batch (built with record.Build, offsets
	// 0-based; the log assigns real offsets) to __consumer_offsets
	// partition p and returns a function that waits until it is fsynced
	// (an error when the log fails or closes, or ctx ends). Appends to a
	// partition are ordered as the calls are.
	Append(partition int32, batch []byte) (durable func(context.Context) error, err error)
	// AppendTxn is Append for a transactional offset commit: batch carries
	// the producer's id and epoch, the isTransactional attribute and
	// baseSequence -1. The log checks the producer epoch (no sequence
	// checks) and opens the producer's transaction in partition p, so the
	// marker that later ends it also bounds the last stable offset.
	AppendTxn(partition int32, batch []byte) (durable func(context.Context) error, err error)
	// Log returns partition p's log for replay at Load.
	Log(partition int32) *storage.Log
}

// Config holds the coordinator's settings (Kafka's broker config names in
// the comments).
type Config struct {
	NodeID int32
	Host   string
	Port   int32
	// NumPartitions is offsets.topic.num.partitions (50).
	NumPartitions int32
	// MinSessionTimeout, MaxSessionTimeout are group.min.session.timeout.ms
	// (6s) and group.max.session.timeout.ms (30m).
	MinSessionTimeout, MaxSessionTimeout time.Duration
	// InitialRebalanceDelay is group.initial.rebalance.delay.ms (3s).
	InitialRebalanceDelay time.Duration
	// OffsetsRetention is offsets.retention.minutes (7d).
	OffsetsRetention time.Duration
	// OffsetsRetentionCheckInterval is offsets.retention.check.interval.ms (10m).
	OffsetsRetentionCheckInterval time.Duration
	// TopicPartitionExists reports whether a commit target exists; nil
	// accepts every partition.
	TopicPartitionExists func(topic string, partition int32) bool
	// MaxMetadataSize is offset.metadata.max.bytes (4096); 0 = default.
	MaxMetadataSize int
	// CommitTimeout is offsets.commit.timeout.ms (5s; 0 = default): how
	// long a __consumer_offsets write may wait to be replicated (and
	// fsynced) before the request that made it is answered with an error
	// (Kafka's GroupCoordinatorService passes it as every write's
	// timeout).
	CommitTimeout time.Duration
	// Clock is the time source; nil = real time.
	Clock Clock
	// Topics lists the topics (name, id, partition count) for KIP-848
	// server-side assignment. Nil disables ConsumerGroupHeartbeat and
	// ConsumerGroupDescribe (not advertised).
	Topics func() []TopicInfo
	// ConsumerSessionTimeout is group.consumer.session.timeout.ms (45s).
	ConsumerSessionTimeout time.Duration
	// MaxSize is group.max.size and ConsumerMaxSize group.consumer.max.size
	// (Kafka's defaults: Integer.MAX_VALUE; 0 here = no limit): the most
	// members a classic / KIP-848 group takes (GROUP_MAX_SIZE_REACHED).
	MaxSize, ConsumerMaxSize int
	// ConsumerHeartbeatInterval is group.consumer.heartbeat.interval.ms (5s).
	ConsumerHeartbeatInterval time.Duration
	// Transactions enables the group side of Kafka transactions:
	// TxnOffsetCommit is served and FindCoordinator with key type 1
	// (transaction) answers this node. False keeps both unavailable.
	Transactions bool
	// VerifyTxn, when set, is asked before a TxnOffsetCommit is written
	// whether __consumer_offsets partition p was added to the producer's
	// ongoing transaction (AddOffsetsToTxn, KIP-890 part 1). A non-nil
	// error wrapping a kerr error (INVALID_TXN_STATE, INVALID_PRODUCER_EPOCH,
	// PRODUCER_FENCED, ...) is answered for every partition of the request.
	VerifyTxn func(transactionalID string, pid int64, epoch int16, partition int32) error
	// HighWatermark returns a partition's high watermark (false when the
	// partition is unknown), for the consumer group lag metric; nil
	// leaves the metric out.
	HighWatermark func(topic string, partition int32) (int64, bool)
	// Partitioned makes the coordinator serve only the __consumer_offsets
	// partitions handed to it with LoadPartition (a cluster: the leader of
	// a group's partition is its coordinator); the others answer
	// NOT_COORDINATOR. False: every partition, loaded by Load.
	Partitioned bool
	// Leads, with Partitioned, reports whether this broker leads
	// __consumer_offsets partition p in the metadata: a partition led but
	// not handed over yet answers COORDINATOR_LOAD_IN_PROGRESS rather than
	// NOT_COORDINATOR (Kafka marks a partition loading as it becomes its
	// leader). Nil: NOT_COORDINATOR.
	Leads func(p int32) bool
}

// Coordinator is the group coordinator of this broker: of every group on a
// single node, of the groups of the __consumer_offsets partitions this
// broker leads in a cluster (ownership.go).
type Coordinator struct {
	cfg    Config
	store  Storage
	logger *slog.Logger
	env    *env
	m      *metrics
	// versions is what APIVersions returns, built once from cfg.
	versions map[int16][2]int16

	// parts holds each __consumer_offsets partition's ownership state
	// (ownership.go).
	parts  []atomic.Int32
	closed atomic.Bool
	// ctx ends when the coordinator closes: waits for writes stop.
	ctx    context.Context
	cancel context.CancelFunc

	order atomic.Int64 // log order of the last offset commit stored (see offset.order)

	mu          sync.Mutex // guards groups, expiryTimer, txnGroups and early
	groups      map[string]*group
	expiryTimer Timer
	// txnGroups lists, per producer id, the groups holding its pending
	// transactional offsets (Kafka's openGroupsForProducer).
	txnGroups map[int64]map[string]bool
	// early holds transaction completions reported before Load finished.
	early []txnCompletion
}

// NewCoordinator builds a coordinator; call Load before serving requests
// (until then group requests answer COORDINATOR_LOAD_IN_PROGRESS), or, with
// cfg.Partitioned, LoadPartition for each partition this broker leads.
func NewCoordinator(cfg Config, store Storage, logger *slog.Logger, reg prometheus.Registerer) (*Coordinator, error) {
	if cfg.NumPartitions <= 0 {
		return nil, fmt.Errorf("offsets.topic.num.partitions %d must be positive", cfg.NumPartitions)
	}
	if store == nil {
		return nil, errors.New("group coordinator needs a storage")
	}
	if cfg.MaxMetadataSize <= 0 {
		cfg.MaxMetadataSize = 4096
	}
	if cfg.CommitTimeout <= 0 {
		cfg.CommitTimeout = 5 * time.Second
	}
	if cfg.MaxSessionTimeout <= 0 {
		cfg.MaxSessionTimeout = 30 * time.Minute
	}
	if cfg.OffsetsRetention <= 0 {
		cfg.OffsetsRetention = 7 * 24 * time.Hour
	}
	if cfg.OffsetsRetentionCheckInterval <= 0 {
		cfg.OffsetsRetentionCheckInterval = 10 * time.Minute
	}
	if cfg.ConsumerSessionTimeout <= 0 {
		cfg.ConsumerSessionTimeout = 45 * time.Second
	}
	if cfg.ConsumerHeartbeatInterval <= 0 {
		cfg.ConsumerHeartbeatInterval = 5 * time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	c := &Coordinator{cfg: cfg, store: store, logger: logger, versions: apiVersions(cfg), groups: map[string]*group{}, txnGroups: map[int64]map[string]bool{}}
	c.parts = make([]atomic.Int32, cfg.NumPartitions)
	if !cfg.Partitioned {
		for i := range c.parts {
			c.parts[i].Store(partLoading) // until Load
		}
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.env = &env{
		clock:        cfg.Clock,
		initialDelay: cfg.InitialRebalanceDelay,
		minSession:   cfg.MinSessionTimeout,
		maxSession:   cfg.MaxSessionTimeout,
		maxSize:      cfg.MaxSize,
		consumerMax:  cfg.ConsumerMaxSize,
		newMemberID:  func(prefix string) string { return prefix + "-" + uuid.NewString() },
		runLocked:    c.runLocked,
	}
	c.m = newMetrics(c)
	c.env.rebalanced = c.m.rebalances.Inc
	if reg != nil {
		if err := reg.Register(c.m); err != nil {
			return nil, fmt.Errorf("register group metrics: %w", err)
		}
	}
	return c, nil
}

// runLocked runs a timer callback under the group's lock, then persists
// any metadata change it made (waiting for it without the lock).
func (c *Coordinator) runLocked(g *group, f func()) {
	g.mu.Lock()
	if c.closed.Load() || g.state == stateDead {
		g.mu.Unlock()
		return
	}
	f()
	c.unlockAndComplete(g, "timer")
}

// appendRecordsWait writes records of g and waits for them to be durable
// with g's lock held: only the rare administrative writes (OffsetDelete,
// DeleteGroups, offset expiry) do, whose effect must not be seen before
// it is stored.
func (c *Coordinator) appendRecordsWait(g *group, recs []record.Record) error {
	return c.await(c.appendLocked(g, recs))
}

// lookup returns the live group, or nil.
func (c *Coordinator) lookup(id string) *group {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.groups[id]
}

// lockGroup returns the live group locked, creating it if create is set;
// nil (unlocked) when absent or when its partition is not served here (an
// UnloadPartition raced the caller's status check: the caller answers
// c.status).
func (c *Coordinator) lockGroup(id string, create bool) *group {
	for {
		c.mu.Lock()
		g := c.groups[id]
		if g == nil {
			if !create || c.status(id) != 0 {
				c.mu.Unlock()
				return nil
			}
			g = newGroup(id, c.env)
			c.groups[id] = g
		}
		c.mu.Unlock()
		g.mu.Lock()
		if g.state != stateDead {
			return g
		}
		g.mu.Unlock() // removed meanwhile: look again
	}
}

// lockExisting is lockGroup for requests about an existing group: it
// answers InvalidGroupID for an empty id, NotCoordinator or
// CoordinatorLoadInProgress when its partition is not served (yet) and
// missing (the caller's code) for an unknown group, else returns the group
// locked and 0.
func (c *Coordinator) lockExisting(id string, missing int16) (*group, int16) {
	if id == "" {
		return nil, kerr.InvalidGroupID.Code
	}
	if code := c.status(id); code != 0 {
		return nil, code
	}
	g := c.lockGroup(id, false)
	if g == nil {
		if code := c.status(id); code != 0 {
			return nil, code
		}
		return nil, missing
	}
	return g, 0
}

// removeGroup marks g Dead and forgets it. Called with g.mu held.
func (c *Coordinator) removeGroup(g *group) {
	for _, m := range g.members {
		g.removeMember(m)
	}
	for id, t := range g.pending {
		stopTimer(t)
		delete(g.pending, id)
	}
	stopTimer(g.joinTimer)
	g.joinSeq++
	g.clearPendingSync()
	g.stopConsumerTimers()
	g.setState(stateDead)
	c.mu.Lock()
	if c.groups[g.id] == g {
		delete(c.groups, g.id)
		for pid := range g.txn {
			c.indexTxn(pid, g.id, false)
		}
	}
	g.txn = nil
	c.mu.Unlock()
}

// restore rebuilds a group from its metadata record: members it had are
// back in a Stable group and must heartbeat within their session timeout.
func (g *group) restore(v *kmsg.GroupMetadataValue) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.restoreLocked(v)
}

// restoreLocked is restore with g.mu held.
func (g *group) restoreLocked(v *kmsg.GroupMetadataValue) {
	g.protocolType = v.ProtocolType
	g.generation = v.Generation
	if v.Protocol != nil {
		g.protocol = *v.Protocol
	}
	if v.Leader != nil {
		g.leader = *v.Leader
	}
	if v.CurrentStateTimestamp > 0 {
		g.stateTime = time.UnixMilli(v.CurrentStateTimestamp)
	}
	for _, mv := range v.Members {
		m := &member{
			id:               mv.MemberID,
			instanceID:       mv.InstanceID,
			clientID:         mv.ClientID,
			clientHost:       mv.ClientHost,
			sessionTimeout:   time.Duration(mv.SessionTimeoutMillis) * time.Millisecond,
			rebalanceTimeout: time.Duration(mv.RebalanceTimeoutMillis) * time.Millisecond,
			protocols:        []protocol{{name: g.protocol, metadata: mv.Subscription}},
			assignment:       mv.Assignment,
		}
		if m.rebalanceTimeout <= 0 {
			m.rebalanceTimeout = m.sessionTimeout
		}
		g.members[m.id] = m
		if m.instanceID != nil {
			g.static[*m.instanceID] = m.id
		}
		g.heartbeat(m)
	}
	if len(g.members) > 0 {
		g.state = stateStable
	}
}

// Close stops every timer and answers parked JoinGroup/SyncGroup requests
// with NOT_COORDINATOR.
func (c *Coordinator) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	c.cancel()
	c.mu.Lock()
	stopTimer(c.expiryTimer)
	gs := slices.Collect(maps.Values(c.groups))
	c.mu.Unlock()
	for _, g := range gs {
		g.mu.Lock()
		g.unload()
		g.mu.Unlock()
	}
	return nil
}

// APIVersions returns, per API key, the {min, max} versions Handle serves
// (built once; callers must not modify it).
func (c *Coordinator) APIVersions() map[int16][2]int16 { return c.versions }

// apiVersions is APIVersions for cfg.
func apiVersions(cfg Config) map[int16][2]int16 {
	vs := map[int16][2]int16{
		kmsg.OffsetCommit.Int16():    {0, 9},
		kmsg.OffsetFetch.Int16():     {0, 9},
		kmsg.FindCoordinator.Int16(): {0, 5},
		kmsg.JoinGroup.Int16():       {0, 9},
		kmsg.Heartbeat.Int16():       {0, 4},
		kmsg.LeaveGroup.Int16():      {0, 5},
		kmsg.SyncGroup.Int16():       {0, 5},
		kmsg.DescribeGroups.Int16():  {0, 6},
		kmsg.ListGroups.Int16():      {0, 5},
		kmsg.DeleteGroups.Int16():    {0, 3},
		kmsg.OffsetDelete.Int16():    {0, 0},
	}
	if cfg.Transactions {
		vs[kmsg.TxnOffsetCommit.Int16()] = [2]int16{0, 4}
	}
	if cfg.Topics != nil {
		vs[kmsg.ConsumerGroupHeartbeat.Int16()] = [2]int16{0, 1}
		vs[kmsg.ConsumerGroupDescribe.Int16()] = [2]int16{0, 1}
	}
	return vs
}

// Handle serves one group API request. JoinGroup and SyncGroup block until
// the rebalance step they wait for completes (or ctx ends). A returned
// error means the connection should be closed.
func (c *Coordinator) Handle(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	if vr, ok := c.versions[req.Key()]; !ok || req.GetVersion() < vr[0] || req.GetVersion() > vr[1] {
		return nil, fmt.Errorf("group coordinator: unsupported %s version %d", kmsg.NameForKey(req.Key()), req.GetVersion())
	}
	switch r := req.(type) {
	case *kmsg.FindCoordinatorRequest:
		return c.findCoordinator(r), nil
	case *kmsg.JoinGroupRequest:
		return c.joinGroup(ctx, r)
	case *kmsg.SyncGroupRequest:
		return c.syncGroup(ctx, r)
	case *kmsg.HeartbeatRequest:
		return c.heartbeat(r), nil
	case *kmsg.LeaveGroupRequest:
		return c.leaveGroup(ctx, r), nil
	case *kmsg.OffsetCommitRequest:
		return c.offsetCommit(ctx, r), nil
	case *kmsg.OffsetFetchRequest:
		return c.offsetFetch(r), nil
	case *kmsg.TxnOffsetCommitRequest:
		return c.txnOffsetCommit(ctx, r), nil
	case *kmsg.ListGroupsRequest:
		return c.listGroups(r), nil
	case *kmsg.DescribeGroupsRequest:
		return c.describeGroups(r), nil
	case *kmsg.DeleteGroupsRequest:
		return c.deleteGroups(ctx, r), nil
	case *kmsg.OffsetDeleteRequest:
		return c.offsetDelete(ctx, r), nil
	case *kmsg.ConsumerGroupHeartbeatRequest:
		return c.consumerGroupHeartbeat(ctx, r), nil
	case *kmsg.ConsumerGroupDescribeRequest:
		return c.consumerGroupDescribe(r), nil
	}
	return nil, fmt.Errorf("group coordinator: %s is not a group API", kmsg.NameForKey(req.Key()))
}

// clientInfoKey carries the client id and host of a request in its context.
type clientInfoKey struct{}

type clientInfo struct{ id, host string }

// WithClientInfo returns ctx carrying the request header's client id and
// the client's address, which JoinGroup records for DescribeGroups.
func WithClientInfo(ctx context.Context, clientID, host string) context.Context {
	return context.WithValue(ctx, clientInfoKey{}, clientInfo{clientID, host})
}

func clientFrom(ctx context.Context) clientInfo {
	if ci, ok := ctx.Value(clientInfoKey{}).(clientInfo); ok {
		return ci
	}
	return clientInfo{id: "", host: "/unknown"}
}
