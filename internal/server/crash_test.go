package server

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
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
	tb := &testBroker{t: t, dir: dir}
	tb.start()
	if err := os.WriteFile(os.Getenv(envCrashAddr), []byte(tb.addr()), 0o644); err != nil {
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
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("crash"), kgo.AllowAutoTopicCreation(),
		kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	acked := map[string]bool{}
	results := make(chan string, 10000)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			v := strconv.Itoa(i)
			cl.Produce(context.Background(), &kgo.Record{Value: []byte(v)}, func(r *kgo.Record, err error) {
				if err == nil {
					results <- string(r.Value)
				}
			})
			if i%100 == 99 {
				time.Sleep(time.Millisecond)
			}
		}
	}()
	deadline := time.After(1500 * time.Millisecond)
collect:
	for {
		select {
		case v := <-results:
			acked[v] = true
		case <-deadline:
			break collect
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	close(stop)
	<-done
	cl.Close()
	for drained := false; !drained; {
		select {
		case v := <-results:
			acked[v] = true
		default:
			drained = true
		}
	}
	if len(acked) == 0 {
		t.Fatal("nothing acknowledged before the kill")
	}
	tb := startBroker(t, dir+"/data", nil)
	p, err := tb.srv.Broker().Partition("crash", 0)
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
