package quota

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-io/strata/internal/clock"
)

// Kind is a quota manager's kind: which key it enforces.
type Kind int

// The four kinds of client quota.
const (
	Produce            Kind = iota // producer_byte_rate: bytes of produce requests
	Fetch                          // consumer_byte_rate: bytes of fetch responses
	Request                        // request_percentage: request handling time, % of one thread
	ControllerMutation             // controller_mutation_rate: partitions created or deleted per second
	numKinds
)

// Key is the quota key a kind enforces.
func (k Kind) Key() string {
	return [...]string{ProducerByteRate, ConsumerByteRate, RequestPercentage, ControllerMutationRate}[k]
}

// Config is the quota managers' sampling and clock.
type Config struct {
	// Window is quota.window.num x quota.window.size.seconds (produce,
	// fetch and request quotas).
	Window Window
	// ControllerWindow is controller.quota.window.num x
	// controller.quota.window.size.seconds (controller mutations).
	ControllerWindow Window
	Clock            clock.Clock
}

// sensorExpiry is how long an idle client's usage is kept (Kafka's
// ClientQuotaManager.InactiveSensorExpirationTimeSeconds).
const sensorExpiry = time.Hour

// Manager tracks every client's usage against the quotas and computes
// throttle times, as Kafka's client quota managers. It is safe for
// concurrent use.
type Manager struct {
	cfg   Config
	state atomic.Pointer[state]

	sensors   sync.Map // sensorKey -> *sensor
	sweepMu   sync.Mutex
	lastSweep int64
}

// state is an immutable snapshot of the quotas.
type state struct {
	all map[Entity]Values
	// per kind: the entities that set its key, and which entity shapes
	// (Kafka's QuotaTypes) occur among them.
	byKind [numKinds]kindQuotas
}

type kindQuotas struct {
	limits map[Entity]float64
	// Kafka's QuotaTypes flags: client-id only, user only, user and
	// client-id.
	client, user, both bool
}

func (k *kindQuotas) enabled() bool { return len(k.limits) > 0 }

// tags is who a sensor accounts for (Kafka's quota metric tags): clients
// sharing tags share one quota.
type tags struct{ user, client string }

type sensorKey struct {
	kind Kind
	tags tags
}

type sensor struct {
	mu     sync.Mutex
	r      rate
	b      bucket
	lastMs int64
}

