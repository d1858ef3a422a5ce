// Package server wires one Strata broker together: log directories and
// partitions (broker), the Kafka listener (protocol), the cleaner, the group
// coordinator and the metrics endpoint, and owns their lifecycles.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/strata-io/strata/internal/broker"
	"github.com/strata-io/strata/internal/cleaner"
	"github.com/strata-io/strata/internal/config"
	"github.com/strata-io/strata/internal/console"
	"github.com/strata-io/strata/internal/etcdnode"
	"github.com/strata-io/strata/internal/group"
	"github.com/strata-io/strata/internal/meta"
	"github.com/strata-io/strata/internal/metrics"
	"github.com/strata-io/strata/internal/protocol"
	"github.com/strata-io/strata/internal/txn"
)

// Server is one running broker.
type Server struct {
	cfg     *config.Broker
	logger  *slog.Logger
	reg     *prometheus.Registry
	broker  *broker.Broker
	cleaner *cleaner.Cleaner
	group   *group.Coordinator
	txn     *txn.Coordinator

	// parts holds the per-partition series (broker.Collector, the replica
	// manager's collector), apart from reg: /metrics serves both; the
	// console's sampler gathers reg only (every 10 s) and reads the
	// partitions through partStats.
	parts     *prometheus.Registry
	partStats *broker.Collector
	// groupPartitions and txnPartitions are the coordinators' partition
	// counts (offsets.topic.num.partitions and
	// transaction.state.log.num.partitions, or the topics' own).
	groupPartitions, txnPartitions int32
	// coord is the coordinators' cluster side (coordinators.go; nil on a
	// node without KRaft settings).
	coord *coordinatorRun
	proto *protocol.Server
	// protoLive is proto once built, for the dynamic-config path that
	// runs on the metadata watcher (connection limits).
	protoLive atomic.Pointer[protocol.Server]
	metrics   *metrics.Server
	console   *console.Console
	// lns are the client listeners (the first is the default one: Addr,
	// in-process connections).
	lns []*clientListener
	// ctlLn is the controller listener, bound by New and handed to the
	// metadata store member, which New starts while the logs load
	// (member_start.go; nil on broker-only nodes).
	ctlLn net.Listener
	// member is the metadata store member starting while the logs load
	// (member_start.go), until startCluster takes it.
	member *earlyMember
	// zeroConfig: a one-node cluster of zero configuration, whose store
	// has this member alone for good (storeTiming).
	zeroConfig bool
	opts       Options
	// cluster is the node's cluster membership (nil without KRaft
	// settings; see cluster.go).
	cluster *cluster
	// sec is the authorizer and the client quotas (security.go).
	sec *security
	// metaCache is the cluster metadata cache once it runs (nil before,
	// and without KRaft settings); dyn memoizes the configuration under
	// its dynamic broker configs (cluster_configs.go).
	metaCache atomic.Pointer[meta.Cache]
	dyn       atomic.Pointer[dynamicConfig]

	// ctlOnly: a controller-only node (controller_only.go): the metadata
	// store member and the controller driver, no broker.
	ctlOnly bool
	// ib is how this broker connects to other brokers (the inter-broker
	// listener's TLS and SASL client settings; interbroker.go).
	ib config.InterBrokerClient

	ready atomic.Bool
	// leadersSeen: the node's partitions had their leaders once after
	// the start (cluster_ready.go); readiness no longer looks.
	leadersSeen atomic.Bool
	// startFreed: the start's transient memory was returned to the
	// operating system (freeStartMemory).
	startFreed atomic.Bool
	// memStop and memDone stop and await the idle-heap releaser
	// (memory.go), which Start runs.
	memStop, memDone chan struct{}
	stopping         atomic.Bool
	stopOnce         sync.Once
	stopErr          error
}

// Options are what a server takes beyond its configuration (tests).
type Options struct {
	// StoreTiming is the metadata store member's Raft timing (zero:
	// derived from broker.session.timeout.ms, storeTiming); tests use
	// etcdnode.Timing{TickMs: 10, ElectionMs: 100}.
	StoreTiming etcdnode.Timing
	// OneNodeCluster runs a node given no KRaft setting as a one-node
	// cluster (zero configuration, `strata serve`): a single-member
	// metadata store on a loopback controller listener bound at start, the
	// same code path as every cluster node. Without it such a node runs
	// without a metadata store (the single-node mode).
	OneNodeCluster bool
}

