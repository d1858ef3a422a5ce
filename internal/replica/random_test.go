package replica

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestRandomHistories drives the simulated cluster of the transcripts with
// seeded random commands (produce, fsync, fetch, time, process and power
// failures, pauses, restarts, preferred elections) and fails on any
// invariant violation: an acknowledged or visible record missing from the
// true leader, or an ISR member disagreeing with the leader below the
// high watermark. With strata.durable.acks power cuts may hit any replica
// at any time; with Kafka's semantics only process deaths (the page cache
// survives), since Kafka does not promise more. Elections are clean
// (ISR, then ELR). A failing seed prints the command history to replay as
// a transcript. The pipelined mode has followers fetch from their log end
// whatever their fsync (reporting the fsynced end apart, DurableEndTag):
// the high watermark must still never cover a follower's unsynced records.
// STRATA_REPLICA_SEEDS=N runs N seeds per mode.
func TestRandomHistories(t *testing.T) {
	seeds := 300
	if n, err := strconv.Atoi(os.Getenv("STRATA_REPLICA_SEEDS")); err == nil {
		seeds = n
	}
	if testing.Short() {
		seeds = 50
	}
	for _, mode := range []struct{ durable, pipelined bool }{{true, false}, {true, true}, {false, false}} {
		for seed := uint64(1); seed <= uint64(seeds); seed++ {
			if hist, bad := randomHistory(t, seed, mode.durable, mode.pipelined, 150); bad != "" {
				t.Fatalf("durable=%v pipelined=%v seed %d: %s\nhistory:\n%s", mode.durable, mode.pipelined, seed, bad, hist)
			}
		}
	}
}

func randomHistory(t *testing.T, seed uint64, durable, pipelined bool, steps int) (string, string) {
	r := rand.New(rand.NewPCG(seed, 7))
	c := newCluster()
	var hist []string
	do := func(cmd string) string {
		hist = append(hist, cmd)
		out := c.run(t, cmd)
		if i := strings.Index(out, "VIOLATION"); i >= 0 {
			return out[i:]
		}
		return ""
	}
	n := 2 + r.IntN(3)
	reps := make([]string, n)
	for i := range reps {
		reps[i] = fmt.Sprint(i + 1)
	}
	init := fmt.Sprintf("init replicas=%s min-isr=%d lag=1000", strings.Join(reps, ","), 1+r.IntN(n))
	if !durable {
		init += " durable=false"
	}
	if pipelined {
		init += " pipeline=true"
	}
	if bad := do(init); bad != "" {
		return strings.Join(hist, "\n"), bad
	}
	id := func() string { return reps[r.IntN(n)] }
	for i := 0; i < steps; i++ {
		var cmd string
		switch k := r.IntN(100); {
		case k < 20:
			cmd = fmt.Sprintf("produce n=%d", 1+r.IntN(3))
			if r.IntN(3) == 0 {
				cmd += " acks=1"
			}
		case k < 30:
			cmd = "sync " + id()
		case k < 60:
			cmd = "fetch " + id()
		case k < 65:
			cmd = fmt.Sprintf("tick %d", 100+r.IntN(1000))
		case k < 67:
			// An ISR change held in flight while other things happen.
			cmd = fmt.Sprintf("tick %d hold=true", 100+r.IntN(1000))
		case k < 68:
			cmd = "commit"
		case k < 73:
			cmd = "stop " + id()
			if durable && r.IntN(2) == 0 {
				cmd += " power=true"
			}
		case k < 83:
			cmd = "start " + id()
		case k < 87:
			cmd = "elect " + id()
		case k < 90:
			cmd = "pause " + id()
		case k < 94:
			cmd = "resume " + id()
		case k < 97:
			cmd = "deliver " + id()
		default:
			cmd = "restart " + id()
		}
		if !c.applicable(cmd) {
			continue
		}
		if bad := do(cmd); bad != "" {
			return strings.Join(hist, "\n"), bad
		}
	}
	return strings.Join(hist, "\n"), ""
}

// applicable filters random commands to those that make sense in the
// current state (a stopped replica cannot be paused, and so on).
func (c *cluster) applicable(cmd string) bool {
	f := strings.Fields(cmd)
	if len(f) < 2 || strings.Contains(f[1], "=") {
		return true
	}
	var id int32
	fmt.Sscan(f[1], &id)
	n := c.nodes[id]
	switch f[0] {
	case "stop", "pause", "restart", "sync", "fetch":
		return n.up && !n.paused
	case "start":
		return !n.up
	case "resume":
		return n.up && n.paused
	case "deliver":
		return n.up && !n.paused && n.stale
	}
	return true
}
