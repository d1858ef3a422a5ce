package quota

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/clock"
)

func newManager() (*Manager, *clock.Manual) {
	clk := clock.NewManual(time.UnixMilli(1_700_000_000_000))
	return New(Config{Window: DefaultWindow, ControllerWindow: DefaultWindow, Clock: clk}), clk
}

// quotas builds a quota map for one kind from (entity, value) pairs.
type setq struct {
	e Entity
	v float64
}

func set(m *Manager, k Kind, qs ...setq) {
	all := map[Entity]Values{}
	for _, q := range qs {
		all[q.e] = Values{k.Key(): q.v}
	}
	m.SetQuotas(all)
}

var (
	du = DefaultComponent
	dc = DefaultComponent
)

func u(n string) Component { return Named(n) }

// Kafka's ClientQuotaManagerTest.testQuotaViolation, number for number:
// 11 one-second samples, a default client-id quota of 500 B/s, ten
// seconds at 400 B/s, then 2300 bytes half a second later: 6300 bytes over
// 10.5 s = 600 B/s, throttled (600-500)/500*10.5 s = 2100 ms.
func TestRateThrottleKafkaVector(t *testing.T) {
	m, clk := newManager()
	set(m, Produce, setq{Entity{ClientID: dc}, 500})
	for i := 0; i < 10; i++ {
		if got := m.Record(Produce, "ANONYMOUS", "unknown", 400); got != 0 {
			t.Fatalf("second %d: throttled %d ms under the quota", i, got)
		}
		clk.Advance(time.Second)
	}
	clk.Advance(500 * time.Millisecond)
	if got := m.Record(Produce, "ANONYMOUS", "unknown", 2300); got != 2100 {
		t.Fatalf("spike throttle = %d ms, want 2100", got)
	}
	clk.Advance(2100 * time.Millisecond)
	for i := 0; i < 10; i++ {
		m.Record(Produce, "ANONYMOUS", "unknown", 400)
		clk.Advance(time.Second)
	}
	if got := m.Record(Produce, "ANONYMOUS", "unknown", 0); got != 0 {
		t.Fatalf("still throttled %d ms after the burst rolled over", got)
	}
}

// Kafka's ClientQuotaManagerTest.testQuotaConfigPrecedence: the same
// quotas, clients, values and expectations (value x 11 samples recorded
// at one instant).
func TestPrecedenceKafkaVector(t *testing.T) {
	m, _ := newManager()
	cfg := map[Entity]float64{
		{User: du}:               1000,
		{ClientID: dc}:           2000,
		{User: du, ClientID: dc}: 3000,
		{User: u("userA")}:       4000,
		{User: u("userA"), ClientID: u("client1")}: 5000,
		{User: u("userB")}:                         6000,
		{User: u("userB"), ClientID: u("client1")}: 7000,
		{User: u("userB"), ClientID: dc}:           8000,
		{User: u("userC")}:                         10000,
		{ClientID: u("client1")}:                   9000,
	}
	apply := func() {
		all := map[Entity]Values{}
		for e, v := range cfg {
			all[e] = Values{ProducerByteRate: v}
		}
		m.SetQuotas(all)
	}
	apply()
	check := func(user, client string, bound float64, value float64, throttle bool) {
		t.Helper()
		if got := m.Limit(Produce, user, client); got != bound {
			t.Errorf("%s/%s: quota %v, want %v", user, client, got, bound)
		}
		if got, want := m.MaxValueInWindow(Produce, user, client), bound*10; got != want {
			t.Errorf("%s/%s: max value in window %v, want %v", user, client, got, want)
		}
		got := m.Record(Produce, user, client, value*11)
		if (got > 0) != throttle {
			t.Errorf("%s/%s recording %v: throttle %d ms, want throttled=%v", user, client, value*11, got, throttle)
		}
	}
	check("userA", "client1", 5000, 4500, false)
	check("userA", "client2", 4000, 4500, true)
	check("userA", "client3", 4000, 0, true)
	check("userA", "client1", 5000, 0, false)
	check("userB", "client1", 7000, 8000, true)
	check("userB", "client2", 8000, 7000, false)
	check("userB", "client3", 8000, 7000, false)
	check("userD", "client1", 3000, 3500, true)
	check("userD", "client2", 3000, 2500, false)
	check("userE", "client1", 3000, 2500, false)

	delete(cfg, Entity{User: du, ClientID: dc})
	apply()
	check("userD", "client1", 1000, 0, false)
	check("userE", "client4", 1000, 1500, true)
	check("userF", "client4", 1000, 800, false)
	check("userF", "client5", 1000, 800, true)

	delete(cfg, Entity{User: du})
	apply()
	check("userF", "client4", 2000, 0, false)
	check("userF", "client5", 2000, 0, false)
	check("userF", "client5", 2000, 2500, true)
	check("userG", "client5", 2000, 0, true)

	cfg[Entity{User: u("userA")}] = 8000
	cfg[Entity{User: u("userA"), ClientID: u("client1")}] = 10000
	apply()
	check("userA", "client2", 8000, 0, false)
	check("userA", "client2", 8000, 4500, true)
	check("userA", "client1", 10000, 0, false)
	check("userA", "client1", 10000, 6000, true)
	delete(cfg, Entity{User: u("userA"), ClientID: u("client1")})
	apply()
	check("userA", "client6", 8000, 0, true)
	cfg[Entity{User: u("userA"), ClientID: u("client6")}] = 11000
	apply()
	check("userA", "client6", 11000, 8500, false)
	cfg[Entity{User: u("userA"), ClientID: dc}] = 12000
	delete(cfg, Entity{User: u("userA"), ClientID: u("client6")})
	apply()
	check("userA", "client6", 12000, 4000, true)
}

