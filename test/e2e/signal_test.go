package e2e

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestSecondSignalExitsAtOnce: SIGTERM starts a clean shutdown (every
// partition is flushed); a second SIGTERM while it runs exits at once with
// status 1 and no clean-shutdown marker, and the next start recovers with
// every acknowledged record. A thousand partitions with data make the
// clean shutdown take a while (each is fsynced), so the second signal
// lands during it; if this machine finished first, the test says so and
// checks only the clean path.
func TestSecondSignalExitsAtOnce(t *testing.T) {
	dir := t.TempDir()
	p := startBroker(t, dir)
	ctx := ctxFor(t, 3*time.Minute)
	const parts = 1000
	oneRecordEach(t, ctx, p, "sig", parts)

	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The second signal goes as soon as the broker says the shutdown
	// started (a fixed pause let a fast shutdown finish first).
	for deadline := time.Now().Add(60 * time.Second); !strings.Contains(p.Log(), `"shutting down"`); {
		if time.Now().After(deadline) || !p.Alive() {
			break
		}
		time.Sleep(time.Millisecond)
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM) // the process may be gone already
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("still running 60s after two SIGTERMs:\n%s", p.Log())
	}
	code := 0
	var ee *exec.ExitError
	if err := p.exitErr(); errors.As(err, &ee) {
		code = ee.ExitCode()
	}
	checkStopped(t, p, code, "second signal", "the second signal")

	// Every acknowledged record is back after the restart.
	checkOneRecordEach(t, ctx, startBroker(t, dir), "sig", parts)
}

// TestShutdownTimeoutIsAPromise: with --shutdown-timeout shorter than the
// shutdown takes, the broker exits at the deadline with status 1, a log
// line saying so and no clean-shutdown marker, and the next start
// recovers every acknowledged record. (If this machine finished the
// shutdown within the timeout, the test says so and checks the clean
// path.)
func TestShutdownTimeoutIsAPromise(t *testing.T) {
	dir := t.TempDir()
	p := startBroker(t, dir, "--shutdown-timeout", "1ms")
	ctx := ctxFor(t, 3*time.Minute)
	const parts = 200
	oneRecordEach(t, ctx, p, "late", parts)
	cut := checkStopped(t, p, p.Term(), "not finished within --shutdown-timeout", "the shutdown timeout")
	p = startBroker(t, dir)
	if cut && !strings.Contains(p.Log(), "recovering partitions: no clean shutdown marker") {
		t.Errorf("start after a timed-out shutdown did not recover:\n%s", p.Log())
	}
	checkOneRecordEach(t, ctx, p, "late", parts)
}

// oneRecordEach creates topic with parts partitions on p and writes one
// acknowledged record to each.
func oneRecordEach(t *testing.T, ctx context.Context, p *proc, topic string, parts int) {
	t.Helper()
	if res, err := newAdmin(t, p.Kafka).CreateTopic(ctx, int32(parts), 1, nil, topic); err != nil || res.Err != nil {
		t.Fatalf("create: %v %v", err, res.Err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Kafka), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := range parts {
		cl.Produce(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i)), Partition: int32(i)}, nil)
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// checkStopped checks how the stopped broker p ended, from its log: cut
// short (the log says cutMsg: status 1 and no clean-shutdown marker), or
// a clean shutdown that finished first (status 0 and the marker; the test
// then says only the clean path was checked). It reports whether the
// shutdown was cut short.
func checkStopped(t *testing.T, p *proc, code int, cutMsg, cause string) bool {
	t.Helper()
	log := p.Log()
	_, statErr := os.Stat(filepath.Join(p.LogDirs, cleanMarker))
	switch {
	case strings.Contains(log, cutMsg):
		if code != 1 {
			t.Errorf("exit status after %s = %d, want 1", cause, code)
		}
		if statErr == nil {
			t.Errorf("clean-shutdown marker written although %s cut the shutdown short", cause)
		}
		return true
	case strings.Contains(log, "shutdown complete"):
		t.Logf("the clean shutdown finished before %s (status %d): only the clean path was checked", cause, code)
		if code != 0 || statErr != nil {
			t.Errorf("clean shutdown: status %d, marker: %v", code, statErr)
		}
		return false
	default:
		t.Fatalf("neither an exit at %s nor a clean shutdown (status %d):\n%s", cause, code, log)
		return false
	}
}

// checkOneRecordEach checks every partition of topic on p ends at offset
// 1: the record oneRecordEach wrote is there.
func checkOneRecordEach(t *testing.T, ctx context.Context, p *proc, topic string, parts int) {
	t.Helper()
	ends, err := newAdmin(t, p.Kafka).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	short := 0
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset != 1 {
			short++
		}
	})
	if short > 0 {
		t.Errorf("%d of %d partitions lost their acknowledged record", short, parts)
	}
}
