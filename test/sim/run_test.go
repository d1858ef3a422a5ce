package sim

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// paramsFor draws a run's settings from its seed: 3 to 5 brokers,
// min.insync.replicas 1 to 3, durable acks (followers pipelining their
// fsyncs, or a quarter of them not: legacyLeaders) or Kafka's semantics, a lossy
// network (up to 10% dropped, 5% duplicated, delays up to 30 ms with a
// slow tail), faults every ~1 s on average over 20 s, then 15 s healed.
func paramsFor(seed uint64) params {
	p := params{brokers: 3 + int(seed%3), durable: seed%2 == 0, lagMs: 1000, sessionMs: 3000,
		maxDelay: 5 + int64(seed%26), faultRate: 0.25, faultMs: 20000, quietMs: 15000}
	p.minISR = 1 + int(seed/2%3)
	p.unsyncedPowerCuts = !p.durable
	p.legacyLeaders = seed%8 == 2 // a quarter of the durable seeds: followers fetch from their fsynced end
	p.drop = float64(seed/7%11) / 100
	p.dup = float64(seed/5%6) / 100
	return p
}

func seedsFromEnv(def int) int {
	if n, err := strconv.Atoi(os.Getenv("STRATA_SIM_SEEDS")); err == nil && n > 0 {
		return n
	}
	if os.Getenv("STRATA_LONG") == "1" {
		return 5000
	}
	return def
}

