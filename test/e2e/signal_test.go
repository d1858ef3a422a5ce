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
	if res, err := newAdmin(t, p.Kafka).CreateTopic(ctx, parts, 1, nil, "sig"); err != nil || res.Err != nil {
		t.Fatalf("create: %v %v", err, res.Err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Kafka), kgo.DefaultProduceTopic("sig"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	for i := range parts {
		cl.Produce(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i)), Partition: int32(i)}, nil)
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	cl.Close()

	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
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
	log := p.Log()
	marker := filepath.Join(p.LogDirs, ".kafka_cleanshutdown")
	_, statErr := os.Stat(marker)
	switch {
	case strings.Contains(log, "second signal"):
		if code != 1 {
			t.Errorf("exit status after the second signal = %d, want 1", code)
		}
		if statErr == nil {
			t.Errorf("clean-shutdown marker written although the shutdown was cut short")
		}
	case strings.Contains(log, "shutdown complete"):
		t.Logf("the clean shutdown finished before the second signal (status %d): only the clean path was checked", code)
		if code != 0 || statErr != nil {
			t.Errorf("clean shutdown: status %d, marker: %v", code, statErr)
		}
	default:
		t.Fatalf("neither a second-signal exit nor a clean shutdown (status %d):\n%s", code, log)
	}

	// Every acknowledged record is back after the restart.
	p = startBroker(t, dir)
	ends, err := newAdmin(t, p.Kafka).ListEndOffsets(context.Background(), "sig")
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
	if res, err := newAdmin(t, p.Kafka).CreateTopic(ctx, parts, 1, nil, "late"); err != nil || res.Err != nil {
		t.Fatalf("create: %v %v", err, res.Err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Kafka), kgo.DefaultProduceTopic("late"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	for i := range parts {
		cl.Produce(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i)), Partition: int32(i)}, nil)
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	code := p.Term()
	log := p.Log()
	_, statErr := os.Stat(filepath.Join(p.LogDirs, ".kafka_cleanshutdown"))
	switch {
	case strings.Contains(log, "not finished within --shutdown-timeout"):
		if code != 1 {
			t.Errorf("exit status past the shutdown timeout = %d, want 1", code)
		}
		if statErr == nil {
			t.Errorf("clean-shutdown marker written although the shutdown timed out")
		}
	case strings.Contains(log, "shutdown complete"):
		t.Logf("the shutdown finished within 1ms (status %d): only the clean path was checked", code)
		if code != 0 || statErr != nil {
			t.Errorf("clean shutdown: status %d, marker: %v", code, statErr)
		}
	default:
		t.Fatalf("neither a timed-out nor a clean shutdown (status %d):\n%s", code, log)
	}
	p = startBroker(t, dir)
	if statErr != nil && !strings.Contains(p.Log(), "recovering partitions: no clean shutdown marker") {
		t.Errorf("start after a timed-out shutdown did not recover:\n%s", p.Log())
	}
	ends, err := newAdmin(t, p.Kafka).ListEndOffsets(ctx, "late")
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
