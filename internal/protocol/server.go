// Package protocol serves the Kafka wire protocol: the TCP listener,
// request framing, the per-connection pipeline (requests read ahead,
// handled one at a time and answered in order), dispatch to one handler
// per API key, and zero-copy Fetch responses written with sendfile.
package protocol

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/strata-io/strata/internal/authz"
	"github.com/strata-io/strata/internal/broker"
	"github.com/strata-io/strata/internal/quota"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// GroupHandler serves the group-coordinator API keys (internal/group).
type GroupHandler interface {
	// Handle answers one request of a key listed by APIVersions.
	Handle(ctx context.Context, req kmsg.Request) (kmsg.Response, error)
	// APIVersions lists the served keys with their [min, max] versions.
	APIVersions() map[int16][2]int16
}

// TxnMarkerWriter writes transaction markers sent by other brokers'
// transaction coordinators (server implements it in a cluster).
type TxnMarkerWriter interface {
	// WriteTxnMarkers writes every marker to the partitions this broker
	// leads and answers each partition's error code.
	WriteTxnMarkers(ctx context.Context, req *kmsg.WriteTxnMarkersRequest) *kmsg.WriteTxnMarkersResponse
}

// TxnHandler serves the transaction-coordinator API keys (internal/txn)
// and checks transactional produce requests.
type TxnHandler interface {
	// Handle answers one request of a key listed by APIVersions, and
	// InitProducerId requests that carry a transactional id.
	Handle(ctx context.Context, req kmsg.Request) (kmsg.Response, error)
	// APIVersions lists the served keys with their [min, max] versions.
	APIVersions() map[int16][2]int16
	// VerifyProduce checks that each of parts belongs to the ongoing
	// transaction of transactionalID at producer id pid and epoch, in one
	// request to the transaction's coordinator: one error per partition,
	// nil when it does, otherwise wrapping the Kafka code
	// (INVALID_TXN_STATE, INVALID_PRODUCER_EPOCH, PRODUCER_FENCED, ...).
	VerifyProduce(transactionalID string, pid int64, epoch int16, parts []TxnPartition) []error
}

// TxnPartition is a partition a transactional produce writes to.
type TxnPartition struct {
	Topic     string
	Partition int32
}