// New binds the listeners, then opens the log directories (running crash
// recovery when the previous shutdown was not clean), loads topic metadata
// and group state, and builds every component. The HTTP listener
// (strata.metrics.listener) serves from the start, so /healthz answers and
// /readyz reports the progress of the log recovery (503, "not ready:
// recovering logs: N of M partitions loaded") while it runs; the Kafka
// listener serves from Start. On a controller node the metadata store
// member starts while the logs load (member_start.go).
func New(cfg *config.Broker, logger *slog.Logger) (*Server, error) {
	return NewWithOptions(cfg, logger, Options{})
}

// NewWithOptions is New with Options.
func NewWithOptions(cfg *config.Broker, logger *slog.Logger, opts Options) (*Server, error) {
	if logger == nil {
		logger = slog.Default()
	}
	if controllerOnly(cfg) {
		return newControllerOnly(cfg, logger, opts)
	}
	var ctlLn net.Listener
	if opts.OneNodeCluster && !cfg.KRaftConfigured() {
		// Zero configuration: a one-node cluster whose controller listener
		// is a loopback port chosen now (docs/cluster.md).
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, listenError("controller listener (zero configuration)", "127.0.0.1:0", "listeners", err)
		}
		if cfg, err = cfg.WithOneNodeCluster(ln.Addr().String()); err != nil {
			ln.Close()
			return nil, err
		}
		ctlLn = ln
	}
	s := &Server{cfg: cfg, logger: logger, reg: metrics.NewRegistry(), parts: prometheus.NewRegistry(), opts: opts, ctlLn: ctlLn, zeroConfig: ctlLn != nil}
	early := func(err error) (*Server, error) {
		if s.ctlLn != nil {
			s.ctlLn.Close()
		}
		return nil, err
	}
	sec, err := newSecurity(cfg)
	if err != nil {
		return early(err)
	}
	s.sec = sec
	if s.lns, err = newClientListeners(cfg); err != nil {
		return early(err)
	}
	if clusterConfigured(cfg) {
		if s.ib, err = cfg.InterBrokerClient(); err != nil {
			return early(fmt.Errorf("inter-broker listener: %w", err))
		}
	}
	if err := s.bind(); err != nil {
		return nil, err
	}
	progress := &broker.LoadProgress{}
	if s.metrics != nil {
		s.metrics.SetNotReadyDetail(func() string {
			if s.stopping.Load() {
				return ""
			}
			if s.ready.Load() {
				return s.leadersDetail()
			}
			if _, total := progress.Counts(); total == 0 {
				return "starting"
			}
			return progress.String()
		})
		if err := s.metrics.Serve(); err != nil {
			s.closeListeners()
			return nil, err
		}
	}
	if s.ctlLn != nil && clusterConfigured(cfg) {
		// The metadata store member starts while the logs load.
		s.startMemberEarly(progress)
	}
	if err := s.open(progress); err != nil {
		s.stopMember()
		s.closeListeners()
		return nil, err
	}
	return s, nil
}

// open opens the log directories (reporting its progress) and builds the
// components that use them.
func (s *Server) open(progress *broker.LoadProgress) error {
	b, err := broker.OpenWithProgress(s.cfg, s.logger, nil, progress)
	if err != nil {
		return err
	}
	s.broker = b
	s.partStats = broker.NewCollector(b, s.cfg.Bool("strata.metrics.internal.partitions"))
	if err := s.parts.Register(s.partStats); err != nil {
		b.Close()
		return fmt.Errorf("register partition metrics: %w", err)
	}
	if err := s.buildCleaner(); err != nil {
		b.Close()
		return err
	}
	if s.metrics != nil {
		h := s.cleaner.HTTPHandler()
		s.metrics.Handle("/v1/compaction", h)
		s.metrics.Handle("/v1/compaction/", h)
	}
	if clusterConfigured(s.cfg) {
		// The internal topics are created in the cluster metadata at the
		// first FindCoordinator (or adopted from the log directories).
		return nil
	}
	if err := s.ensureOffsetsTopic(); err != nil {
		s.closeAll(context.Background())
		return err
	}
	if err := s.ensureTransactionTopic(); err != nil {
		s.closeAll(context.Background())
		return err
	}
	return nil
}

