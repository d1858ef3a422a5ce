package replica

import (
	"context"
	"errors"
	"hash/fnv"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/clock"
	"github.com/strata-io/strata/internal/quota"
	"github.com/strata-io/strata/internal/storage"
)

// Conn sends requests to one other broker (a kgo.Broker does).
type Conn interface {
	Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error)
}

// Dialer reaches other brokers on the inter-broker listener.
type Dialer interface {
	// Dial returns a connection to broker id; conn distinguishes the
	// fetchers of one source broker (num.replica.fetchers), which Kafka
	// gives a connection each.
	Dial(ctx context.Context, id int32, conn int) (Conn, error)
	// Forget drops a connection that failed, so the next Dial makes a new
	// one.
	Forget(id int32, conn int)
}

// Proposal is an ISR change a leader wants committed.
type Proposal struct {
	TP     TP
	Change *IsrChange
	MinISR int
}

// Errors a Committer returns for a proposal.
var (
	// ErrStale: the partition's state changed since the proposal was
	// decided (Kafka's INVALID_UPDATE_VERSION / FENCED_LEADER_EPOCH): the
	// leader waits for the newer state.
	ErrStale = errors.New("partition state changed; waiting for the new state")
	// ErrIneligible: the state is unchanged but a replica the change names
	// (or the leader itself) is no longer the incarnation it was decided
	// about (KIP-903; Kafka's INELIGIBLE_REPLICA): the leader returns to
	// the committed state and decides again.
	ErrIneligible = errors.New("a replica is no longer the incarnation the change was decided about")
)

// Committer commits ISR changes (AlterPartition) in the cluster metadata.
type Committer interface {
	// AlterPartitions commits each proposal by compare-and-set; one error
	// per proposal: nil, ErrStale, ErrIneligible or another (retried).
	AlterPartitions(ctx context.Context, leader int32, props []Proposal) []error
}

// ManagerConfig holds the broker's replication settings (Kafka's names).
type ManagerConfig struct {
	// Local is this broker's node.id; BrokerEpoch its current broker epoch
	// (KIP-903).
	Local       int32
	BrokerEpoch func() int64
	// Fenced reports that this broker must not act as a leader now
	// (the broker session found lost: its registration is gone, another
	// broker may lead its partitions; docs/cluster.md "Fencing"). nil:
	// never.
	Fenced func() bool
	// Durable is strata.durable.acks.
	Durable bool
	// LagTimeMax is replica.lag.time.max.ms (30 s).
	LagTimeMax time.Duration
	// Fetchers is num.replica.fetchers (1): fetchers per source broker.
	Fetchers int
	// FetchMaxBytes is replica.fetch.max.bytes (1 MiB, per partition),
	// FetchResponseMaxBytes replica.fetch.response.max.bytes (10 MiB),
	// FetchMinBytes replica.fetch.min.bytes (1), FetchWaitMax
	// replica.fetch.wait.max.ms (500 ms), FetchBackoff
	// replica.fetch.backoff.ms (1 s).
	FetchMaxBytes         int32
	FetchResponseMaxBytes int32
	FetchMinBytes         int32
	FetchWaitMax          time.Duration
	FetchBackoff          time.Duration
	// LeaderQuota and FollowerQuota are the replication throttles
	// (leader/follower.replication.throttled.rate with the partitions of
	// leader/follower.replication.throttled.replicas naming this broker;
	// Kafka's ReplicationQuotaManager). nil: never throttled.
	LeaderQuota   *quota.Replication
	FollowerQuota *quota.Replication
	Dialer        Dialer
	Committer     Committer
	Clock         clock.Clock
	Logger        *slog.Logger
}