// Config configures a Server.
type Config struct {
	Broker *broker.Broker
	// MaxRequestBytes is socket.request.max.bytes.
	MaxRequestBytes int32
	// AdvertisedHost/Port are given to clients in Metadata (the server
	// resolves them from advertised.listeners); when unset the bound
	// listener address is given.
	AdvertisedHost string
	AdvertisedPort int32
	// AutoCreateTopics is auto.create.topics.enable.
	AutoCreateTopics bool
	// Group serves the group API keys; nil leaves them unadvertised.
	Group GroupHandler
	// Txn serves the transaction API keys; nil refuses transactional ids
	// and leaves the keys unadvertised.
	Txn TxnHandler
	// TxnMarkers writes the transaction markers other brokers' transaction
	// coordinators send (WriteTxnMarkers, key 27); nil leaves the key
	// unserved (a single node writes its own markers).
	TxnMarkers TxnMarkerWriter
	Logger     *slog.Logger
	// Registerer receives the protocol metrics (nil = none).
	Registerer prometheus.Registerer
	// RackAwareReplicaSelector is replica.selector.class set to Kafka's
	// RackAwareReplicaSelector (KIP-392): a leader answers a consumer
	// fetch naming its rack with the in-sync replica of that rack to read
	// from (Fetch v11+ preferred_read_replica).
	RackAwareReplicaSelector bool
	// DisableSendfile forces the copy-through-user-space fetch path
	// (benchmarks compare both).
	DisableSendfile bool
	// SASLMechanisms are the mechanisms of a SASL listener (nil: not a
	// SASL listener; SaslHandshake and SaslAuthenticate are not served).
	SASLMechanisms []string
	// PlainUsers are the PLAIN users (name -> password).
	PlainUsers map[string]string
	// Authorizer decides every request with Kafka's ACL rules (nil:
	// authorization off, and ACL requests answer SECURITY_DISABLED).
	Authorizer *authz.Authorizer
	// Quotas throttles clients by Kafka's client quotas (nil: none).
	Quotas *quota.Manager
	// Security stores ACL and client quota changes (nil: CreateAcls and
	// DeleteAcls are refused, and DescribeClientQuotas/AlterClientQuotas
	// are not served).
	Security SecurityStore
	// PrincipalMapper maps TLS client certificates to principals
	// (ssl.principal.mapping.rules; nil: DEFAULT).
	PrincipalMapper *authz.Mapper
	// Cluster is the node's part in a cluster: Metadata, DescribeCluster,
	// FindCoordinator and leadership come from its view, topic
	// administration goes through it. nil: a single node.
	Cluster Cluster
	// ListenerName is the name of the listener Serve serves (the brokers'
	// endpoints of that name are the addresses clients are given).
	// SASLMechanisms, PlainUsers, PrincipalMapper and Advertised* above
	// describe the same listener.
	ListenerName string
	// Listeners lists every listener ServeListener will serve (only
	// their SASL mechanisms matter at New: the SASL keys are served when
	// one listener is SASL).
	Listeners []Listener
	// Connection limits, Kafka's SocketServer settings. MaxConnections is
	// max.connections and MaxConnectionsPerIP max.connections.per.ip (0
	// in both means the Kafka default, no limit, unless LimitConnections
	// is set); MaxConnectionsPerIPOverrides maps IP addresses to their own
	// limit; IdleTimeout is connections.max.idle.ms (0: never);
	// QueuedMaxRequestBytes is queued.max.request.bytes (<= 0: no limit).
	LimitConnections             bool
	MaxConnections               int
	MaxConnectionsPerIP          int
	MaxConnectionsPerIPOverrides map[string]int
	// MaxConnectionsPerListener is listener.name.<l>.max.connections by
	// listener name, and ProtectedListener the inter-broker listener when
	// there are several (ConnectionLimits).
	MaxConnectionsPerListener map[string]int
	ProtectedListener         string
	IdleTimeout               time.Duration
	QueuedMaxRequestBytes     int64
}

// Listener is one named listener a Server serves (Kafka's listeners: each
// has its own security settings, and clients connected to it are given the
// brokers' addresses on it).
type Listener struct {
	// Name is the listener name (PLAINTEXT, INTERNAL, ...).
	Name string
	// SASLMechanisms are the mechanisms of a SASL listener (nil: not a
	// SASL listener; SaslHandshake and SaslAuthenticate are not served
	// on it).
	SASLMechanisms []string
	// PlainUsers are the PLAIN users (name -> password).
	PlainUsers map[string]string
	// PrincipalMapper maps TLS client certificates to principals
	// (ssl.principal.mapping.rules of the listener; nil: DEFAULT).
	PrincipalMapper *authz.Mapper
	// AdvertisedHost/Port are this broker's address on the listener
	// (unset: the bound address).
	AdvertisedHost string
	AdvertisedPort int32
}

// served is a listener being served: its settings and its advertised
// address.
type served struct {
	Listener
	ln   net.Listener
	host string
	port int32
}

// Server is the Kafka protocol listener of one broker.
type Server struct {
	cfg      Config
	b        *broker.Broker
	logger   *slog.Logger
	handlers map[int16]handler
	metrics  *metrics
	sessions *fetchSessions

	// lns are the listeners served (the first is the default: Addr,
	// in-process connections).
	lns      []*served
	ctx      context.Context // canceled when draining starts: long polls return
	cancel   context.CancelFunc
	hard     context.Context // canceled when Shutdown gives up: durability waits end
	hardStop context.CancelFunc
	mu       sync.Mutex
	conns    map[*conn]struct{}
	wg       sync.WaitGroup
	closing  atomic.Bool
	sendfile sendfileStats
	frames   framePool // recyclable frame buffers of this server's connections
	quotas   *connQuotas
	pool     *requestPool
	// storageErrLogged is when a KAFKA_STORAGE_ERROR answer to a produce
	// was last logged (unix nanoseconds; logStorageError).
	storageErrLogged atomic.Int64
	// fetchWaits, when set, is called by a fetch (consumer or follower) each time it is
	// about to block in its long poll (tests and benchmarks make data
	// arrive then, without timing).
	fetchWaits func()
}