// buildCleaner creates the one cleaner that serves every log dir: each
// partition names its log dir, whose cleaner-offset-checkpoint keeps its
// progress, so the dedupe buffer and the metrics are shared as in Kafka.
func (s *Server) buildCleaner() error {
	ccfg := cleaner.Config{
		Enable:              s.cfg.Bool("log.cleaner.enable"),
		Threads:             s.cfg.Int("log.cleaner.threads"),
		DedupeBufferSize:    s.cfg.Int64("log.cleaner.dedupe.buffer.size"),
		IOMaxBytesPerSecond: s.cfg.Float("log.cleaner.io.max.bytes.per.second"),
		Backoff:             time.Duration(s.cfg.Int64("log.cleaner.backoff.ms")) * time.Millisecond,
		FS:                  s.broker.FS(),
		// Internal topics' per-partition gauges only when asked for.
		InternalPartitionMetrics: s.cfg.Bool("strata.metrics.internal.partitions"),
	}
	src := func(yield func(cleaner.Partition) bool) {
		for _, t := range s.broker.Topics() {
			for _, p := range t.Partitions {
				if p.Log != nil && !yield(cleaner.Partition{Topic: t.Name, Partition: p.Index, Log: p.Log, LogDir: p.BaseDir(), Internal: t.Internal}) {
					return
				}
			}
		}
	}
	// The cleaner adds component=cleaner to its log lines itself.
	c, err := cleaner.New(ccfg, s.broker.LogDirs()[0], src, s.logger, s.reg)
	if err != nil {
		return fmt.Errorf("cleaner: %w", err)
	}
	s.cleaner = c
	s.broker.OnDelete(c.Forget)
	return nil
}

// Start serves the Kafka listener and the metrics/admin HTTP listener that
// New bound, until Shutdown.
func (s *Server) Start() (err error) {
	if s.ctlOnly {
		return s.startControllerOnly()
	}
	closeAll := func() {
		for _, l := range s.lns {
			l.ln.Close()
		}
	}
	for _, l := range s.lns {
		l.host, l.port = s.advertised(l)
	}
	host, port := s.lns[0].host, s.lns[0].port
	if clusterConfigured(s.cfg) {
		// Registered before serving: /readyz stays false until the broker
		// is registered with its metadata.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		err := s.startCluster(ctx, host, port)
		cancel()
		if err != nil {
			closeAll()
			if derr := s.broker.DiscardFreshClusterID(); derr != nil {
				s.logger.Warn("a failed first start keeps its log directories' new cluster id", "err", derr)
			}
			return fmt.Errorf("cluster metadata: %w", err)
		}
		defer func() {
			if err != nil {
				s.sec.close()
				s.cluster.close(context.Background(), s.logger)
				s.cluster = nil
			}
		}()
		s.sec.attach(s.cluster.store, s.cluster.cache)
	}
	phase := s.startPhases("start")
	s.newCoordinatorDialer()
	if err := s.startGroup(host, port); err != nil {
		closeAll()
		return err
	}
	if err := s.startTxn(); err != nil {
		closeAll()
		return err
	}
	phase("group and transaction coordinators built")
	limits, err := connectionLimits(s.currentConfig())
	if err != nil {
		closeAll()
		return err
	}
	s.startCoordinators()
	defer func() {
		if err != nil {
			s.stopCoordinators()
		}
	}()
	proto, err := protocol.New(protocol.Config{
		LimitConnections:             true,
		MaxConnections:               limits.Max,
		MaxConnectionsPerIP:          limits.PerIP,
		MaxConnectionsPerIPOverrides: limits.PerIPOverrides,
		MaxConnectionsPerListener:    limits.PerListener,
		ProtectedListener:            limits.Protected,
		IdleTimeout:                  idleTimeout(s.cfg.Int64("connections.max.idle.ms")),
		QueuedMaxRequestBytes:        s.cfg.Int64("queued.max.request.bytes"),
		Broker:                       s.broker,
		MaxRequestBytes:              int32(s.cfg.Int64("socket.request.max.bytes")),
		AdvertisedHost:               host,
		AdvertisedPort:               port,
		AutoCreateTopics:             s.cfg.Bool("auto.create.topics.enable"),
		Group:                        s.groupHandler(),
		Txn:                          s.txnHandler(),
		Logger:                       s.logger,
		Registerer:                   s.reg,
		Authorizer:                   s.sec.authorizer,
		Quotas:                       s.sec.quotas,
		Security:                     s.sec.protocolStore(),
		Cluster:                      s.clusterAPI(),
		ListenerName:                 s.lns[0].cfg.Name,
		Listeners:                    s.protocolListeners(),
		TxnMarkers:                   s.txnMarkers(),
		RackAwareReplicaSelector:     s.cfg.Get("replica.selector.class") == config.RackAwareReplicaSelector,
	})
	if err != nil {
		closeAll()
		return err
	}
	s.proto = proto
	s.protoLive.Store(proto)
	// Dynamic configs applied between reading the limits and now.
	if lim, err := connectionLimits(s.currentConfig()); err == nil {
		proto.SetConnectionLimits(lim)
	}
	if s.metrics != nil {
		// Already serving (since New): the console joins the routes.
		if err := s.mountConsole(host, port); err != nil {
			closeAll()
			return err
		}
	}
	s.cleaner.Start()
	s.broker.StartLoops()
	s.startHeapReleaser()
	for _, l := range s.lns {
		proto.ServeListener(l.ln, l.protocolListener())
	}
	phase("serving")
	s.ready.Store(true)
	return nil
}

