package e2e

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestSecondBrokerSameDir starts a second broker on a log dir in use: it
// must exit non-zero naming the lock, and the first keeps serving.
func TestSecondBrokerSameDir(t *testing.T) {
	dir := t.TempDir()
	p := startBroker(t, dir)
	ctx := ctxFor(t, time.Minute)
	cmd := exec.CommandContext(ctx, strataBin, "serve", "--listeners", "PLAINTEXT://127.0.0.1:0",
		"--strata.metrics.listener", "", "--log.dirs", dir)
	cmd.Env = brokerEnv()
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("second broker on %s started:\n%s", dir, out)
	}
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "lock") {
		t.Errorf("second broker: %v, want exit 1 with a message about the lock:\n%s", err, out)
	}
	if res, err := newAdmin(t, p.Kafka).CreateTopic(ctx, 1, 1, nil, "after"); err != nil || res.Err != nil {
		t.Errorf("first broker after the second one failed: %v %v", err, res.Err)
	}
	if code := p.Term(); code != 0 {
		t.Errorf("exit code after SIGTERM = %d", code)
	}
}

// TestWrongNodeID starts a broker with another node.id on a log dir that
// belongs to node 1: it must refuse to start, naming the mismatch.
func TestWrongNodeID(t *testing.T) {
	dir := t.TempDir()
	p := startBroker(t, dir)
	if code := p.Term(); code != 0 {
		t.Fatalf("exit code after SIGTERM = %d", code)
	}
	ctx := ctxFor(t, time.Minute)
	cmd := exec.CommandContext(ctx, strataBin, "serve", "--listeners", "PLAINTEXT://127.0.0.1:0",
		"--strata.metrics.listener", "", "--log.dirs", dir, "--node.id", "2")
	cmd.Env = brokerEnv()
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "node.id") {
		t.Errorf("broker with node.id 2 on node 1's dir: %v, want a refusal naming node.id:\n%s", err, out)
	}
	p = startBroker(t, dir) // node 1 still starts
	if code := p.Term(); code != 0 {
		t.Errorf("exit code after SIGTERM = %d", code)
	}
}

// TestShutdownWithLongPoll: a consumer long-polling an empty topic (fetch
// max wait 25 s) must not hold up a SIGTERM shutdown for its wait.
func TestShutdownWithLongPoll(t *testing.T) {
	p := startBroker(t, t.TempDir())
	ctx := ctxFor(t, time.Minute)
	if res, err := newAdmin(t, p.Kafka).CreateTopic(ctx, 1, 1, nil, "idle"); err != nil || res.Err != nil {
		t.Fatalf("create: %v %v", err, res.Err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Kafka), kgo.ConsumeTopics("idle"), kgo.FetchMaxWait(25*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { // owner: this test; ends on cancel
		defer close(done)
		for pctx.Err() == nil {
			cl.PollFetches(pctx)
		}
	}()
	defer func() { cancel(); <-done }()
	// Give the consumer time to connect and park a fetch (not an assertion).
	time.Sleep(time.Second)
	start := time.Now()
	code := p.Term()
	took := time.Since(start)
	t.Logf("SIGTERM with a 25 s long-poll fetch parked: exit %d after %s", code, took.Round(time.Millisecond))
	if code != 0 {
		t.Errorf("exit code %d", code)
	}
	if took >= 25*time.Second {
		t.Errorf("shutdown waited %s, as long as the parked fetch's max wait (25 s)", took)
	}
}
