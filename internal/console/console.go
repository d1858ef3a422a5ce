package console

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/strata-io/strata/internal/cleaner"
	"github.com/strata-io/strata/internal/sasl"
)

// Credentials looks up the stored SCRAM credentials logins are checked
// against (broker.Broker).
type Credentials interface {
	ScramCredential(mechanism, user string) (sasl.ScramCredential, bool)
}

// Compaction is the cleaner's admin surface (cleaner.Cleaner): the same
// calls the /v1/compaction API makes.
type Compaction interface {
	Status(topic string) []cleaner.PartitionStatus
	CleanNow(ctx context.Context, topic string, partition int32) error
}

// Partitions reads the partitions this broker exports per-partition
// series of (broker.Collector).
type Partitions interface {
	// EachPartition calls fn with each partition's size on disk and log
	// end offset.
	EachPartition(fn func(topic string, partition int32, size, logEnd int64))
}

// Actor is who a console connection acts as: a user's principal
// (User:<User>), or the broker itself (Broker: the history sampler).
type Actor struct {
	User   string
	Broker bool
}

func (a Actor) String() string {
	if a.Broker {
		return "the broker itself"
	}
	return "User:" + a.User
}

// Config is what a Console is built from.
type Config struct {
	// Dial opens a connection to this broker's Kafka protocol server, in
	// process (over a net.Pipe): protocol.Server.ServeInProcess, whose
	// requests the broker authorizes as User:<user>, or, for the broker
	// itself, protocol.Server.ServeInProcessAsBroker (never authorized).
	Dial func(ctx context.Context, as Actor) (net.Conn, error)
	// Self is this broker's address as its Metadata answers advertise it
	// (host:port): the console's clients reach it in process.
	Self string
	// DialPeer connects to another broker at addr (host:port, as Metadata
	// advertises it): a page's Fetch goes to the partition's leader, a
	// group's requests to its coordinator, wherever they are. Nil, or an
	// error, leaves that broker out of reach: the page says so.
	DialPeer func(ctx context.Context, addr string, as Actor) (net.Conn, error)
	// Credentials are the broker's SCRAM users (logins).
	Credentials Credentials
	// Compaction is the cleaner (nil: the compaction page says so).
	Compaction Compaction
	// Metrics is the broker's own registry, the source of the byte and
	// request rates. It should not hold the per-partition series: the
	// sampler gathers it every SampleInterval.
	Metrics prometheus.Gatherer
	// Partitions reads this broker's partitions (log end offsets for the
	// message rates, sizes of compacted partitions) at each sample without
	// building their metrics (nil: no message rates or size plots).
	Partitions Partitions
	// Cluster tells broker epochs and states and the controller quorum
	// (nil: LocalCluster of NodeID).
	Cluster ClusterSource
	// NodeID is this broker's node.id.
	NodeID int32
	// ListenAddr is the HTTP listener's configured address: a loopback
	// host serves without login, any other address requires one.
	ListenAddr string
	// Authorizer says the broker authorizes requests (authorizer.class.name):
	// then every page requires a login, on loopback too, so that each
	// action is authorized as the SCRAM user who takes it.
	Authorizer bool
	// SampleInterval is the history sampling period (0: 10 s).
	SampleInterval time.Duration
	Logger         *slog.Logger
}

// Console serves the web console. Build it with New, mount Handler at /,
// stop it with Close.
type Console struct {
	cfg          Config
	logger       *slog.Logger
	clients      *clients
	sampler      *kafka // the history sampler's client (the broker itself)
	none         *kafka // a client whose every request fails (no principal)
	cluster      ClusterSource
	pages        *pages
	auth         *auth
	hist         *history
	requireLogin bool
	mux          *http.ServeMux
	// slots bounds the console requests served at once (each may issue
	// several Kafka requests); the rest wait for a slot.
	slots chan struct{}

	stop context.CancelFunc
	wg   sync.WaitGroup
	once sync.Once
}

// maxPostBytes bounds a form's body (a produced record of up to
// maxProduceBytes, hex-encoded, and its headers).
const maxPostBytes = 3*maxProduceBytes + 64<<10

// maxConcurrentRequests bounds the console requests served at once.
const maxConcurrentRequests = 8

// New builds the console and starts its history sampler.
func New(cfg Config) (*Console, error) {
	if cfg.Dial == nil {
		return nil, errors.New("console: no Kafka dialer")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.SampleInterval <= 0 {
		cfg.SampleInterval = 10 * time.Second
	}
	if cfg.Cluster == nil {
		cfg.Cluster = LocalCluster{NodeID: cfg.NodeID}
	}
	logger := cfg.Logger.With("component", "console")
	route := func(as Actor) func(ctx context.Context, addr string) (net.Conn, error) {
		return func(ctx context.Context, addr string) (net.Conn, error) {
			if addr == seedAddr || (cfg.Self != "" && addr == cfg.Self) {
				return cfg.Dial(ctx, as)
			}
			if cfg.DialPeer == nil {
				return nil, fmt.Errorf("console: the broker at %s is another broker, out of this console's reach", addr)
			}
			return cfg.DialPeer(ctx, addr, as)
		}
	}
	pool := newClients(func(user string) func(ctx context.Context, addr string) (net.Conn, error) {
		return route(Actor{User: user})
	})
	k, err := newKafka(route(Actor{Broker: true}))
	if err != nil {
		return nil, err
	}
	none, err := newKafka(func(context.Context, string) (net.Conn, error) {
		return nil, errors.New("console: no Kafka client for this request")
	})
	if err != nil {
		k.close()
		return nil, err
	}
	pg, err := loadPages()
	if err != nil {
		k.close()
		none.close()
		return nil, err
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		k.close()
		none.close()
		return nil, fmt.Errorf("console: session key: %w", err)
	}
	c := &Console{
		cfg: cfg, logger: logger, clients: pool, sampler: k, none: none, cluster: cfg.Cluster, pages: pg,
		auth:         newAuth(key, cfg.Credentials),
		hist:         newHistory(),
		requireLogin: cfg.Authorizer || !IsLoopback(cfg.ListenAddr),
		slots:        make(chan struct{}, maxConcurrentRequests),
	}
	c.routes()
	ctx, cancel := context.WithCancel(context.Background())
	c.stop = cancel
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.sampleLoop(ctx)
	}()
	return c, nil
}