// New builds a server; Serve starts it on a listener the caller bound.
func New(cfg Config) (*Server, error) {
	if cfg.Broker == nil {
		return nil, errors.New("protocol: nil broker")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = 100 << 20
	}
	ctx, cancel := context.WithCancel(context.Background())
	hard, hardStop := context.WithCancel(context.Background())
	s := &Server{
		cfg: cfg, b: cfg.Broker, logger: cfg.Logger, conns: map[*conn]struct{}{},
		ctx: ctx, cancel: cancel, hard: hard, hardStop: hardStop, sessions: newFetchSessions(),
	}
	s.handlers = s.buildHandlers()
	lim := ConnectionLimits{Max: cfg.MaxConnections, PerIP: cfg.MaxConnectionsPerIP, PerIPOverrides: cfg.MaxConnectionsPerIPOverrides,
		PerListener: cfg.MaxConnectionsPerListener, Protected: cfg.ProtectedListener}
	if !cfg.LimitConnections {
		lim = ConnectionLimits{Max: math.MaxInt, PerIP: math.MaxInt}
	}
	s.quotas = newConnQuotas(lim)
	s.pool = newRequestPool(cfg.QueuedMaxRequestBytes)
	m, err := newMetrics(cfg.Registerer, s)
	if err != nil {
		cancel()
		hardStop()
		return nil, err
	}
	s.metrics = m
	return s, nil
}

// Serve starts accepting connections on ln (bound by the caller, so the
// bound port is known before the server is built) as the listener the
// Config's single-listener fields describe. It returns at once.
func (s *Server) Serve(ln net.Listener) {
	s.ServeListener(ln, Listener{
		Name: s.cfg.ListenerName, SASLMechanisms: s.cfg.SASLMechanisms, PlainUsers: s.cfg.PlainUsers,
		PrincipalMapper: s.cfg.PrincipalMapper, AdvertisedHost: s.cfg.AdvertisedHost, AdvertisedPort: s.cfg.AdvertisedPort,
	})
}

// ServeListener starts accepting connections on ln as listener l (Kafka's
// SocketServer runs one acceptor per listener). Call it once per listener
// before Shutdown; it returns at once.
func (s *Server) ServeListener(ln net.Listener, l Listener) {
	sv := &served{Listener: l, ln: ln, host: l.AdvertisedHost, port: l.AdvertisedPort}
	if sv.host == "" || sv.port == 0 {
		host, portStr, _ := net.SplitHostPort(ln.Addr().String())
		port, _ := strconv.Atoi(portStr)
		sv.host, sv.port = host, int32(port)
	}
	s.mu.Lock()
	s.lns = append(s.lns, sv)
	first := len(s.lns) == 1
	s.mu.Unlock()
	s.wg.Add(1)
	go s.accept(sv)
	if first && s.cfg.IdleTimeout > 0 {
		s.wg.Add(1)
		go s.reapIdle(s.cfg.IdleTimeout)
	}
	s.logger.Info("kafka listener started", "listener", l.Name, "addr", ln.Addr().String(), "advertised", net.JoinHostPort(sv.host, strconv.Itoa(int(sv.port))))
}

// Addr is the bound address of the first listener (nil before Serve).
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.lns) == 0 {
		return nil
	}
	return s.lns[0].ln.Addr()
}

// defaultListener is the first listener served (in-process connections
// are on it).
func (s *Server) defaultListener() *served {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.lns) == 0 {
		return &served{Listener: Listener{Name: s.cfg.ListenerName, SASLMechanisms: s.cfg.SASLMechanisms,
			PlainUsers: s.cfg.PlainUsers, PrincipalMapper: s.cfg.PrincipalMapper}, host: s.cfg.AdvertisedHost, port: s.cfg.AdvertisedPort}
	}
	return s.lns[0]
}

// QueuedRequestBytes is how many bytes of requests read and not yet
// handled hold queued.max.request.bytes now (0 without that limit).
func (s *Server) QueuedRequestBytes() int64 {
	if s.pool.size <= 0 {
		return 0
	}
	return s.pool.queued()
}