// clusterAPI is the protocol's view of the cluster (nil on a node without
// KRaft settings).
func (s *Server) clusterAPI() protocol.Cluster {
	if s.cluster == nil {
		return nil
	}
	return clusterAPI{s: s, c: s.cluster}
}

// groupHandler returns the coordinator as a protocol handler (nil if none).
func (s *Server) groupHandler() protocol.GroupHandler {
	if s.group == nil {
		return nil
	}
	return s.group
}

// protocolListeners are the client listeners as the protocol serves them.
func (s *Server) protocolListeners() []protocol.Listener {
	out := make([]protocol.Listener, len(s.lns))
	for i, l := range s.lns {
		out[i] = l.protocolListener()
	}
	return out
}

// advertised resolves the address given to clients on listener l: its
// entry in advertised.listeners, else its bound address (Kafka's
// advertised.listeners default per listener).
func (s *Server) advertised(l *clientListener) (string, int32) {
	host, portStr, _ := net.SplitHostPort(l.ln.Addr().String())
	port, _ := strconv.Atoi(portStr)
	for _, a := range s.cfg.AdvertisedListeners() {
		if a.Name != l.cfg.Name || a.Addr() == l.cfg.Addr() {
			continue // not advertised separately
		}
		host = a.Host
		if a.Port != 0 {
			port = a.Port
		}
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		// Kafka refuses to advertise the meta-address ("advertised.listeners
		// cannot use the nonroutable meta-address 0.0.0.0", KafkaConfig);
		// Strata keeps a one-machine setup working and says what a remote
		// client would meet.
		host = "127.0.0.1"
		s.logger.Warn("listener binds every interface but is advertised as 127.0.0.1: clients on other machines are sent to 127.0.0.1 and cannot connect; set advertised.listeners to an address they reach",
			"listener", l.cfg.Name, "addr", l.ln.Addr().String())
	}
	return host, int32(port)
}

// Addr is the bound address of the first client listener.
func (s *Server) Addr() net.Addr {
	if len(s.lns) == 0 || s.lns[0].ln == nil {
		return nil
	}
	return s.lns[0].ln.Addr()
}

// ListenerAddr is the bound address of the client listener of that name
// (nil if there is none).
func (s *Server) ListenerAddr(name string) net.Addr {
	l := s.listenerNamed(strings.ToUpper(name))
	if l == nil || l.ln == nil {
		return nil
	}
	return l.ln.Addr()
}

// MetricsAddr is the bound metrics/admin HTTP address (nil if disabled).
func (s *Server) MetricsAddr() net.Addr {
	if s.metrics == nil {
		return nil
	}
	return s.metrics.Addr()
}

// Ready reports whether logs are recovered, the listener is serving and,
// on a cluster node, the partitions it holds have their leaders
// (cluster_ready.go).
func (s *Server) Ready() bool {
	if !s.ready.Load() || s.stopping.Load() {
		return false
	}
	if !s.ctlOnly && !s.leadersReady() {
		return false
	}
	s.freeStartMemory()
	return true
}

// Broker exposes the broker (tests and admin tools).
func (s *Server) Broker() *broker.Broker { return s.broker }

// Protocol exposes the protocol server (nil before Start).
func (s *Server) Protocol() *protocol.Server { return s.proto }