// New returns a manager with no quotas.
func New(cfg Config) *Manager {
	if cfg.Window.Samples <= 0 {
		cfg.Window = DefaultWindow
	}
	if cfg.ControllerWindow.Samples <= 0 {
		cfg.ControllerWindow = DefaultWindow
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	m := &Manager{cfg: cfg}
	m.SetQuotas(nil)
	return m
}

// SetQuotas replaces every quota. q is not retained.
func (m *Manager) SetQuotas(q map[Entity]Values) {
	st := &state{all: map[Entity]Values{}}
	for k := range st.byKind {
		st.byKind[k].limits = map[Entity]float64{}
	}
	for e, vals := range q {
		if len(vals) == 0 {
			continue
		}
		cp := Values{}
		for key, v := range vals {
			cp[key] = v
		}
		st.all[e] = cp
		for k := Kind(0); k < numKinds; k++ {
			v, ok := vals[k.Key()]
			if !ok {
				continue
			}
			kq := &st.byKind[k]
			kq.limits[e] = v
			switch {
			case e.User.Present && e.ClientID.Present:
				kq.both = true
			case e.User.Present:
				kq.user = true
			default:
				kq.client = true
			}
		}
	}
	m.state.Store(st)
}

// Quotas returns the current quotas (shared: do not modify).
func (m *Manager) Quotas() map[Entity]Values { return m.state.Load().all }

// Enabled reports whether any entity sets kind's key (otherwise usage of
// that kind is not even recorded, as Kafka's quotasEnabled).
func (m *Manager) Enabled(k Kind) bool { return m.state.Load().byKind[k].enabled() }

// tagsFor is Kafka's DefaultQuotaCallback.quotaMetricTags: with one shape
// of entity in use the tags follow it; with several, the most specific
// entity that exists decides, in Kafka's precedence order
// (/config/users/<user>/clients/<client-id>, .../clients/<default>,
// /config/users/<user>, /config/users/<default>/clients/<client-id>,
// .../clients/<default>, /config/users/<default>,
// /config/clients/<client-id>, /config/clients/<default>).
func (kq *kindQuotas) tagsFor(user, client string) tags {
	switch {
	case !kq.user && !kq.both:
		return tags{client: client}
	case kq.user && !kq.client && !kq.both:
		return tags{user: user}
	case kq.both && !kq.user && !kq.client:
		return tags{user: user, client: client}
	}
	u, c := Named(user), Named(client)
	has := func(e Entity) bool { _, ok := kq.limits[e]; return ok }
	switch {
	case has(Entity{User: u, ClientID: c}), has(Entity{User: u, ClientID: DefaultComponent}):
		return tags{user: user, client: client}
	case has(Entity{User: u}):
		return tags{user: user}
	case has(Entity{User: DefaultComponent, ClientID: c}), has(Entity{User: DefaultComponent, ClientID: DefaultComponent}):
		return tags{user: user, client: client}
	case has(Entity{User: DefaultComponent}):
		return tags{user: user}
	}
	return tags{client: client}
}

// limit is Kafka's DefaultQuotaCallback.quotaLimit for a sensor's tags
// (+Inf: no quota applies).
func (kq *kindQuotas) limit(t tags) float64 {
	try := func(es ...Entity) float64 {
		for _, e := range es {
			if v, ok := kq.limits[e]; ok {
				return v
			}
		}
		return math.Inf(1)
	}
	u, c := Named(t.user), Named(t.client)
	switch {
	case t.user != "" && t.client != "":
		return try(Entity{User: u, ClientID: c}, Entity{User: u, ClientID: DefaultComponent},
			Entity{User: DefaultComponent, ClientID: c}, Entity{User: DefaultComponent, ClientID: DefaultComponent})
	case t.user != "":
		return try(Entity{User: u}, Entity{User: DefaultComponent})
	case t.client != "":
		return try(Entity{ClientID: c}, Entity{ClientID: DefaultComponent})
	}
	return math.Inf(1)
}

// Limit returns the quota that applies to user and client for kind (+Inf
// when none).
func (m *Manager) Limit(k Kind, user, client string) float64 {
	kq := &m.state.Load().byKind[k]
	return kq.limit(kq.tagsFor(user, client))
}

func (m *Manager) now() int64 { return m.cfg.Clock.Now().UnixMilli() }

func (m *Manager) window(k Kind) Window {
	if k == ControllerMutation {
		return m.cfg.ControllerWindow
	}
	return m.cfg.Window
}

func (m *Manager) sensor(k Kind, t tags, now int64) *sensor {
	key := sensorKey{k, t}
	if s, ok := m.sensors.Load(key); ok {
		return s.(*sensor)
	}
	m.sweep(now)
	s, _ := m.sensors.LoadOrStore(key, &sensor{lastMs: now})
	return s.(*sensor)
}

// sweep drops sensors idle for sensorExpiry, at most once a minute.
func (m *Manager) sweep(now int64) {
	m.sweepMu.Lock()
	defer m.sweepMu.Unlock()
	if now-m.lastSweep < time.Minute.Milliseconds() {
		return
	}
	m.lastSweep = now
	m.sensors.Range(func(k, v any) bool {
		s := v.(*sensor)
		s.mu.Lock()
		idle := now-s.lastMs >= sensorExpiry.Milliseconds()
		s.mu.Unlock()
		if idle {
			m.sensors.Delete(k)
		}
		return true
	})
}

// Record accounts value (bytes, or percent-seconds of request time) to the
// client and returns the throttle time in milliseconds (0 when within
// quota), as ClientQuotaManager.recordAndGetThrottleTimeMs: the rate is
// measured after recording and a rate O over the bound T gives
// (O-T)/T * window. The request quota's throttle is capped at one sample
// window (ClientRequestQuotaManager: quota.window.size.seconds).
func (m *Manager) Record(k Kind, user, client string, value float64) int64 {
	kq := &m.state.Load().byKind[k]
	if !kq.enabled() || k == ControllerMutation {
		return 0
	}
	t := kq.tagsFor(user, client)
	bound := kq.limit(t)
	now := m.now()
	w := m.window(k)
	s := m.sensor(k, t, now)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastMs = now
	s.r.record(w, value, now)
	observed := s.r.measure(w, now)
	if !(observed > bound) {
		return 0
	}
	ms := throttleMs(observed, bound, s.r.windowMs(w, now))
	if k == Request {
		ms = min(ms, w.SizeMs)
	}
	return max(ms, 0)
}

// Unrecord takes back a recorded value (a throttled fetch is answered
// empty, so its bytes are not counted: ClientQuotaManager.unrecordQuotaSensor).
func (m *Manager) Unrecord(k Kind, user, client string, value float64) {
	kq := &m.state.Load().byKind[k]
	if !kq.enabled() {
		return
	}
	now := m.now()
	s := m.sensor(k, kq.tagsFor(user, client), now)
	s.mu.Lock()
	s.r.record(m.window(k), -value, now)
	s.mu.Unlock()
}

// MaxValueInWindow is the most a client may take in one go without being
// throttled for sure: quota x (samples-1) x window size
// (ClientQuotaManager.getMaxValueInQuotaWindow; Kafka caps a fetch's
// max bytes with it). +Inf without a quota.
func (m *Manager) MaxValueInWindow(k Kind, user, client string) float64 {
	kq := &m.state.Load().byKind[k]
	if !kq.enabled() {
		return math.Inf(1)
	}
	w := m.window(k)
	return kq.limit(kq.tagsFor(user, client)) * float64(w.Samples-1) * float64(w.SizeMs) / 1000
}

// RequestTime converts request handling time into the request quota's
// unit: percent of one thread for one second (Kafka's
// ClientRequestQuotaManager.nanosToPercentage).
func RequestTime(d time.Duration) float64 { return float64(d.Nanoseconds()) * 100 / 1e9 }

// Mutation is one request's controller mutation quota (Kafka's
// StrictControllerMutationQuota and PermissiveControllerMutationQuota).
// The zero value and nil are unbounded.
type Mutation struct {
	m      *Manager
	s      *sensor
	bound  float64
	strict bool

	lastThrottle int64
	lastMs       int64
}

// Mutation returns the controller mutation quota of one request. strict
// requests (CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+)
// are refused once the quota is exhausted; older versions are accepted and
// throttled (KIP-599).
func (m *Manager) Mutation(user, client string, strict bool) *Mutation {
	kq := &m.state.Load().byKind[ControllerMutation]
	if !kq.enabled() {
		return nil
	}
	t := kq.tagsFor(user, client)
	bound := kq.limit(t)
	if math.IsInf(bound, 1) {
		return nil
	}
	return &Mutation{m: m, s: m.sensor(ControllerMutation, t, m.now()), bound: bound, strict: strict}
}

// Record takes permits (partitions) from the client's token bucket. A
// strict quota whose bucket is already negative refuses: Record returns
// false and nothing is taken; the refusal's throttle time is ThrottleMs.
// A permissive quota always takes them and throttles once negative.
func (q *Mutation) Record(permits float64) bool {
	if q == nil {
		return true
	}
	now := q.m.now()
	w := q.m.cfg.ControllerWindow
	q.s.mu.Lock()
	defer q.s.mu.Unlock()
	q.s.lastMs = now
	if q.strict {
		if tokens := q.s.b.measure(w, q.bound, now); tokens < 0 {
			q.setThrottle(tokens, now)
			return false
		}
		q.s.b.record(w, q.bound, permits, now)
		return true
	}
	q.s.b.record(w, q.bound, permits, now)
	if tokens := q.s.b.measure(w, q.bound, now); tokens < 0 {
		q.setThrottle(tokens, now)
	}
	return true
}

// setThrottle is ControllerMutationQuotaManager.throttleTimeMs: the time
// to refill a negative bucket, -tokens/quota seconds.
func (q *Mutation) setThrottle(tokens float64, now int64) {
	q.lastThrottle = int64(math.Round(-tokens / q.bound * 1000))
	q.lastMs = now
}

// ThrottleMs is the throttle time of the last refusal or overdraft,
// less the time since (AbstractControllerMutationQuota.throttleTime).
func (q *Mutation) ThrottleMs() int64 {
	if q == nil {
		return 0
	}
	return max(0, q.lastThrottle-(q.m.now()-q.lastMs))
}

// Refund gives back permits taken by Record for a mutation that then
// failed (a topic that already existed, an invalid config): Kafka takes
// permits only once a topic passed validation.
func (q *Mutation) Refund(permits float64) {
	if q == nil || permits <= 0 {
		return
	}
	now := q.m.now()
	q.s.mu.Lock()
	q.s.b.record(q.m.cfg.ControllerWindow, q.bound, -permits, now)
	q.s.mu.Unlock()
}