// With one shape of quota in use, clients share by that shape: a client-id
// default gives every client id its own bucket whatever the user.
func TestSingleLevelSharing(t *testing.T) {
	m, _ := newManager()
	set(m, Produce, setq{Entity{ClientID: dc}, 1000})
	if m.Record(Produce, "a", "c1", 20000) == 0 {
		t.Fatal("c1 not throttled")
	}
	if got := m.Record(Produce, "b", "c1", 0); got == 0 {
		t.Error("another user with client id c1 does not share c1's quota")
	}
	if got := m.Record(Produce, "a", "c2", 0); got != 0 {
		t.Error("client id c2 throttled by c1's usage")
	}
	if m.Enabled(Fetch) || m.Record(Fetch, "a", "c1", 1e12) != 0 {
		t.Error("fetch throttled without a consumer_byte_rate")
	}
	if !math.IsInf(m.MaxValueInWindow(Fetch, "a", "c1"), 1) {
		t.Error("fetch window cap without a quota")
	}
}

// The request quota's throttle is capped at one window (Kafka's
// ClientRequestQuotaManager.throttleTime); fetch bytes can be unrecorded.
func TestRequestCapAndUnrecord(t *testing.T) {
	m, _ := newManager()
	m.SetQuotas(map[Entity]Values{{User: du}: {RequestPercentage: 1, ConsumerByteRate: 100}})
	if got := m.Record(Request, "a", "c", RequestTime(5*time.Second)); got != 1000 {
		t.Errorf("request throttle = %d, want the 1000 ms cap", got)
	}
	if m.Record(Fetch, "a", "c", 5000) == 0 {
		t.Fatal("fetch not throttled")
	}
	m.Unrecord(Fetch, "a", "c", 5000)
	if got := m.Record(Fetch, "a", "c", 0); got != 0 {
		t.Errorf("throttled %d ms after the fetch was unrecorded", got)
	}
}

// Kafka's ControllerMutationQuotaManagerTest: a bucket of rate 10 with 10
// one-second samples holds 100 tokens. Strict: 90 and 90 are accepted
// (tokens -80), the next is refused with 8000 ms, which decays with time.
// Permissive: all accepted, throttled 8000 then 17000 ms.
func TestMutationQuotaKafkaVector(t *testing.T) {
	clk := clock.NewManual(time.UnixMilli(1_700_000_000_000))
	w := Window{Samples: 10, SizeMs: 1000}
	m := New(Config{Window: DefaultWindow, ControllerWindow: w, Clock: clk})
	m.SetQuotas(map[Entity]Values{{User: u("u"), ClientID: u("c")}: {ControllerMutationRate: 10}})

	q := m.Mutation("u", "c", true)
	for i := 0; i < 2; i++ {
		if !q.Record(90) || q.ThrottleMs() != 0 {
			t.Fatalf("strict record %d refused or throttled (%d)", i, q.ThrottleMs())
		}
	}
	if q.Record(90) {
		t.Fatal("strict record with tokens at -80 accepted")
	}
	if got := q.ThrottleMs(); got != 8000 {
		t.Errorf("strict throttle = %d, want 8000", got)
	}
	clk.Advance(5 * time.Second)
	if got := q.ThrottleMs(); got != 3000 {
		t.Errorf("strict throttle after 5 s = %d, want 3000", got)
	}

	m.SetQuotas(map[Entity]Values{{User: u("v"), ClientID: u("c")}: {ControllerMutationRate: 10}})
	p := m.Mutation("v", "c", false)
	p.Record(90)
	if p.ThrottleMs() != 0 {
		t.Errorf("permissive throttled at 10 tokens")
	}
	p.Record(90)
	if got := p.ThrottleMs(); got != 8000 {
		t.Errorf("permissive throttle = %d, want 8000", got)
	}
	p.Record(90)
	if got := p.ThrottleMs(); got != 17000 {
		t.Errorf("permissive throttle = %d, want 17000", got)
	}
	clk.Advance(5 * time.Second)
	if got := p.ThrottleMs(); got != 12000 {
		t.Errorf("permissive throttle after 5 s = %d, want 12000", got)
	}
	if m.Mutation("nobody", "x", true) != nil {
		t.Error("a mutation quota for a client without one")
	}
}

