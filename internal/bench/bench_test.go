package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

func cluster(t *testing.T) []string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

func TestProduceConsumeE2E(t *testing.T) {
	brokers := cluster(t)
	ctx := context.Background()
	cfg := Config{Brokers: brokers, Topic: "bench", Partitions: 3, RecordSize: 100, Count: 2000, Keys: 50, Acks: "all", Compression: "lz4", Linger: time.Millisecond}
	res, err := Produce(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Records != 2000 || res.Errors != 0 || res.Latency == nil || res.Latency.Max <= 0 || res.Bytes < 2000*100 {
		t.Errorf("produce: %+v", res)
	}
	if !strings.Contains(res.String(), "produce bench: 2000 records") || !strings.Contains(res.String(), "p99.9") {
		t.Errorf("summary: %s", res)
	}
	cres, err := Consume(ctx, Config{Brokers: brokers, Topic: "bench", Count: 0, Duration: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if cres.Records != 2000 || cres.Latency != nil {
		t.Errorf("consume: %+v", cres)
	}
	cres, err = Consume(ctx, Config{Brokers: brokers, Topic: "bench", Count: 500})
	if err != nil || cres.Records < 500 {
		t.Errorf("consume count: %+v %v", cres, err)
	}
	var progress bytes.Buffer
	eres, err := E2E(ctx, Config{Brokers: brokers, Topic: "bench", RecordSize: 64, Count: 1000, Acks: "1", Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	if eres.Records != 1000 || eres.Latency == nil {
		t.Errorf("e2e: %+v", eres)
	}
}

func TestDurationAndRate(t *testing.T) {
	brokers := cluster(t)
	var progress bytes.Buffer
	res, err := Produce(context.Background(), Config{Brokers: brokers, Topic: "d", RecordSize: 10, Duration: 1500 * time.Millisecond, Rate: 200, Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	// Record i is sent no earlier than i/rate after the start, so at most
	// rate*elapsed+1 records can have been sent.
	if res.Records == 0 || float64(res.Records) > 200*res.ElapsedSec+1 {
		t.Errorf("records %d in %.2fs at rate 200", res.Records, res.ElapsedSec)
	}
	for _, line := range strings.Split(strings.TrimSpace(progress.String()), "\n") {
		if line != "" && !strings.Contains(line, "produce: ") {
			t.Errorf("progress line %q", line)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	ctx := context.Background()
	cases := map[string]Config{
		"no brokers":                            {Topic: "t", Count: 1},
		"need a positive --count or --duration": {Brokers: []string{"x"}, Topic: "t"},
		`invalid acks "2"`:                      {Brokers: []string{"x"}, Topic: "t", Count: 1, Acks: "2"},
		`invalid compression "brotli"`:          {Brokers: []string{"x"}, Topic: "t", Count: 1, Compression: "brotli"},
	}
	for want, c := range cases {
		if _, err := Produce(ctx, c); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want %q", err, want)
		}
	}
	if _, err := E2E(ctx, Config{Brokers: []string{"x"}, Topic: "t", Count: 1, RecordSize: 4}); err == nil || !strings.Contains(err.Error(), "at least 8") {
		t.Errorf("e2e size: %v", err)
	}
	if _, err := Consume(ctx, Config{Brokers: cluster(t), Topic: "missing", Count: 1}); err == nil || err.Error() != `unknown topic "missing"` {
		t.Errorf("consume missing topic: %v", err)
	}
	_, err := Produce(ctx, Config{Brokers: []string{"127.0.0.1:1"}, Topic: "t", Count: 1})
	if err == nil || !strings.HasPrefix(err.Error(), "cannot reach broker at 127.0.0.1:1") {
		t.Errorf("down: %v", err)
	}
}

// TestInterruptedProduce checks that cancelling a run (Ctrl-C) returns the
// partial result rather than an error.
func TestInterruptedProduce(t *testing.T) {
	brokers := cluster(t)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(500*time.Millisecond, cancel)
	res, err := Produce(ctx, Config{Brokers: brokers, Topic: "i", RecordSize: 10, Duration: time.Hour, Rate: 1000})
	if err != nil && res.Records == 0 {
		t.Skipf("cancelled before the run started (slow machine): %v", err)
	}
	if err != nil || res.Records == 0 {
		t.Errorf("interrupted produce: %+v %v", res, err)
	}
}
