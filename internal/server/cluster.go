package server

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-io/strata/internal/config"
	"github.com/strata-io/strata/internal/controller"
	"github.com/strata-io/strata/internal/etcdnode"
	"github.com/strata-io/strata/internal/meta"
	"github.com/strata-io/strata/internal/quota"
	"github.com/strata-io/strata/internal/replica"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// cluster is a node's membership of the cluster metadata (docs/cluster.md):
// the embedded etcd member on the controller listener, the broker's
// registration and session, the watch-fed cache and the controller
// driver.
//
// Topics live in the metadata store: the broker's local replicas follow
// it (cluster_topics.go), and topic administration goes through it.
type cluster struct {
	node   *etcdnode.Node
	cli    *clientv3.Client
	store  *meta.Store
	cache  *meta.Cache
	admin  *controller.Admin
	active atomic.Bool
	stop   context.CancelFunc
	done   chan struct{}

	// reg is the broker's current registration: replaced when the
	// session's lease is found expired and the broker registers again
	// with a new epoch (keepRegistered).
	reg     atomic.Pointer[registration]
	regStop context.CancelFunc
	regDone chan struct{}
	// repl replicates the partitions with several replicas
	// (cluster_replicas.go); nil when this node cannot replicate.
	repl *replica.Manager
	// leaderQuota and followerQuota are repl's replication throttles,
	// updated at every view (applyThrottles).
	leaderQuota, followerQuota *quota.Replication
	dialer                     *replica.KgoDialer
	// revoked: the registration was revoked by a controlled shutdown
	// (handOffLeadership), set before close.
	revoked bool

	// The reconciler (cluster_topics.go): applied is the revision the
	// local replicas reflect; appliedCh is closed at each new one.
	rstop     context.CancelFunc
	rdone     chan struct{}
	applied   atomic.Int64
	appliedMu sync.Mutex
	appliedCh chan struct{}

	// Background work (internal topic creation), stopped by close.
	bgCtx    context.Context
	bgStop   context.CancelFunc
	bg       sync.WaitGroup
	ensuring sync.Map
}

// registration is one registration of the broker: its session (lease)
// and broker epoch.
type registration struct {
	session *meta.Session
	epoch   int64
}

// session is the broker's current session.
func (c *cluster) session() *meta.Session { return c.reg.Load().session }

// epoch is the broker's current registration epoch.
func (c *cluster) epoch() int64 { return c.reg.Load().epoch }

// clusterConfigured reports whether the node runs with the cluster
// metadata store: KRaft settings were given, or zero configuration runs
// as a one-node cluster (Options.OneNodeCluster). Without either (the
// in-process single-node mode tests still use) it runs without a store.
func clusterConfigured(cfg *config.Broker) bool { return cfg.Clustered() }

// clusterToken derives etcd's initial-cluster-token from the voter list,
// so nodes started with the same voters form one cluster without another
// setting.
func clusterToken(voters []config.Voter) string {
	h := fnv.New64a()
	for _, v := range voters {
		fmt.Fprintf(h, "%d@%s:%d,", v.ID, v.Host, v.Port)
	}
	return "strata-" + strconv.FormatUint(h.Sum64(), 16)
}