// A 1 MB/s producer quota with Kafka's throttle holds a producer that
// waits out every throttle to the quota: simulated for 30 s of the manual
// clock with 16 KiB requests, from the producer's first request. (Other
// 30 s windows of the default sampling swing more: see
// TestProducerHeldAtQuotaSliding.)
func TestProducerHeldAtQuota(t *testing.T) {
	m, clk := newManager()
	const quota = 1 << 20
	set(m, Produce, setq{Entity{User: u("p")}, quota})
	start := clk.Now()
	sent := 0
	for clk.Now().Sub(start) < 30*time.Second {
		sent += 16 << 10
		if ms := m.Record(Produce, "p", "c", 16<<10); ms > 0 {
			clk.Advance(time.Duration(ms) * time.Millisecond)
		}
		clk.Advance(time.Millisecond)
	}
	got := float64(sent) / clk.Now().Sub(start).Seconds()
	if got < 0.9*quota || got > 1.1*quota {
		t.Errorf("producer rate %.0f B/s, want %d ±10%%", got, quota)
	}
}

// Every 30 s window of a producer that waits out each throttle (with a
// random 1-30 ms between requests) holds 1 MB/s within ±10 % when the
// rate is sampled over 2 x 1 s (the setting of the end-to-end
// TestProducerQuotaHoldsRate). With Kafka's default 11 x 1 s the producer
// sends up to ~10 s of quota at once each time the old samples expire
// (about every 11 s), so a 30 s window holds two or three such bursts: its
// rate depends on where it starts (logged, not asserted; 75-112 %).
func TestProducerHeldAtQuotaSliding(t *testing.T) {
	const quota = 1 << 20
	rates := func(w Window) (lo, hi float64) {
		m, clk := newManager()
		m.cfg.Window = w
		set(m, Produce, setq{Entity{User: u("p")}, quota})
		start := clk.Now()
		type send struct {
			at time.Duration
			n  int
		}
		var sends []send
		rnd := rand.New(rand.NewPCG(1, 2))
		for clk.Now().Sub(start) < 90*time.Second {
			sends = append(sends, send{clk.Now().Sub(start), 64 << 10})
			if ms := m.Record(Produce, "p", "c", 64<<10); ms > 0 {
				clk.Advance(time.Duration(ms) * time.Millisecond)
			}
			clk.Advance(time.Millisecond + time.Duration(rnd.Int64N(int64(30*time.Millisecond))))
		}
		lo, hi = math.Inf(1), 0
		for from := time.Duration(0); from <= 60*time.Second; from += 100 * time.Millisecond {
			n := 0
			for _, s := range sends {
				if s.at >= from && s.at < from+30*time.Second {
					n += s.n
				}
			}
			r := float64(n) / 30 / quota
			lo, hi = min(lo, r), max(hi, r)
		}
		return lo, hi
	}
	if lo, hi := rates(Window{Samples: 2, SizeMs: 1000}); lo < 0.9 || hi > 1.1 {
		t.Errorf("2 x 1 s samples: 30 s windows at %.3f-%.3f of the quota, want within ±10 %%", lo, hi)
	}
	lo, hi := rates(DefaultWindow)
	t.Logf("11 x 1 s samples: 30 s windows at %.3f-%.3f of the quota", lo, hi)
}