func (c *ManagerConfig) defaults() {
	if c.LagTimeMax <= 0 {
		c.LagTimeMax = 30 * time.Second
	}
	if c.Fetchers <= 0 {
		c.Fetchers = 1
	}
	if c.FetchMaxBytes <= 0 {
		c.FetchMaxBytes = 1 << 20
	}
	if c.FetchResponseMaxBytes <= 0 {
		c.FetchResponseMaxBytes = 10 << 20
	}
	if c.FetchMinBytes <= 0 {
		c.FetchMinBytes = 1
	}
	if c.FetchWaitMax <= 0 {
		c.FetchWaitMax = 500 * time.Millisecond
	}
	if c.FetchBackoff <= 0 {
		c.FetchBackoff = time.Second
	}
	if c.Clock == nil {
		c.Clock = clock.Real()
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.BrokerEpoch == nil {
		c.BrokerEpoch = func() int64 { return -1 }
	}
	if c.Fenced == nil {
		c.Fenced = func() bool { return false }
	}
}

// Manager holds this broker's replicated partitions: it applies metadata
// to them, runs one fetcher per source broker (and fetcher index), checks
// ISRs for lagging followers every half replica.lag.time.max.ms (Kafka's
// isr-expiration task), and commits ISR changes through the Committer.
// Start it once; Close stops every goroutine it started.
type Manager struct {
	cfg    ManagerConfig
	logger *slog.Logger

	mu       sync.Mutex
	replicas map[TP]*Replica
	brokers  map[int32]Broker
	fetchers map[fetcherKey]*fetcher

	// Replicas whose fsynced end advanced (from log hooks), handled by run.
	pendMu  sync.Mutex
	pending map[*Replica]struct{}
	wake    chan struct{}

	// ISR changes to commit, handled by commitLoop.
	propMu   sync.Mutex
	props    map[*Replica]*IsrChange
	propWake chan struct{}

	counts counters

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type fetcherKey struct {
	source int32
	index  int
}

// NewManager returns a manager; Start runs it.
func NewManager(cfg ManagerConfig) *Manager {
	cfg.defaults()
	ctx, cancel := context.WithCancel(context.Background())
	return &Manager{
		cfg: cfg, logger: cfg.Logger.With("component", "replica"),
		replicas: map[TP]*Replica{}, brokers: map[int32]Broker{}, fetchers: map[fetcherKey]*fetcher{},
		pending: map[*Replica]struct{}{}, wake: make(chan struct{}, 1),
		props: map[*Replica]*IsrChange{}, propWake: make(chan struct{}, 1),
		ctx: ctx, cancel: cancel,
	}
}

// Start starts the manager's loops.
func (m *Manager) Start() {
	m.wg.Add(2)
	go m.run()
	go m.commitLoop()
}

// Close stops every fetcher and loop. Replicas stay as they are (their
// logs belong to the broker).
func (m *Manager) Close() {
	m.cancel()
	m.mu.Lock()
	fs := make([]*fetcher, 0, len(m.fetchers))
	for _, f := range m.fetchers {
		fs = append(fs, f)
	}
	m.fetchers = map[fetcherKey]*fetcher{}
	m.mu.Unlock()
	for _, f := range fs {
		f.stop()
	}
	m.wg.Wait() // the loops and every fetcher goroutine
}

func (m *Manager) nowMs() int64 { return m.cfg.Clock.Now().UnixMilli() }

func (m *Manager) leaderConfig(minISR int) Config {
	return Config{Local: m.cfg.Local, BrokerEpoch: m.cfg.BrokerEpoch(), MinISR: minISR,
		LagTimeMaxMs: m.cfg.LagTimeMax.Milliseconds(), Durable: m.cfg.Durable}
}

func (m *Manager) brokersCopy() map[int32]Broker {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.brokers)
}

// Replica returns the replica of tp, or nil.
func (m *Manager) Replica(tp TP) *Replica {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.replicas[tp]
}

// Apply applies a replicated partition's committed state: this broker
// becomes (or stays) its leader or a follower fetching from the leader.
// log is the local replica's log; minISR the topic's min.insync.replicas.
func (m *Manager) Apply(tp TP, log *storage.Log, st State, minISR int) *Replica {
	return m.applyAll([]applyItem{{tp: tp, log: log, st: st, minISR: minISR}})[0]
}

// applyItem is one partition of a metadata change applyAll applies.
type applyItem struct {
	tp     TP
	log    *storage.Log
	st     State
	minISR int
}

// applyAll applies the committed states of many partitions from one
// metadata change (an election after a broker failure makes this broker
// leader of many at once) and returns their replicas, in order. The new
// leader epochs are recorded first, in one storage.AssignEpochs batch:
// two SyncFS per log dir however many partitions, instead of an fsync'd
// checkpoint write per partition. Kafka's ordering is kept: a partition's
// leadership (which accepts appends at the new epoch) is taken only after
// the batch made the entry naming the epoch durable (Partition.makeLeader
// calls UnifiedLog.maybeAssignEpochStartOffset, which is
// LeaderEpochFileCache.assign, before the partition takes appends). In
// between, a replica becoming leader has stopped fetching (no follower
// append moves the log end the entry names), and an append of a leader
// still serving the older epoch is refused by the batch's fence
// (NOT_LEADER_OR_FOLLOWER, retriable). A partition whose batched write
// failed, or a lone new epoch, is assigned the usual way by apply.
func (m *Manager) applyAll(items []applyItem) []*Replica {
	rs := make([]*Replica, len(items))
	var logs []*storage.Log
	var epochs []int32
	for i, it := range items {
		r := m.replica(it.tp, it.log)
		rs[i] = r
		if r.prepareLeaderEpoch(it.st) {
			logs = append(logs, it.log)
			epochs = append(epochs, it.st.LeaderEpoch)
		}
	}
	if len(logs) < 2 {
		// One epoch: apply's fsync'd write of one small file costs less
		// than two SyncFS of a file system that may hold other dirty data.
		logs = nil
	}
	for i, err := range storage.AssignEpochs(logs, epochs) {
		if err != nil {
			// apply assigns it again, fsync'd, before leading.
			m.logger.Warn("record leader epoch (batched)", "epoch", epochs[i], "err", err)
		}
	}
	for i, it := range items {
		rs[i].apply(it.st, it.minISR)
	}
	return rs
}

// replica returns the replica of tp on log, made and handed to
// replication if new.
func (m *Manager) replica(tp TP, log *storage.Log) *Replica {
	m.mu.Lock()
	r := m.replicas[tp]
	fresh := r == nil || r.log != log
	if fresh {
		r = &Replica{m: m, tp: tp, log: log, changed: make(chan struct{}), st: State{Leader: -1, LeaderEpoch: -1, PartitionEpoch: -1}, sentDurable: NoOffset}
		m.replicas[tp] = r
	}
	m.mu.Unlock()
	if fresh {
		// Replication takes the log over from a high watermark known
		// committed (its checkpointed one after a restart, Kafka's
		// Partition.createLog), never from its own log end: a restarted
		// replica may hold a tail the ISR never had. As a leader
		// (NewLeader) only maybeIncrementHW moves it from there; as a
		// follower only the leader's answers do.
		r.mu.Lock()
		log.StartReplication(m.durableHook(r))
		r.mu.Unlock()
	}
	return r
}

// Remove drops a replica (the partition was deleted or moved off this
// broker): it stops fetching and leading; acks=all waiters fail.
func (m *Manager) Remove(tp TP) {
	m.mu.Lock()
	r := m.replicas[tp]
	delete(m.replicas, tp)
	m.mu.Unlock()
	if r == nil {
		return
	}
	m.unfollow(r)
	r.mu.Lock()
	wasLeader := r.leader != nil
	r.leader = nil
	r.removed = true
	r.signal()
	r.mu.Unlock()
	if wasLeader {
		// Long polls (consumers and followers) on this partition answer
		// NOT_LEADER_OR_FOLLOWER now rather than at their max wait.
		r.log.WakeWaiters()
	}
	m.propMu.Lock()
	delete(m.props, r)
	m.propMu.Unlock()
}

// SetBrokers replaces the registered brokers and their epochs (from the
// metadata): leaders use them to decide who may join an ISR.
func (m *Manager) SetBrokers(b map[int32]Broker) {
	m.mu.Lock()
	m.brokers = maps.Clone(b)
	rs := slices.Collect(maps.Values(m.replicas))
	m.mu.Unlock()
	for _, r := range rs {
		r.mu.Lock()
		if r.leader != nil {
			r.leader.SetBrokers(maps.Clone(b))
		}
		r.mu.Unlock()
	}
}

// durableHook is the log's callback when its fsynced end advances. It runs
// under the log's lock: it only queues the replica for run.
func (m *Manager) durableHook(r *Replica) func(int64) {
	return func(int64) {
		// A follower fetches again as soon as its fsync completes.
		if f := r.wakeFetcher.Load(); f != nil {
			f.wakeup()
		}
		m.pendMu.Lock()
		m.pending[r] = struct{}{}
		m.pendMu.Unlock()
		select {
		case m.wake <- struct{}{}:
		default:
		}
	}
}

// run handles fsync notifications and the periodic ISR check.
func (m *Manager) run() {
	defer m.wg.Done()
	tick := time.NewTicker(max(m.cfg.LagTimeMax/2, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-m.wake:
			m.pendMu.Lock()
			rs := m.pending
			m.pending = map[*Replica]struct{}{}
			m.pendMu.Unlock()
			for r := range rs {
				r.durableAdvanced()
			}
		case <-tick.C:
			m.mu.Lock()
			rs := slices.Collect(maps.Values(m.replicas))
			m.mu.Unlock()
			for _, r := range rs {
				r.tick()
			}
			m.retryProposals()
		}
	}
}

// propose queues an ISR change for commitLoop (called under r.mu).
func (m *Manager) propose(r *Replica, ch *IsrChange) {
	m.propMu.Lock()
	m.props[r] = ch
	m.propMu.Unlock()
	select {
	case m.propWake <- struct{}{}:
	default:
	}
}

// retryProposals re-queues changes still in flight whose commit failed
// for a reason that says nothing about the metadata (unreachable store).
func (m *Manager) retryProposals() {
	m.mu.Lock()
	rs := slices.Collect(maps.Values(m.replicas))
	m.mu.Unlock()
	for _, r := range rs {
		r.mu.Lock()
		if r.leader != nil {
			if ch := r.leader.Pending(); ch != nil && ch.retry {
				ch.retry = false
				m.propose(r, ch)
			}
		}
		r.mu.Unlock()
	}
}

// commitLoop commits queued ISR changes in batches.
func (m *Manager) commitLoop() {
	defer m.wg.Done()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-m.propWake:
		}
		m.propMu.Lock()
		batch := m.props
		m.props = map[*Replica]*IsrChange{}
		m.propMu.Unlock()
		if len(batch) == 0 || m.cfg.Committer == nil {
			continue
		}
		rs := make([]*Replica, 0, len(batch))
		props := make([]Proposal, 0, len(batch))
		for r, ch := range batch {
			r.mu.Lock()
			minISR := r.minISR
			r.mu.Unlock()
			rs = append(rs, r)
			props = append(props, Proposal{TP: r.tp, Change: ch, MinISR: minISR})
		}
		ctx, cancel := context.WithTimeout(m.ctx, 10*time.Second)
		errs := m.cfg.Committer.AlterPartitions(ctx, m.cfg.Local, props)
		cancel()
		for i, r := range rs {
			err := errs[i]
			ch := props[i].Change
			switch {
			case err == nil:
				m.logger.Info("ISR change committed", "partition", r.tp, "change", ch.String())
				if len(ch.Removed) > 0 {
					m.counts.shrinks.Add(1)
				}
				if len(ch.Added) > 0 {
					m.counts.expands.Add(1)
				}
			case errors.Is(err, ErrStale):
				m.counts.failedUpdates.Add(1)
				m.logger.Info("ISR change not applied: the partition changed meanwhile", "partition", r.tp, "change", ch.String())
			case errors.Is(err, ErrIneligible):
				m.counts.failedUpdates.Add(1)
				m.logger.Info("ISR change not applied", "partition", r.tp, "change", ch.String(), "err", err)
				r.mu.Lock()
				if r.leader != nil {
					r.leader.AlterFailed(ch)
				}
				r.mu.Unlock()
			default:
				m.logger.Warn("ISR change failed; retrying", "partition", r.tp, "change", ch.String(), "err", err)
				r.mu.Lock()
				ch.retry = true
				r.mu.Unlock()
			}
		}
	}
}