// startCluster starts the metadata store member, checks the cluster id,
// registers the broker and starts the controller driver.
func (s *Server) startCluster(ctx context.Context, host string, port int32) error {
	me := int32(s.cfg.Int("node.id"))
	voters := s.storeVoters()
	c := &cluster{done: make(chan struct{})}
	phase := s.startPhases("cluster start")
	fail := func(err error) error {
		c.close(context.Background(), s.logger)
		return err
	}
	// A controller runs a member of the metadata store on its controller
	// listener and talks to it directly; every node also knows the other
	// voters' controller listeners, which serve the store's clients too.
	// The member was started by New while the logs loaded
	// (member_start.go).
	var endpoints []string
	if s.member != nil {
		var err error
		if c.node, err = s.takeMember(ctx); err != nil {
			return err
		}
		endpoints = append(endpoints, c.node.ClientEndpoint())
	}
	phase("metadata store member started")
	for _, v := range voters {
		if v.ID != me || c.node == nil {
			endpoints = append(endpoints, v.URL())
		}
	}
	var err error
	// Keepalive pings abandon a member whose process froze (SIGSTOP)
	// with its connections open (etcdnode.ClientConfig).
	c.cli, err = clientv3.New(etcdnode.ClientConfig(nil, endpoints...))
	if err != nil {
		return fail(fmt.Errorf("metadata store client: %w", err))
	}
	c.store = meta.NewStore(c.cli, meta.DefaultKeys, etcdnode.DefaultMaxTxnOps)
	// Every step below retries a store that does not answer yet, up to
	// one deadline for the whole start.
	deadline := time.Now().Add(startRetryFor)
	var id string
	if err := retryStart(ctx, deadline, s.logger, "cluster id", func() (err error) {
		id, err = c.store.EnsureClusterID(ctx, s.broker.ClusterID())
		return err
	}); err != nil {
		return fail(err)
	}
	if id != s.broker.ClusterID() {
		// A node started on empty log directories joins the cluster it
		// finds; one whose directories hold another cluster's data is
		// refused.
		if err := s.broker.AdoptClusterID(id); err != nil {
			return fail(fmt.Errorf("%w: the log directories belong to cluster %s but the metadata store serves cluster %s: a node joins only the cluster its data was written by",
				config.ErrInvalid, s.broker.ClusterID(), id))
		}
	}
	phase("cluster id checked")
	if err := retryStart(ctx, deadline, s.logger, "adopt local topics", func() error { return s.adoptLocalTopics(ctx, c) }); err != nil {
		return fail(err)
	}
	phase("local topics adopted")
	if err := retryStart(ctx, deadline, s.logger, "load metadata", func() (err error) {
		c.cache, err = meta.StartCache(ctx, c.store, s.logger)
		return err
	}); err != nil {
		return fail(err)
	}
	s.metaCache.Store(c.cache)
	phase("metadata loaded")
	session := time.Duration(s.cfg.Int64("broker.session.timeout.ms")) * time.Millisecond
	hb := time.Duration(s.cfg.Int64("broker.heartbeat.interval.ms")) * time.Millisecond
	var sess *meta.Session
	if err := retryStart(ctx, deadline, s.logger, "session", func() (err error) {
		sess, err = meta.NewSession(ctx, c.cli, session, hb, s.logger)
		return err
	}); err != nil {
		return fail(err)
	}
	c.reg.Store(&registration{session: sess})
	phase("session opened")
	c.admin = &controller.Admin{Store: c.store, Cache: c.cache, Policy: s.policy}
	if why := s.replicationRefusal(); why != "" {
		c.admin.MaxReplicationFactor, c.admin.MaxReplicationReason = 1, why
	}
	if err := s.startReplication(c); err != nil {
		return fail(err)
	}
	c.bgCtx, c.bgStop = context.WithCancel(context.Background())
	if err := s.attachScram(ctx, c); err != nil {
		return fail(err)
	}
	// The local replicas match the metadata before the broker registers
	// (and may be elected leader of its partitions).
	c.appliedCh = make(chan struct{})
	phase("replication and credentials started")
	v := c.cache.View()
	if err := s.applyView(ctx, c, v); err != nil {
		return fail(fmt.Errorf("apply the cluster metadata to the local replicas: %w", err))
	}
	c.setApplied(v.Rev)
	phase("metadata applied to the local replicas")
	s.broker.SetProducerIDAllocator(func(n int64) (int64, error) {
		actx, cancel := context.WithTimeout(c.bgCtx, 10*time.Second)
		defer cancel()
		return c.store.AllocateProducerIDs(actx, n, 0)
	})
	epoch, err := s.register(ctx, c, sess, host, port)
	if err != nil {
		return fail(err)
	}
	phase("registered")
	// Serve only once the local view holds this registration (its epoch is
	// the registration's revision): until then a restarted broker's
	// Metadata answers could name its previous incarnation's endpoints, and
	// a client dialled the dead address (e2e TestDiskFull, "connection
	// refused" right after a restart). Kafka's broker likewise catches up
	// with the metadata log past its registration before it is unfenced
	// (KIP-631, BrokerLifecycleManager).
	wctx, wcancel := context.WithTimeout(ctx, startRetryFor)
	_, err = c.cache.WaitRev(wctx, epoch)
	wcancel()
	if err != nil {
		return fail(fmt.Errorf("wait for the cluster metadata to show this broker's registration: %w", err))
	}
	c.reg.Store(&registration{session: sess, epoch: epoch})
	phase("registration seen")
	kctx, kcancel := context.WithCancel(context.Background())
	c.regStop, c.regDone = kcancel, make(chan struct{})
	go s.keepRegistered(kctx, c, host, port)
	rctx, rcancel := context.WithCancel(context.Background())
	c.rstop, c.rdone = rcancel, make(chan struct{})
	go s.reconcile(rctx, c)
	if c.node != nil {
		// Controllers campaign for the active controller role.
		dctx, cancel := context.WithCancel(context.Background())
		c.stop = cancel
		d := &controller.Driver{NodeID: me, Store: c.store, Cache: c.cache, SessionTTL: session, Logger: s.logger,
			Policy: s.policy, OnActive: func(on bool) { c.active.Store(on) }, Rebalance: s.rebalanceConfig()}
		go func() { defer close(c.done); d.Run(dctx) }()
		if err := s.reg.Register(etcdnode.NewCollector(c.node)); err != nil {
			return fail(fmt.Errorf("register metadata store metrics: %w", err))
		}
	}
	if err := s.reg.Register(controller.NewCollector(c.cache, c.active.Load)); err != nil {
		return fail(fmt.Errorf("register controller metrics: %w", err))
	}
	s.cluster = c
	s.logger.Info("registered in the cluster metadata", "node", me, "broker_epoch", epoch,
		"controller", c.node != nil, "cluster_id", id)
	return nil
}