func TestAlterValidation(t *testing.T) {
	str := func(s string) *string { return &s }
	cases := []struct {
		parts []EntityPart
		ops   []Op
		want  string
	}{
		{[]EntityPart{{EntityUser, str("a")}}, []Op{{Key: ProducerByteRate, Value: 1024}}, ""},
		{[]EntityPart{{EntityUser, nil}, {EntityClientID, str("c")}}, []Op{{Key: RequestPercentage, Value: 12.5}}, ""},
		{nil, nil, "Invalid empty client quota entity"},
		{[]EntityPart{{EntityUser, str("a")}, {EntityUser, str("b")}}, nil, "duplicate entity entry user"},
		{[]EntityPart{{"group", str("a")}}, nil, "Unhandled client quota entity type: group"},
		{[]EntityPart{{EntityUser, str("")}}, nil, "Empty user not supported"},
		{[]EntityPart{{EntityIP, str("1.2.3.4")}}, nil, "IP quotas"},
		{[]EntityPart{{EntityUser, str("a")}}, []Op{{Key: "bogus", Value: 1}}, "Invalid configuration key bogus"},
		{[]EntityPart{{EntityUser, str("a")}}, []Op{{Key: ProducerByteRate, Value: 0}}, "must be greater than 0"},
		{[]EntityPart{{EntityUser, str("a")}}, []Op{{Key: ProducerByteRate, Value: 1.5}}, "cannot be a fractional value"},
		{[]EntityPart{{EntityUser, str("a")}}, []Op{{Key: ProducerByteRate, Value: 1}, {Key: ProducerByteRate, Remove: true}}, "Duplicate quota key"},
	}
	for i, tc := range cases {
		_, err := ParseEntity(tc.parts)
		if err == nil {
			_, err = Apply(nil, tc.ops)
		}
		if (err == nil) != (tc.want == "") || (err != nil && (!strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrInvalid))) {
			t.Errorf("case %d: %v, want %q", i, err, tc.want)
		}
	}
	v, _ := Apply(Values{ProducerByteRate: 1, ConsumerByteRate: 2}, []Op{{Key: ProducerByteRate, Remove: true}, {Key: RequestPercentage, Value: 3}})
	if len(v) != 2 || v[ConsumerByteRate] != 2 || v[RequestPercentage] != 3 {
		t.Errorf("Apply = %v", v)
	}
}

func TestDescribeFilter(t *testing.T) {
	str := func(s string) *string { return &s }
	entities := []Entity{
		{User: u("a")}, {User: du}, {User: u("a"), ClientID: u("c")}, {ClientID: u("c")}, {User: du, ClientID: dc},
	}
	cases := []struct {
		parts  []FilterPart
		strict bool
		want   []bool
	}{
		{nil, false, []bool{true, true, true, true, true}},
		{nil, true, []bool{false, false, false, false, false}},
		{[]FilterPart{{EntityUser, MatchExact, str("a")}}, false, []bool{true, false, true, false, false}},
		{[]FilterPart{{EntityUser, MatchExact, str("a")}}, true, []bool{true, false, false, false, false}},
		{[]FilterPart{{EntityUser, MatchDefault, nil}}, false, []bool{false, true, false, false, true}},
		{[]FilterPart{{EntityUser, MatchSpecified, nil}}, false, []bool{true, true, true, false, true}},
		{[]FilterPart{{EntityClientID, MatchSpecified, nil}, {EntityUser, MatchSpecified, nil}}, true, []bool{false, false, true, false, true}},
	}
	for i, tc := range cases {
		f, err := ParseFilter(tc.parts, tc.strict)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		for j, e := range entities {
			if got := f.Matches(e); got != tc.want[j] {
				t.Errorf("case %d entity %v: %v, want %v", i, e, got, tc.want[j])
			}
		}
	}
	for _, bad := range [][]FilterPart{
		{{"", MatchExact, str("a")}},
		{{EntityUser, MatchExact, nil}},
		{{EntityUser, MatchDefault, str("a")}},
		{{EntityUser, MatchSpecified, str("a")}},
		{{EntityUser, 7, nil}},
		{{EntityUser, MatchSpecified, nil}, {EntityUser, MatchDefault, nil}},
		{{EntityIP, MatchSpecified, nil}, {EntityUser, MatchDefault, nil}},
	} {
		if _, err := ParseFilter(bad, false); !errors.Is(err, ErrInvalid) {
			t.Errorf("%v: %v, want INVALID_REQUEST", bad, err)
		}
	}
	if _, err := ParseFilter([]FilterPart{{"group", MatchSpecified, nil}}, false); !errors.Is(err, ErrUnsupported) {
		t.Errorf("unknown type: %v, want UNSUPPORTED_VERSION", err)
	}
}