// follow registers r with the fetcher of its leader (under r.mu).
func (m *Manager) follow(r *Replica, source int32) {
	key := fetcherKey{source: source, index: fetcherIndex(r.tp, m.cfg.Fetchers)}
	if r.fetcher != nil && r.fetcher.key == key {
		r.fetcher.wakeup()
		return
	}
	m.unfollow(r)
	m.mu.Lock()
	f := m.fetchers[key]
	if f == nil && m.ctx.Err() == nil {
		f = newFetcher(m, key)
		m.fetchers[key] = f
		f.start()
	}
	m.mu.Unlock()
	if f == nil {
		return
	}
	f.add(r)
	r.fetcher = f
	r.wakeFetcher.Store(f)
}

// unfollow removes r from its fetcher (under r.mu); a fetcher left
// without partitions stops.
func (m *Manager) unfollow(r *Replica) {
	f := r.fetcher
	if f == nil {
		return
	}
	r.fetcher = nil
	r.wakeFetcher.Store(nil)
	if f.remove(r) == 0 {
		m.mu.Lock()
		if m.fetchers[f.key] == f {
			delete(m.fetchers, f.key)
		}
		m.mu.Unlock()
		f.stop()
	}
}

// fetcherIndex spreads a source broker's partitions over its fetchers as
// Kafka's AbstractFetcherManager.getFetcherId does (the topic's Java
// hashCode is replaced by FNV; any stable hash serves).
func fetcherIndex(tp TP, n int) int {
	if n <= 1 {
		return 0
	}
	h := fnv.New32a()
	h.Write([]byte(tp.Topic))
	v := int64(31*int64(h.Sum32()) + int64(tp.Partition))
	if v < 0 {
		v = -v
	}
	return int(v % int64(n))
}
