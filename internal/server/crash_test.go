package server_test

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The crash test runs a broker in a child process (this test binary),
// produces with acks=all, kills the child with SIGKILL and checks that a
// new broker over the same log dir serves every acknowledged record.

const (
	envCrashDir  = "STRATA_CRASH_CHILD_DIR"
	envCrashAddr = "STRATA_CRASH_CHILD_ADDRFILE"
)

// TestCrashChild is the child broker; a no-op unless started by TestKill9.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(envCrashDir)
	if dir == "" {
		t.Skip("crash test helper")
	}
	tb := startBroker(t, dir, nil)
	if err := os.WriteFile(os.Getenv(envCrashAddr), []byte(tb.Addr()), 0o644); err != nil {
		t.Fatal(err)
	}
	select {} // until killed
}

func TestKill9KeepsAcknowledgedRecords(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	dir := t.TempDir()
	addrFile := dir + "/addr"
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), envCrashDir+"="+dir+"/data", envCrashAddr+"="+addrFile)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var addr string
	for i := 0; i < 200 && addr == ""; i++ {
		if b, err := os.ReadFile(addrFile); err == nil {
			addr = string(b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if addr == "" {
		t.Fatal("child broker did not start")
	}
	// RecordDeliveryTimeout bounds how long a record waits for a dead
	// broker, so nothing below can block forever once the child is killed.
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("crash"), kgo.AllowAutoTopicCreation(),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordDeliveryTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	acked := map[string]bool{}
	ackCount := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ctx.Err() == nil; i++ {
			v := strconv.Itoa(i)
			// Produce blocks while the client's buffer is full; the
			// cancelled context releases it.
			cl.Produce(ctx, &kgo.Record{Value: []byte(v)}, func(r *kgo.Record, err error) {
				if err == nil {
					mu.Lock()
					acked[string(r.Value)] = true
					mu.Unlock()
				}
			})
			if i%100 == 99 {
				time.Sleep(time.Millisecond)
			}
		}
	}()
	// Wait for the auto-created topic to take writes (a client may wait
	// for its next metadata refresh, and CI machines are slow), then keep
	// producing for a while before the kill.
	start := time.Now()
	for ackCount() == 0 && time.Since(start) < time.Minute {
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("first acknowledgement after %v", time.Since(start))
	time.Sleep(1500 * time.Millisecond)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	cancel()
	<-done
	cl.Close() // fails whatever is still buffered; those were never acknowledged
	mu.Lock()
	defer mu.Unlock()
	if len(acked) == 0 {
		t.Fatal("nothing acknowledged before the kill")
	}
	tb := startBroker(t, dir+"/data", nil)
	p, err := tb.Server().Broker().Partition("crash", 0)
	if err != nil {
		t.Fatal(err)
	}
	hw := p.Log.HighWatermark()
	if hw < int64(len(acked)) {
		t.Fatalf("after kill -9: high watermark %d < %d acknowledged records", hw, len(acked))
	}
	got := consumeAll(t, tb, "crash", int(hw))
	seen := map[string]bool{}
	for _, r := range got {
		seen[string(r.Value)] = true
	}
	var missing []string
	for v := range acked {
		if !seen[v] {
			missing = append(missing, v)
		}
	}
	if len(missing) > 0 {
		t.Errorf("%d acknowledged records lost, e.g. %s", len(missing), strings.Join(missing[:min(5, len(missing))], ","))
	}
	t.Logf("%d acknowledged, %d recovered", len(acked), len(got))
}