// Shutdown stops accepting, finishes in-flight requests (until ctx ends),
// flushes every log, writes checkpoints and the clean-shutdown marker.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stopOnce.Do(func() {
		s.stopping.Store(true)
		s.ready.Store(false)
		if s.ctlOnly {
			s.stopErr = s.shutdownControllerOnly(ctx)
			return
		}
		var errs []error
		s.handOffLeadership(ctx)
		if s.proto != nil {
			errs = append(errs, s.proto.Shutdown(ctx))
		} else {
			for _, l := range s.lns {
				if l.ln != nil {
					l.ln.Close()
				}
			}
		}
		if s.metrics != nil {
			errs = append(errs, s.metrics.Close())
		}
		if s.ctlLn != nil {
			s.ctlLn.Close() // never handed to a member
		}
		errs = append(errs, s.stopMember()) // started, never taken by Start
		s.closeConsole()
		s.stopHeapReleaser()
		s.sec.close()
		s.stopCoordinators()
		if s.cluster != nil {
			errs = append(errs, s.cluster.close(ctx, s.logger))
		}
		errs = append(errs, s.closeAll(ctx))
		s.closeCoordinatorDialer()
		s.stopErr = errors.Join(errs...)
	})
	return s.stopErr
}

// closeAll stops the cleaner and the coordinator and closes the broker
// (without the clean-shutdown marker once ctx has ended).
func (s *Server) closeAll(ctx context.Context) error {
	var errs []error
	if s.cleaner != nil {
		errs = append(errs, s.cleaner.Close())
	}
	if s.txn != nil {
		errs = append(errs, s.txn.Close())
	}
	if s.group != nil {
		errs = append(errs, s.group.Close())
	}
	errs = append(errs, s.broker.Shutdown(ctx))
	return errors.Join(errs...)
}

// connectionLimits are the connection quotas of cfg (Kafka's
// ConnectionQuotas): max.connections, max.connections.per.ip and its
// overrides, each client listener's listener.name.<l>.max.connections
// (else max.connections), and the protected inter-broker listener when the
// node has several client listeners.
func connectionLimits(cfg *config.Broker) (protocol.ConnectionLimits, error) {
	overrides, err := connectionOverrides(cfg.Get("max.connections.per.ip.overrides"))
	if err != nil {
		return protocol.ConnectionLimits{}, err
	}
	lim := protocol.ConnectionLimits{Max: cfg.Int("max.connections"), PerIP: cfg.Int("max.connections.per.ip"),
		PerIPOverrides: overrides, PerListener: map[string]int{}}
	lns := cfg.ClientListeners()
	for _, l := range lns {
		lim.PerListener[l.Name] = cfg.ListenerMaxConnections(l.Name)
	}
	if ib, ok := cfg.InterBrokerListener(); ok && len(lns) > 1 {
		lim.Protected = ib.Name
	}
	return lim, nil
}

// connectionOverrides resolves max.connections.per.ip.overrides to IP
// addresses: host names are looked up once at startup, as Kafka does
// (InetAddress.getByName); every address of a name gets its count.
func connectionOverrides(v string) (map[string]int, error) {
	byHost, err := config.ConnectionOverrides(v)
	if err != nil || len(byHost) == 0 {
		return nil, err
	}
	out := make(map[string]int, len(byHost))
	for host, n := range byHost {
		if ip := net.ParseIP(host); ip != nil {
			out[normalIP(ip)] = n
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		addrs, err := net.DefaultResolver.LookupIPAddr(ctx, host)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("max.connections.per.ip.overrides: resolve %s: %w", host, err)
		}
		for _, a := range addrs {
			out[normalIP(a.IP)] = n
		}
	}
	return out, nil
}

// normalIP spells an address as the connection quotas key it.
func normalIP(ip net.IP) string {
	if v4 := ip.To4(); v4 != nil {
		return v4.String()
	}
	return ip.String()
}

// idleTimeout maps connections.max.idle.ms to the protocol's IdleTimeout:
// negative disables it (Kafka's Selector has no idle expiry then); 0
// closes a connection as soon as it is idle.
func idleTimeout(ms int64) time.Duration {
	switch {
	case ms < 0:
		return 0
	case ms == 0:
		return time.Nanosecond
	}
	return time.Duration(ms) * time.Millisecond
}