// adoptLocalTopics writes the topics of a log directory written by the
// single-node release (or by a one-node KRaft node of the release before
// topics lived in the metadata store) into the cluster metadata, with
// their ids, configs and partitions, this node the only replica and the
// leader at the leader epoch it had; the producer ids it handed out are
// never handed out again. Offsets, groups and transactions are in the
// partition logs and need nothing more. A topic name the cluster already
// has under another id is refused: the directory belongs elsewhere.
func (s *Server) adoptLocalTopics(ctx context.Context, c *cluster) error {
	if s.broker.ClusterManaged() {
		return nil
	}
	v, err := c.store.Load(ctx)
	if err != nil {
		return err
	}
	me := s.broker.NodeID()
	k := c.store.Keys()
	adopted := 0
	for _, t := range s.broker.Topics() {
		if vt := v.Topics[t.Name]; vt != nil {
			if vt.ID != t.ID.String() {
				return fmt.Errorf("%w: the log directories hold topic %s with id %s, but the cluster has %s with id %s: this data was not written by this cluster",
					config.ErrInvalid, t.Name, t.ID, t.Name, vt.ID)
			}
			continue // adopted by an earlier, interrupted start
		}
		n := int32(0)
		var changes []meta.Change
		for _, p := range t.Partitions {
			n = max(n, p.Index+1)
			l := p.Leadership()
			st := meta.PartitionState{Replicas: []int32{me}, ISR: []int32{me}, Leader: me, LeaderEpoch: max(l.LeaderEpoch, p.Log.LatestEpoch(), 0)}
			changes = append(changes, c.store.PartitionChange(meta.TopicPartition{TopicID: t.ID.String(), Partition: p.Index}, st, 0))
		}
		tc, err := meta.PutJSON(k.Topic(t.Name), meta.Topic{Name: t.Name, ID: t.ID.String(), Partitions: n, Configs: t.Configs, Internal: t.Internal}, 0)
		if err != nil {
			return err
		}
		// Partition keys first (any left by an interrupted start replaced),
		// the topic key, which makes them visible, last.
		if _, err := c.store.Txn(ctx, []meta.Change{{Key: k.TopicPartitions(t.ID.String()), Delete: true, Prefix: true}}); err != nil {
			return fmt.Errorf("adopt topic %s: %w", t.Name, err)
		}
		if _, _, err := c.store.Batches(ctx, changes); err != nil {
			return fmt.Errorf("adopt topic %s: %w", t.Name, err)
		}
		if _, err := c.store.Txn(ctx, []meta.Change{tc}); err != nil {
			return fmt.Errorf("adopt topic %s: %w", t.Name, err)
		}
		adopted++
	}
	if _, err := c.store.AllocateProducerIDs(ctx, 0, s.broker.NextProducerID()); err != nil {
		return fmt.Errorf("adopt producer ids: %w", err)
	}
	if err := s.broker.MarkClusterManaged(); err != nil {
		return err
	}
	if adopted > 0 {
		s.logger.Info("adopted the topics of the log directories into the cluster metadata", "topics", adopted)
	}
	return nil
}