// RequiresLogin reports whether pages need a login (a non-loopback
// listener, or a broker with an authorizer).
func (c *Console) RequiresLogin() bool { return c.requireLogin }

// Close stops the sampler and closes the Kafka client.
func (c *Console) Close() {
	c.once.Do(func() {
		c.stop()
		c.wg.Wait()
		c.clients.close()
		c.sampler.close()
		c.none.close()
	})
}

// Handler serves the console; mount it at "/".
func (c *Console) Handler() http.Handler { return c }

// ServeHTTP applies the security headers, the host check (no login),
// the session and CSRF checks and the concurrency bound, then routes.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin") // not no-referrer: it makes form POSTs say "Origin: null"
	if strings.HasPrefix(r.URL.Path, "/static/") {
		c.mux.ServeHTTP(w, r)
		return
	}
	h.Set("Cache-Control", "no-store")
	if !c.requireLogin && !loopbackHost(r.Host) {
		// A page without login answers only to loopback names: another
		// name resolving to 127.0.0.1 (DNS rebinding) must not read it.
		http.Error(w, "the console without login answers only to localhost, 127.0.0.1 or [::1]", http.StatusMisdirectedRequest)
		return
	}
	sess, ok := c.auth.session(w, r, c.requireLogin)
	if !ok && r.URL.Path != "/login" {
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			http.Redirect(w, r, "/login?next="+urlQueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		http.Error(w, "login required", http.StatusUnauthorized)
		return
	}
	if r.Method == http.MethodPost {
		r.Body = http.MaxBytesReader(w, r.Body, maxPostBytes)
		if err := c.auth.checkPost(r, sess); err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
	}
	select {
	case c.slots <- struct{}{}:
		defer func() { <-c.slots }()
	case <-r.Context().Done():
		return
	}
	ctx := withSession(r.Context(), sess)
	if ok {
		// The Kafka client of the principal this request acts as.
		k, err := c.clients.get(userOf(ctx))
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		ctx = context.WithValue(ctx, kafkaKey{}, k)
	}
	c.mux.ServeHTTP(w, r.WithContext(ctx))
}

func (c *Console) routes() {
	m := http.NewServeMux()
	m.Handle("GET /static/", staticHandler())
	m.HandleFunc("GET /{$}", c.overview)
	m.HandleFunc("GET /login", c.loginPage)
	m.HandleFunc("POST /login", c.login)
	m.HandleFunc("POST /logout", c.logout)
	m.HandleFunc("GET /topics", c.topics)
	m.HandleFunc("GET /topics/{topic}", c.topic)
	m.HandleFunc("POST /topics/{topic}/configs", c.alterConfig)
	m.HandleFunc("GET /topics/{topic}/messages", c.messages)
	m.HandleFunc("GET /topics/{topic}/tail", c.tail)
	m.HandleFunc("POST /topics/{topic}/produce", c.produce)
	m.HandleFunc("GET /groups", c.groups)
	m.HandleFunc("GET /groups/{group}", c.group)
	m.HandleFunc("GET /groups/{group}/reset", c.resetPreview)
	m.HandleFunc("POST /groups/{group}/reset", c.resetExecute)
	m.HandleFunc("POST /groups/{group}/delete", c.deleteGroup)
	m.HandleFunc("GET /compaction", c.compaction)
	m.HandleFunc("POST /compaction/clean", c.cleanNow)
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		c.fail(w, r, http.StatusNotFound, fmt.Errorf("no page at %s", r.URL.Path))
	})
	c.mux = m
}

type kafkaKey struct{}

// kafkaFor returns the Kafka client of the principal a request acts as
// (its logged-in user, or User:ANONYMOUS without login). Only the login
// page and log out run without one, and they send no Kafka request; the
// fallback is the least trusted principal.
func (c *Console) kafkaFor(ctx context.Context) *kafka {
	if k, _ := ctx.Value(kafkaKey{}).(*kafka); k != nil {
		return k
	}
	if k, err := c.clients.get(anonymousUser); err == nil {
		return k
	}
	return c.none
}

// requestTimeout bounds the Kafka requests of one page.
const requestTimeout = 15 * time.Second

// ctx is a request's context bounded by requestTimeout.
func reqCtx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), requestTimeout)
}

// IsLoopback reports whether a listener address ("host:port") binds only
// loopback: localhost, 127.0.0.0/8 or ::1. An empty or unspecified host
// (all interfaces) is not loopback.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// loopbackHost reports whether a request's Host names a loopback address.
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	return IsLoopback(host)
}
