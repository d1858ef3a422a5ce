package server

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/strata-io/strata/internal/config"
	"github.com/strata-io/strata/internal/controller"
	"github.com/strata-io/strata/internal/etcdnode"
	"github.com/strata-io/strata/internal/meta"
	"github.com/strata-io/strata/internal/metrics"
)

// A controller-only node (process.roles=controller, Kafka's KRaft
// controller; docs/cluster.md "Controller-only nodes") runs a member of the
// metadata store on its controller listener and campaigns for the active
// controller role. It serves no Kafka client listener, hosts no partitions
// and does not register as a broker: clients never see it in Metadata, as
// Kafka's brokers never list controllers. Its HTTP listener serves
// /metrics (the store's health, the controller metrics), /healthz and
// /readyz.

// controllerOnly reports whether cfg describes a controller-only node.
func controllerOnly(cfg *config.Broker) bool {
	return clusterConfigured(cfg) && cfg.HasRole(config.RoleController) && !cfg.HasRole(config.RoleBroker)
}

// newControllerOnly binds a controller-only node's listeners (the
// controller listener and the HTTP listener); Start starts its member.
func newControllerOnly(cfg *config.Broker, logger *slog.Logger, opts Options) (*Server, error) {
	s := &Server{cfg: cfg, logger: logger, reg: metrics.NewRegistry(), opts: opts, ctlOnly: true}
	cl, ok := cfg.ControllerListener()
	if !ok {
		return nil, fmt.Errorf("%w: process.roles=controller needs a controller listener in listeners (controller.listener.names=%s)", config.ErrInvalid, cfg.Get("controller.listener.names"))
	}
	ln, err := net.Listen("tcp", cl.Addr())
	if err != nil {
		return nil, listenError("controller listener", cl.Addr(), "listeners", err)
	}
	s.ctlLn = ln
	if maddr := strings.TrimSpace(cfg.Get("strata.metrics.listener")); maddr != "" {
		m := metrics.NewServer(maddr, s.reg, s.Ready)
		if err := m.Listen(); err != nil {
			s.closeListeners()
			return nil, listenError("HTTP listener (metrics and admin API)", maddr, "strata.metrics.listener", err)
		}
		s.metrics = m
		m.SetNotReadyDetail(func() string {
			if s.ready.Load() || s.stopping.Load() {
				return ""
			}
			return "starting the metadata store member"
		})
		if err := m.Serve(); err != nil {
			s.closeListeners()
			return nil, err
		}
	}
	return s, nil
}

// startControllerOnly starts the metadata store member, the cache and the
// controller driver.
func (s *Server) startControllerOnly() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	me := int32(s.cfg.Int("node.id"))
	var voters []etcdnode.Voter
	for _, v := range s.cfg.Voters() {
		voters = append(voters, etcdnode.Voter{ID: v.ID, Host: v.Host, Port: v.Port})
	}
	dir := s.cfg.Get("metadata.log.dir")
	if dir == "" {
		dir = s.cfg.List("log.dirs")[0]
	}
	c := &cluster{done: make(chan struct{})}
	fail := func(err error) error {
		c.close(context.Background(), s.logger)
		return fmt.Errorf("cluster metadata: %w", err)
	}
	ln := s.ctlLn
	s.ctlLn = nil // the member owns it now
	var err error
	c.node, err = s.startMember(ctx, me, dir, ln, voters)
	if err != nil {
		return fmt.Errorf("cluster metadata: %w", err)
	}
	if c.cli, err = clientv3.New(etcdnode.ClientConfig(nil, c.node.ClientEndpoint())); err != nil {
		return fail(fmt.Errorf("metadata store client: %w", err))
	}
	c.store = meta.NewStore(c.cli, meta.DefaultKeys, etcdnode.DefaultMaxTxnOps)
	// The first node to reach the quorum names the cluster (create-only);
	// the member's data is bound to its etcd cluster by etcd's own id.
	id, err := c.store.EnsureClusterID(ctx, newKafkaClusterID())
	if err != nil {
		return fail(err)
	}
	if c.cache, err = meta.StartCache(ctx, c.store, s.logger); err != nil {
		return fail(err)
	}
	s.metaCache.Store(c.cache)
	session := time.Duration(s.cfg.Int64("broker.session.timeout.ms")) * time.Millisecond
	dctx, dcancel := context.WithCancel(context.Background())
	c.stop = dcancel
	d := &controller.Driver{NodeID: me, Store: c.store, Cache: c.cache, SessionTTL: session, Logger: s.logger,
		Policy: s.policy, OnActive: func(on bool) { c.active.Store(on) }}
	go func() { defer close(c.done); d.Run(dctx) }()
	if err := s.reg.Register(etcdnode.NewCollector(c.node)); err != nil {
		return fail(fmt.Errorf("register metadata store metrics: %w", err))
	}
	if err := s.reg.Register(controller.NewCollector(c.cache, c.active.Load)); err != nil {
		return fail(fmt.Errorf("register controller metrics: %w", err))
	}
	s.cluster = c
	s.ready.Store(true)
	s.logger.Info("controller-only node: metadata store member started", "node", me, "controller", s.ControllerAddr(), "cluster_id", id)
	return nil
}