// runSeed plays one seed and returns its counts and violation ("" for
// none) with the run's last events.
func runSeed(t *testing.T, seed uint64, p params) (counts, string) {
	t.Helper()
	s := newSim(seed, p)
	s.fullTrace = os.Getenv("STRATA_SIM_TRACE") != ""
	v := s.run()
	if s.fullTrace {
		if err := os.WriteFile(os.Getenv("STRATA_SIM_TRACE"), []byte(strings.Join(s.trace, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if v != "" {
		v = fmt.Sprintf("seed %d (%+v): %s\nlast events:\n%s\nreplay: STRATA_SIM_SEED=%d go test ./test/sim -run TestSimulation -v",
			seed, p, v, strings.Join(s.trace, "\n"), seed)
	}
	return s.c, v
}

// TestSimulation plays many seeds (200; STRATA_SIM_SEEDS=N, 5000 with
// STRATA_LONG=1; STRATA_SIM_SEED=S plays one). It prints the last events
// of the first seed that violates an invariant and lists every such seed.
func TestSimulation(t *testing.T) {
	if s := os.Getenv("STRATA_SIM_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		c, v := runSeed(t, seed, paramsFor(seed))
		if v != "" {
			t.Fatal(v)
		}
		t.Logf("seed %d: %+v", seed, c)
		return
	}
	n := seedsFromEnv(200)
	var total counts
	var bad []string
	for seed := uint64(1); seed <= uint64(n); seed++ {
		c, v := runSeed(t, seed, paramsFor(seed))
		total.add(c)
		if v != "" {
			if len(bad) == 0 {
				t.Error(v)
			}
			bad = append(bad, strings.SplitN(v, "\n", 2)[0])
		}
	}
	if len(bad) > 0 {
		t.Errorf("%d of %d seeds violate an invariant:\n%s", len(bad), n, strings.Join(bad, "\n"))
	}
	t.Logf("%d seeds, %s", n, total)
}

func (c counts) String() string {
	return fmt.Sprintf("%d events, %d messages (%d dropped, %d duplicated), %d process deaths, %d power cuts, %d crashes of every broker at once, %d pauses, %d network cuts, %d quorum losses, %d records produced, %d acknowledged, %d read, %d leader elections, %d truncations",
		c.events, c.msgs, c.dropped, c.duplicated, c.crashes, c.powerCuts, c.allCrashes, c.pauses, c.cuts, c.quorumLosses, c.produced, c.acked, c.reads, c.elections, c.truncations)
}

// TestSimulationDeterministic: the same seed replays the same run.
func TestSimulationDeterministic(t *testing.T) {
	for _, seed := range []uint64{3, 42, 1001} {
		a, b := newSim(seed, paramsFor(seed)), newSim(seed, paramsFor(seed))
		a.run()
		b.run()
		if a.hash != b.hash || a.c != b.c {
			t.Fatalf("seed %d ran twice differently: %x %+v vs %x %+v", seed, a.hash, a.c, b.hash, b.c)
		}
	}
}

// TestSimulationRestartKeepsEpoch runs 150 seeds with a controller that
// never sees a restarting broker's registration disappear: a leader that
// loses power (strata.durable.acks=true) and restarts within
// broker.session.timeout.ms deletes and re-creates its registration
// between two reconciles. The controller must still fence the old
// incarnation from its broker epoch (controller.rebuildEpochs compares the
// leader's registration epoch with the one recorded at its election) and
// elect at a new leader epoch; before that fix a follower kept the lost
// tail under the same epoch and 5 of the 200 seeds lost acknowledged
// records (docs/reliability.md, the same-epoch restart; seed 50).
func TestSimulationRestartKeepsEpoch(t *testing.T) {
	// 150 seeds (200 until session 7; trimmed to keep the default suite's
	// time while the simulation grew pipelined fetches): seed 50, the
	// first of the five that failed before the fix, is among them.
	const seeds = 150
	var bad []string
	for seed := uint64(1); seed <= seeds; seed++ {
		p := paramsFor(seed)
		p.restartKeepsEpoch = true
		s := newSim(seed, p)
		if v := s.run(); v != "" {
			if len(bad) == 0 {
				t.Errorf("seed %d with the restart invisible to the controller: %s\nlast events:\n%s", seed, v, strings.Join(s.trace, "\n"))
			}
			bad = append(bad, fmt.Sprintf("%d: %s", seed, v))
		}
	}
	if len(bad) > 0 {
		t.Errorf("%d of %d seeds violate an invariant:\n%s", len(bad), seeds, strings.Join(bad, "\n"))
	}
}

// TestSimulationRestartedFollowerLeavesISR is KIP-903's per-member scenario
// as a fixed script (no random faults), over 20 seeds of network timing:
// with Kafka's semantics (durable acks off) a follower in the ISR loses
// power, dropping the unsynced tail of what it had fetched (records the
// high watermark counted, so acknowledged), and restarts within its
// session; the controller sees only its new registration (no gap), and
// the leader is killed as soon as that registration lands. Without
// per-member ISR broker epochs the restarted follower was still in the ISR
// and, first in replica order, was elected: acknowledged records lost.
// With them (meta.PartitionState.ISREpochs) the controller drops it from
// the ISR when it re-registers and elects the other follower.
func TestSimulationRestartedFollowerLeavesISR(t *testing.T) {
	meaningful := 0
	for seed := uint64(1); seed <= 20; seed++ {
		p := params{brokers: 3, minISR: 2, durable: false, lagMs: 1000, sessionMs: 3000, maxDelay: 3 + int64(seed%5),
			faultMs: 8000, quietMs: 8000, restartKeepsEpoch: true, segmentBytes: 1 << 30}
		s := newSim(seed, p)
		s.at(3000, func() {
			var f *node
			for _, r := range s.qs.Replicas {
				if r != s.qs.Leader && slices.Contains(s.qs.ISR, r) {
					f = s.nodes[r]
					break
				}
			}
			if f == nil || !f.up {
				return
			}
			end := f.log.end()
			s.crash(f, true)
			for off := range s.acked {
				if off >= f.log.end() && off < end {
					meaningful++ // an acknowledged record is gone from f
					break
				}
			}
			s.at(s.now+50, func() {
				s.start(f)
				var kill func()
				kill = func() { // the leader dies as soon as f's new registration lands
					if l, ok := s.leases[f.id]; ok && l.epoch == f.epoch {
						if ln := s.nodes[s.qs.Leader]; s.qs.Leader > 0 && ln.up && ln != f {
							s.crash(ln, false)
						}
						return
					}
					s.at(s.now+1, kill)
				}
				s.at(s.now+1, kill)
			})
		})
		if v := s.run(); v != "" {
			t.Fatalf("seed %d: %s\nlast events:\n%s", seed, v, strings.Join(s.trace, "\n"))
		}
	}
	if meaningful == 0 {
		t.Fatalf("no seed cut power while the follower held unsynced acknowledged records: the scenario tests nothing")
	}
	t.Logf("%d of 20 seeds dropped acknowledged records from the restarted follower", meaningful)
}

// TestSimulationRestartAll is the fault matrix's kill-all row (the
// session-5 anomaly: acknowledged records lost, offsets read with two
// values) as a fixed script over 20 seeds of network timing, for a kill
// -9 of every broker and for a power cut of every broker (durable acks):
// the leader is cut from its followers for 400 ms while produces go on,
// so its log holds records the ISR does not (an uncommitted tail, fsynced
// with durable acks); every broker then stops at once and all restart
// together 200 ms later. Consumers read from every replica throughout.
// Each broker reopens its log through storage.Open; before the
// replication-offset checkpoint a reopened log took its recovered end as
// its high watermark, so a restarted replica served (as a follower) or
// led with the uncommitted tail as if committed, and a new leader then
// wrote other records at those offsets.
func TestSimulationRestartAll(t *testing.T) {
	for _, power := range []bool{false, true} {
		name := map[bool]string{false: "kill", true: "power-cut"}[power]
		t.Run(name, func(t *testing.T) {
			tails, exposed := 0, 0
			for seed := uint64(1); seed <= 20; seed++ {
				p := params{brokers: 3, minISR: 2, durable: power || seed%2 == 0, lagMs: 1000, sessionMs: 3000,
					maxDelay: 3 + int64(seed%5), faultMs: 8000, quietMs: 8000}
				s := newSim(seed, p)
				var committed int64
				s.at(3000, func() {
					l := s.qs.Leader
					if l < 0 {
						return
					}
					var paths [][2]int32
					for _, o := range s.ids {
						if o != l {
							paths = append(paths, [2]int32{l, o}, [2]int32{o, l})
						}
					}
					for _, p := range paths {
						s.cut[p]++
					}
					s.say("cut the leader %d from its followers", l)
					s.at(s.now+400, func() {
						ln := s.nodes[l]
						if ln.up && ln.log.end() > ln.log.hw() {
							tails++
						}
						committed = ln.log.hw()
						s.say("every broker %s (leader %d: log end %d, high watermark %d)", map[bool]string{true: "loses power", false: "is killed"}[power], l, ln.log.end(), committed)
						for _, id := range s.ids {
							if n := s.nodes[id]; n.up {
								s.crash(n, power)
							}
						}
						for _, p := range paths {
							s.cut[p]--
						}
						s.at(s.now+200, func() {
							past := false
							for _, id := range s.ids {
								s.start(s.nodes[id])
								past = past || s.nodes[id].log.hw() > committed
							}
							if past {
								exposed++ // a log restarted past what was committed (before the fix)
							}
						})
					})
				})
				if v := s.run(); v != "" {
					t.Fatalf("seed %d: %s\nlast events:\n%s", seed, v, strings.Join(s.trace, "\n"))
				}
			}
			if tails == 0 {
				t.Fatalf("no seed stopped the brokers while the leader held an uncommitted tail: the scenario tests nothing")
			}
			t.Logf("%d of 20 seeds stopped every broker over an uncommitted tail; in %d a restarted log exposed records past the committed high watermark", tails, exposed)
		})
	}
}