// register writes the broker's registration, retrying while another
// registration of the node id may still be inside its session (a crashed
// previous run on another directory, or a live duplicate), and refusing
// once the session timeout has passed.
func (s *Server) register(ctx context.Context, c *cluster, sess *meta.Session, host string, port int32) (int64, error) {
	machine, _ := os.Hostname()
	abs, _ := filepath.Abs(s.cfg.List("log.dirs")[0])
	b := meta.Broker{ID: int32(s.cfg.Int("node.id")), Incarnation: strconv.FormatInt(time.Now().UnixNano(), 36),
		DirectoryID: machine + ":" + abs, Rack: s.cfg.Get("broker.rack"), Controller: s.cfg.HasRole(config.RoleController),
		Listeners: s.endpoints(), UncleanShutdown: s.broker.UncleanShutdown()}
	deadline := time.Now().Add(sess.TTL() + time.Second)
	retryDeadline := time.Now().Add(startRetryFor)
	for {
		epoch, err := c.store.Register(ctx, b, sess.Lease())
		var dup *meta.DuplicateBrokerError
		var re *meta.RetriableError
		if errors.As(err, &re) && time.Now().Before(retryDeadline) {
			s.logger.Warn("metadata store not answering at start; retrying", "step", "register", "err", err)
		} else if !errors.As(err, &dup) || time.Now().After(deadline) {
			if dup != nil {
				return 0, fmt.Errorf("%w: %v", config.ErrInvalid, err)
			}
			return epoch, err
		}
		select {
		case <-ctx.Done():
			return 0, err
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// close stops the driver, revokes the session (the registration goes at
// once) and stops the member.
func (c *cluster) close(ctx context.Context, logger *slog.Logger) error {
	var errs []error
	if c.stop != nil {
		c.stop()
		<-c.done
	}
	if c.rstop != nil {
		c.rstop()
		<-c.rdone
	}
	if c.bgStop != nil {
		c.bgStop()
		c.bg.Wait()
	}
	if c.regStop != nil {
		c.regStop()
		<-c.regDone
	}
	if c.repl != nil {
		// Followers stop fetching and leaders stop answering acks=all
		// before the logs close.
		c.repl.Close()
		c.dialer.Close()
	}
	if r := c.reg.Load(); r != nil && !c.revoked {
		// Revoking the lease removes the registration at once; without a
		// quorum (the other controllers stopped first) it is left to
		// expire, which is no error of this node's shutdown.
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		if err := r.session.Close(rctx); err != nil && logger != nil {
			logger.Info("broker session not revoked; the registration expires after the session timeout", "err", err)
		}
		cancel()
	}
	if c.cache != nil {
		c.cache.Close()
	}
	if c.cli != nil {
		errs = append(errs, c.cli.Close())
	}
	if c.node != nil {
		errs = append(errs, c.node.Close())
	}
	return errors.Join(errs...)
}

// BrokerEpoch is the broker's registration epoch in the cluster metadata
// (0 when the node runs without KRaft settings).
func (s *Server) BrokerEpoch() int64 {
	if s.cluster == nil {
		return 0
	}
	return s.cluster.epoch()
}

// LiveBrokers is the number of registered brokers in this node's view of
// the cluster metadata (0 when the node runs without KRaft settings).
func (s *Server) LiveBrokers() int {
	if s.cluster == nil || s.cluster.cache == nil {
		return 0
	}
	v := s.cluster.cache.View()
	if v == nil {
		return 0
	}
	return len(v.Brokers)
}

// keepRegistered registers the broker again, with a new session and so a
// new broker epoch (KIP-903), whenever its session's lease is found
// expired: definitive evidence that the controller has taken its
// leaderships away (docs/cluster.md "Quorum loss"). Until the new
// registration, the view shows its partitions without this broker as
// leader, so it does not lead them. It stops when ctx ends.
func (s *Server) keepRegistered(ctx context.Context, c *cluster, host string, port int32) {
	defer close(c.regDone)
	for {
		old := c.reg.Load()
		select {
		case <-ctx.Done():
			return
		case <-old.session.Lost():
		}
		s.logger.Warn("broker session lease expired: registering again with a new broker epoch", "old_broker_epoch", old.epoch)
		for ctx.Err() == nil {
			epoch, sess, err := s.reregister(ctx, c, host, port)
			if err == nil {
				c.reg.Store(&registration{session: sess, epoch: epoch})
				s.logger.Info("registered again in the cluster metadata", "broker_epoch", epoch)
				break
			}
			s.logger.Warn("registering again failed; retrying", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
}

// reregister grants a new session and registers the broker with it.
func (s *Server) reregister(ctx context.Context, c *cluster, host string, port int32) (int64, *meta.Session, error) {
	ttl := time.Duration(s.cfg.Int64("broker.session.timeout.ms")) * time.Millisecond
	hb := time.Duration(s.cfg.Int64("broker.heartbeat.interval.ms")) * time.Millisecond
	rctx, cancel := context.WithTimeout(ctx, ttl+5*time.Second)
	defer cancel()
	sess, err := meta.NewSession(rctx, c.cli, ttl, hb, s.logger)
	if err != nil {
		return 0, nil, err
	}
	epoch, err := s.register(rctx, c, sess, host, port)
	if err != nil {
		cctx, ccancel := context.WithTimeout(context.Background(), 2*time.Second)
		sess.Close(cctx)
		ccancel()
		return 0, nil, err
	}
	return epoch, sess, nil
}

// startRetryFor bounds how long a starting node retries a metadata store
// that does not answer (no quorum yet while the controllers start too, or
// a loaded machine), as Kafka's broker waits up to
// initial.broker.registration.timeout.ms (60 s by default) for the
// controller quorum before it gives up.
const startRetryFor = 60 * time.Second

// retryStart runs a start step until it succeeds, fails for a reason other
// than an unavailable store, or the deadline passes.
func retryStart(ctx context.Context, deadline time.Time, logger *slog.Logger, step string, fn func() error) error {
	for {
		err := fn()
		var re *meta.RetriableError
		if err == nil || !errors.As(err, &re) || time.Now().After(deadline) {
			return err
		}
		logger.Warn("metadata store not answering at start; retrying", "step", step, "err", err)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// startPhases returns a function that logs, at debug level, the time each
// named phase of a start took since the previous one (and since the
// first), so an operator can see where a slow start goes.
func (s *Server) startPhases(what string) func(name string) {
	start := time.Now()
	last := start
	return func(name string) {
		now := time.Now()
		s.logger.Debug(what, "phase", name, "took", now.Sub(last), "since_start", now.Sub(start))
		last = now
	}
}