// shutdownControllerOnly stops the driver, the cache and the member.
func (s *Server) shutdownControllerOnly(ctx context.Context) error {
	var errs []error
	if s.metrics != nil {
		errs = append(errs, s.metrics.Close())
	}
	if s.ctlLn != nil {
		s.ctlLn.Close() // never handed to a member
	}
	if s.cluster != nil {
		errs = append(errs, s.cluster.close(ctx, s.logger))
	}
	return errors.Join(errs...)
}

// ControllerAddr is the controller listener's address (nil on a
// broker-only node).
func (s *Server) ControllerAddr() net.Addr {
	if s.ctlLn != nil {
		return s.ctlLn.Addr()
	}
	if s.cluster != nil && s.cluster.node != nil {
		if cl, ok := s.cfg.ControllerListener(); ok {
			if a, err := net.ResolveTCPAddr("tcp", cl.Addr()); err == nil {
				return a
			}
		}
	}
	return nil
}

// newKafkaClusterID returns a new cluster id as Kafka formats one (a
// random UUID in URL-safe base64 without padding).
func newKafkaClusterID() string {
	var u [16]byte
	rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return base64.RawURLEncoding.EncodeToString(u[:])
}

// startMember starts this controller's metadata store member: a new
// cluster from controller.quorum.voters, a restart on its own data, or —
// after `strata controller add` (docs/cluster.md "Adding and removing
// controllers") — joining the running cluster as a learner, which is then
// promoted to a voter once it has caught up (etcd's learners; KIP-853's
// add-controller).
func (s *Server) startMember(ctx context.Context, me int32, dir string, ln net.Listener, voters []etcdnode.Voter) (*etcdnode.Node, error) {
	join, err := etcdnode.ReadJoin(dir)
	if err != nil {
		ln.Close()
		return nil, err
	}
	n, err := etcdnode.Start(ctx, etcdnode.Config{
		NodeID: me, Dir: etcdnode.MemberDir(dir), Listener: ln, Join: join,
		Voters: voters, ClusterToken: clusterToken(s.cfg.Voters()), Timing: s.storeTiming(), Logger: s.logger,
	})
	if err != nil {
		return nil, err
	}
	if join == "" {
		return n, nil
	}
	var others []string
	for _, v := range voters {
		if v.ID != me {
			others = append(others, v.URL())
		}
	}
	s.logger.Info("joined the metadata store as a learner; promoting to a voter once caught up", "node", me)
	if err := n.PromoteSelf(ctx, me, others); err != nil {
		n.Close()
		return nil, err
	}
	if err := os.Remove(etcdnode.JoinFile(dir)); err != nil {
		s.logger.Warn("remove the join file", "err", err)
	}
	s.logger.Info("controller is a voter of the metadata store", "node", me)
	return n, nil
}

// storeTiming is the metadata store member's Raft timing: Options'
// (tests) when set, else derived from broker.session.timeout.ms. At the
// default session (9 s) it is etcd's default, 100 ms heartbeats and a 1 s
// election timeout (also Kafka's controller.quorum.election.timeout.ms
// default). A node configured with a shorter session keeps that
// proportion, election timeout = session / 9 (at least 100 ms, heartbeat a
// tenth of it), because the loss of the store's leader adds about two and
// a half election timeouts to the failover of a broker that died with it:
// the followers wait one to two election timeouts before electing, and
// the new leader extends every lease by one more plus a full TTL (etcd's
// lessor.Promote; Kafka's new active controller likewise restarts every
// broker's session, BrokerHeartbeatManager). etcd 3.7's embedded server
// offers no lease checkpoint interval below its 5 minute default, so
// checkpointing cannot shorten the TTL part (docs/cluster.md, Failover).
func (s *Server) storeTiming() etcdnode.Timing {
	if s.opts.StoreTiming != (etcdnode.Timing{}) {
		return s.opts.StoreTiming
	}
	if s.zeroConfig {
		return etcdnode.Timing{TickMs: zeroConfigTickMs, ElectionMs: zeroConfigElectionMs}
	}
	return storeTimingFor(s.cfg.Int64("broker.session.timeout.ms"))
}

// zeroConfigTickMs and zeroConfigElectionMs are the Raft timing of zero configuration's
// single-member store: 10 ms ticks, a 100 ms election timeout. The member
// has no peer to lose or to disagree with, so the timeout guards nothing
// but it is what a restart waits: the member campaigns one tick after it
// starts, but Raft refuses to campaign while a configuration change of
// its log is not applied yet (the member's own bootstrap, or the
// controller listener's new port recorded at the previous start,
// moveSelf), and the next attempt comes one to two election timeouts
// later: 1-2 s at the default timing, on every start that loses this race
// (issue 18). Tests run every store at this timing.
const (
	zeroConfigTickMs     = 10
	zeroConfigElectionMs = 100
)

// storeTimingFor derives the Raft timing from a session timeout (ms).
func storeTimingFor(sessionMs int64) etcdnode.Timing {
	election := min(max(sessionMs/9, 100), int64(etcdnode.DefaultTiming.ElectionMs))
	tick := election / 10
	return etcdnode.Timing{TickMs: uint(tick), ElectionMs: uint(tick * 10)}
}
