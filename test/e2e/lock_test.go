package e2e

import (
	"os/exec"
	"strings"
	"testing"
	"time"
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
