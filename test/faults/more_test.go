package faults

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/faults"
)

// TestStrataSIGSTOP pauses the node (SIGSTOP) long enough for client
// requests to time out and resumes it (SIGCONT); then nothing may be lost.
func TestStrataSIGSTOP(t *testing.T) {
	t.Parallel()
	rounds := 2
	if long() {
		rounds = 20
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rounds)*30*time.Second+2*time.Minute)
	defer cancel()
	dir := filepath.Join(t.TempDir(), "data")
	p, addr := singleNode(t, ctx, dir)
	nem := &faults.Nemesis{Faults: []faults.Fault{faults.PauseResume(p)}, Rounds: rounds,
		Healthy: 2 * time.Second, Faulty: 4 * time.Second}
	runFaults(t, ctx, strataWorkload(addr, "sigstop", t), nem, map[string]string{
		"broker": "strata single node, defaults, acks=all",
		"faults": fmt.Sprintf("%d x SIGSTOP 4 s then SIGCONT", rounds)})
}

// TestStrataDiskFull fills the node's data directory (a 64 MiB tmpfs) to the
// last byte under the workload, then frees it: writes fail while it is full,
// and nothing acknowledged may be lost or changed.
func TestStrataDiskFull(t *testing.T) {
	t.Parallel()
	rounds := 2
	if long() {
		rounds = 10
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rounds)*30*time.Second+2*time.Minute)
	defer cancel()
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// The node is a one-node cluster (zero configuration): its metadata
	// store needs 144 MB free to start. The free-space reserve is off so
	// that the data plane meets the raw ENOSPC this test is about (the
	// reserve's refusals are tested in test/e2e); the store, which writes
	// only on metadata changes and has preallocated its log, sees none
	// during the faults.
	disk, err := faults.MountDisk(dir, "256m")
	if err != nil {
		t.Fatal(err)
	}
	// Registered before the node's, so it runs after the node stopped
	// (cleanups run last in, first out).
	t.Cleanup(func() {
		if err := disk.Unmount(); err != nil {
			t.Errorf("unmount: %v", err)
		}
	})
	_, addr := singleNode(t, ctx, dir, "--strata.log.min.free.bytes", "0")
	nem := &faults.Nemesis{Faults: []faults.Fault{faults.DiskFull(disk)}, Rounds: rounds,
		Healthy: 2 * time.Second, Faulty: 3 * time.Second}
	runFaults(t, ctx, strataWorkload(addr, "diskfull", t), nem, map[string]string{
		"broker": "strata single node (one-node cluster) on a 256 MiB tmpfs, strata.log.min.free.bytes=0, acks=all",
		"faults": fmt.Sprintf("%d x disk filled for 3 s then freed", rounds)})
	// The fault must have bitten: the broker met ENOSPC.
	logged, err := os.ReadFile(dir + ".log")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(logged), "no space left on device"); n == 0 {
		t.Fatalf("the broker never met a full disk; its log:\n%s", logged)
	} else {
		t.Logf("the broker logged ENOSPC %d times", n)
	}
}

// tcpOK reports whether a TCP connection from namespace ns (root when "")
// to addr succeeds within 2 s.
func tcpOK(ns, ip string, port int) bool {
	script := fmt.Sprintf("exec 3<>/dev/tcp/%s/%d", ip, port)
	args := []string{"2", "bash", "-c", script}
	name := "timeout"
	if ns != "" {
		args = append([]string{"netns", "exec", ns, "timeout"}, args...)
		name = "ip"
	}
	return exec.Command(name, args...).Run() == nil
}

// TestNetworkHarness checks the namespace harness the cluster fault matrix
// builds on: a broker in its own namespace serves clients over the bridge;
// symmetric and one-way partitions cut exactly the paths they name, healing
// restores them; isolating the broker from the clients under the workload
// loses nothing.
func TestNetworkHarness(t *testing.T) {
	t.Parallel()
	nt, err := faults.NewNet(2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := nt.Close(); err != nil {
			t.Errorf("close net: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const port = 9092
	dir := filepath.Join(t.TempDir(), "data")
	spec := faults.StrataNode(strataBin, "strata-ns0", dir, fmt.Sprintf("%s:%d", nt.IP(0), port))
	spec.Netns = nt.Netns(0)
	p := faults.NewProc(spec)
	t.Cleanup(p.Stop) // runs before nt.Close (cleanups are last in, first out)
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}

	check := func(when string, fromRoot, from1 bool) {
		t.Helper()
		if got := tcpOK("", nt.IP(0), port); got != fromRoot {
			t.Fatalf("%s: root -> node 0 connects=%v, want %v", when, got, fromRoot)
		}
		if got := tcpOK(nt.Netns(1), nt.IP(0), port); got != from1 {
			t.Fatalf("%s: node 1 -> node 0 connects=%v, want %v", when, got, from1)
		}
	}
	check("healthy", true, true)
	if err := nt.Partition(0, 1); err != nil {
		t.Fatal(err)
	}
	check("partition 0<->1", true, false)
	if err := nt.Heal(); err != nil {
		t.Fatal(err)
	}
	check("healed", true, true)
	if err := nt.Block(1, 0); err != nil { // node 0 never hears node 1
		t.Fatal(err)
	}
	check("drop 1->0", true, false)
	if err := nt.Heal(); err != nil {
		t.Fatal(err)
	}
	if err := nt.IsolateFromClients(0); err != nil {
		t.Fatal(err)
	}
	check("node 0 isolated from clients", false, true)
	if err := nt.Heal(); err != nil {
		t.Fatal(err)
	}
	check("healed again", true, true)

	// SIGKILL reaches the broker itself through `ip netns exec`.
	if err := p.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	check("killed", false, false)
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}

	addr := fmt.Sprintf("%s:%d", nt.IP(0), port)
	nem := &faults.Nemesis{Rounds: 2, Healthy: 2 * time.Second, Faulty: 3 * time.Second,
		Faults: []faults.Fault{faults.FuncFault{Label: "isolate node 0 from clients",
			InjectFn: func(context.Context) error { return nt.IsolateFromClients(0) },
			HealFn:   func(context.Context) error { return nt.Heal() }}}}
	runFaults(t, ctx, strataWorkload(addr, "netns", t), nem, map[string]string{
		"broker": "strata single node in its own network namespace, defaults, acks=all",
		"faults": "2 x clients cut off for 3 s by iptables"})
}