// OpenConnections is how many client connections are open.
func (s *Server) OpenConnections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// SendfileCalls reports how many sendfile(2) calls and bytes the fetch
// path has made (tests prove zero-copy with it).
func (s *Server) SendfileCalls() (calls, bytes int64) {
	return s.sendfile.calls.Load(), s.sendfile.bytes.Load()
}

func (s *Server) accept(sv *served) {
	defer s.wg.Done()
	var backoff time.Duration
	for {
		// max.connections: stop accepting until a connection closes.
		if !s.quotas.waitSlot(sv.Name) {
			return
		}
		nc, err := sv.ln.Accept()
		if err != nil {
			if s.closing.Load() {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			if backoff == 0 {
				backoff = 5 * time.Millisecond
			} else if backoff < time.Second {
				backoff *= 2
			}
			s.logger.Warn("accept failed", "err", err, "retry_in", backoff)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		ip := remoteIP(nc.RemoteAddr())
		if ok, max := s.quotas.inc(ip, sv.Name); !ok {
			// Kafka's acceptor on TooManyConnectionsException.
			s.logger.Info(fmt.Sprintf("Rejected connection from %s, address already has the configured maximum of %d connections.", ip, max))
			nc.Close()
			s.quotas.dec(ip, sv.Name)
			continue
		}
		c := newConn(s, nc, sv)
		s.mu.Lock()
		if s.closing.Load() {
			s.mu.Unlock()
			nc.Close()
			s.quotas.dec(ip, sv.Name)
			continue
		}
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		if sv.Name == s.quotas.protected() {
			s.closeExcessConnections()
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			c.serve()
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
			s.quotas.dec(ip, sv.Name)
		}()
	}
}

// Shutdown stops accepting, lets each connection finish the requests it
// has read (long polls return early), and closes everything when done or
// when ctx ends.
func (s *Server) Shutdown(ctx context.Context) error {
	if !s.closing.CompareAndSwap(false, true) {
		return nil
	}
	s.mu.Lock()
	for _, sv := range s.lns {
		sv.ln.Close()
	}
	s.mu.Unlock()
	s.quotas.close()
	s.pool.wake() // readers waiting for queued.max.request.bytes see closing
	s.cancel()
	s.mu.Lock()
	for c := range s.conns {
		c.stopReading()
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		s.hardStop()
		s.mu.Lock()
		for c := range s.conns {
			c.nc.Close()
		}
		s.mu.Unlock()
		<-done
	}
	s.hardStop()
	s.metrics.unregister()
	return nil
}

// handler is one API key's version range and function.
type handler struct {
	min, max int16
	fn       func(ctx context.Context, c *conn, req kmsg.Request) (reply, error)
}

// reply is a handler's answer: a kmsg response, a zero-copy fetch
// response, or nothing (acks=0 produce).
type reply struct {
	msg   kmsg.Response
	fetch *fetchReply
	none  bool
	// wait, when set, runs in the connection's writer before the answer is
	// encoded (acks=all produce waits for fsync there).
	wait func()
	// closeAfter closes the connection once the answer is sent (a failed
	// SASL authentication).
	closeAfter bool
	// token is the answer to an unframed SASL token (sent size-prefixed,
	// without a response header).
	token []byte
	// throttleMs is a throttle the handler decided (a controller mutation
	// quota); the connection's quotas may raise it (security.go).
	throttleMs int64
}

// supported reports the served version range of key.
func (s *Server) supported(key int16) (int16, int16, bool) {
	h, ok := s.handlers[key]
	return h.min, h.max, ok
}

// supported reports the version range of key served on the connection's
// listener: SaslHandshake and SaslAuthenticate on SASL listeners only.
func (c *conn) supported(key int16) (int16, int16, bool) {
	if (key == 17 || key == 36) && len(c.l.SASLMechanisms) == 0 {
		return 0, 0, false
	}
	return c.s.supported(key)
}

// apiKeys returns the served keys sorted, for ApiVersions.
func (s *Server) apiKeys() []int16 {
	keys := make([]int16, 0, len(s.handlers))
	for k := range s.handlers {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	return keys
}
