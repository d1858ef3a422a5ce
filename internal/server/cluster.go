package server

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/strata-io/strata/internal/config"
	"github.com/strata-io/strata/internal/controller"
	"github.com/strata-io/strata/internal/etcdnode"
	"github.com/strata-io/strata/internal/meta"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// cluster is a node's membership of the cluster metadata (docs/cluster.md):
// the embedded etcd member on the controller listener, the broker's
// registration and session, the watch-fed cache and the controller
// driver.
//
// This release runs it for a combined node whose controller.quorum.voters
// names only itself (Apache Kafka's own single-node config/kraft example):
// the controller listener serves the metadata store, the broker registers
// with its epoch, and the node is the active controller. Topics are still
// kept by the broker's local metadata; several nodes, and topics in the
// metadata store, are the rest of issue 11 (refused below until then).
type cluster struct {
	node    *etcdnode.Node
	cli     *clientv3.Client
	store   *meta.Store
	cache   *meta.Cache
	session *meta.Session
	epoch   int64
	active  atomic.Bool
	stop    context.CancelFunc
	done    chan struct{}
}

// clusterConfigured reports whether the KRaft settings were given (a node
// with none of them runs as before: zero configuration).
func clusterConfigured(cfg *config.Broker) bool {
	return cfg.IsSet("process.roles") || cfg.IsSet("controller.quorum.voters") || cfg.IsSet("controller.listener.names")
}

// checkClusterSupported refuses the KRaft settings this release cannot
// honour yet, with a message saying what it does serve.
func checkClusterSupported(cfg *config.Broker) error {
	if !clusterConfigured(cfg) {
		return nil
	}
	if !cfg.HasRole(config.RoleBroker) || !cfg.HasRole(config.RoleController) {
		return fmt.Errorf("%w: process.roles=%s: this release runs combined nodes only (process.roles=broker,controller); broker-only and controller-only nodes come with multi-node clusters (docs/cluster.md)",
			config.ErrInvalid, cfg.Get("process.roles"))
	}
	if vs := cfg.Voters(); len(vs) != 1 {
		return fmt.Errorf("%w: controller.quorum.voters lists %d controllers: this release does not join several nodes into one cluster yet (the metadata store, controller and placement are built, the broker side is in progress: docs/cluster.md); run one node with controller.quorum.voters=%d@host:port",
			config.ErrInvalid, len(vs), cfg.Int("node.id"))
	}
	return nil
}

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
	cl, ok := s.cfg.ControllerListener()
	if !ok {
		return errors.New("no controller listener")
	}
	ln, err := net.Listen("tcp", cl.Addr())
	if err != nil {
		return fmt.Errorf("controller listener %s: %w", cl.Addr(), err)
	}
	var voters []etcdnode.Voter
	for _, v := range s.cfg.Voters() {
		voters = append(voters, etcdnode.Voter{ID: v.ID, Host: v.Host, Port: v.Port})
	}
	dir := s.cfg.Get("metadata.log.dir")
	if dir == "" {
		dir = s.cfg.List("log.dirs")[0]
	}
	c := &cluster{done: make(chan struct{})}
	c.node, err = etcdnode.Start(ctx, etcdnode.Config{
		NodeID: int32(s.cfg.Int("node.id")), Dir: filepath.Join(dir, "__strata_metadata", "etcd"), Listener: ln,
		Voters: voters, ClusterToken: clusterToken(s.cfg.Voters()), Logger: s.logger,
	})
	if err != nil {
		return err
	}
	fail := func(err error) error {
		c.close(context.Background())
		return err
	}
	c.cli, err = clientv3.New(clientv3.Config{Endpoints: []string{c.node.ClientEndpoint()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return fail(fmt.Errorf("metadata store client: %w", err))
	}
	c.store = meta.NewStore(c.cli, meta.DefaultKeys, etcdnode.DefaultMaxTxnOps)
	id, err := c.store.EnsureClusterID(ctx, s.broker.ClusterID())
	if err != nil {
		return fail(err)
	}
	if id != s.broker.ClusterID() {
		return fail(fmt.Errorf("%w: the log directories belong to cluster %s but the metadata store serves cluster %s: a node joins only the cluster its data was written by",
			config.ErrInvalid, s.broker.ClusterID(), id))
	}
	if c.cache, err = meta.StartCache(ctx, c.store, s.logger); err != nil {
		return fail(err)
	}
	session := time.Duration(s.cfg.Int64("broker.session.timeout.ms")) * time.Millisecond
	hb := time.Duration(s.cfg.Int64("broker.heartbeat.interval.ms")) * time.Millisecond
	if c.session, err = meta.NewSession(ctx, c.cli, session, hb, s.logger); err != nil {
		return fail(err)
	}
	if c.epoch, err = s.register(ctx, c, session, host, port); err != nil {
		return fail(err)
	}
	dctx, cancel := context.WithCancel(context.Background())
	c.stop = cancel
	d := &controller.Driver{NodeID: int32(s.cfg.Int("node.id")), Store: c.store, Cache: c.cache, SessionTTL: session, Logger: s.logger,
		Policy:   func(*meta.Topic) controller.Policy { return controller.Policy{MinISR: 1} },
		OnActive: func(on bool) { c.active.Store(on) }}
	go func() { defer close(c.done); d.Run(dctx) }()
	// Kafka's controller metrics (controller.NewCollector) are registered
	// once topics live in the metadata store; until then its topic and
	// partition counts would read 0 beside the broker's local topics.
	if err := s.reg.Register(etcdnode.NewCollector(c.node)); err != nil {
		return fail(fmt.Errorf("register metadata store metrics: %w", err))
	}
	s.cluster = c
	s.logger.Info("registered in the cluster metadata", "node", s.cfg.Int("node.id"), "broker_epoch", c.epoch,
		"controller_listener", cl.Addr(), "cluster_id", id)
	return nil
}

// register writes the broker's registration, retrying while another
// registration of the node id may still be inside its session (a crashed
// previous run on another directory, or a live duplicate), and refusing
// once the session timeout has passed.
func (s *Server) register(ctx context.Context, c *cluster, session time.Duration, host string, port int32) (int64, error) {
	machine, _ := os.Hostname()
	abs, _ := filepath.Abs(s.cfg.List("log.dirs")[0])
	b := meta.Broker{ID: int32(s.cfg.Int("node.id")), Incarnation: strconv.FormatInt(time.Now().UnixNano(), 36),
		DirectoryID: machine + ":" + abs, Rack: s.cfg.Get("broker.rack"), Controller: true,
		Listeners: []meta.Endpoint{{Name: s.listener.Name, Host: host, Port: port, Protocol: s.listener.Protocol}}}
	deadline := time.Now().Add(session + time.Second)
	for {
		epoch, err := c.store.Register(ctx, b, c.session.Lease())
		var dup *meta.DuplicateBrokerError
		if !errors.As(err, &dup) || time.Now().After(deadline) {
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
func (c *cluster) close(ctx context.Context) error {
	var errs []error
	if c.stop != nil {
		c.stop()
		<-c.done
	}
	if c.session != nil {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		errs = append(errs, c.session.Close(rctx))
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
	return s.cluster.epoch
}
