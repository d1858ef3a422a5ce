package server_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/config"
	"github.com/strata-io/strata/internal/freeport"
	"github.com/strata-io/strata/internal/server"
	"github.com/strata-io/strata/internal/servertest"
)

// TestStartRetriesUntilQuorum: a broker started while the controller
// quorum is lost (two of three controllers had formed the store, then one
// stopped: the member left answers but cannot commit, "request timed out")
// retries each start step against the metadata store instead of exiting
// (90f9fbd, as Kafka's broker waits up to
// initial.broker.registration.timeout.ms for the quorum), and starts,
// registers and serves once the stopped controller returns.
func TestStartRetriesUntilQuorum(t *testing.T) {
	ports := freeport.Take(t, 3)
	var voters []string
	for i, p := range ports {
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", i+1, p))
	}
	ctl := func(id int) map[string]string {
		return map[string]string{
			"node.id": fmt.Sprint(id), "process.roles": "controller",
			"listeners":                 fmt.Sprintf("CONTROLLER://127.0.0.1:%d", ports[id-1]),
			"controller.listener.names": "CONTROLLER",
			"controller.quorum.voters":  strings.Join(voters, ","),
			"log.dirs":                  t.TempDir(), "strata.metrics.listener": "",
		}
	}
	type started struct {
		srv *server.Server
		err error
	}
	start := func(settings map[string]string, logger *slog.Logger) chan started {
		ch := make(chan started, 1)
		cfg, err := config.LoadBroker("", nil, settings)
		if err != nil {
			t.Fatal(err)
		}
		srv, err := server.NewWithOptions(cfg, logger, server.Options{StoreTiming: servertest.StoreTiming})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = srv.Shutdown(ctx)
		})
		go func() { ch <- started{srv, srv.Start()} }() // owner: this test; ends when Start returns
		return ch
	}
	began := time.Now()
	wait := func(what string, ch chan started) *server.Server {
		t.Helper()
		r := <-ch
		t.Logf("%s started at %v", what, time.Since(began).Round(time.Millisecond))
		if r.err != nil {
			t.Fatalf("%s start: %v", what, r.err)
		}
		return r.srv
	}
	quiet := slog.New(slog.DiscardHandler)
	s1, s2 := ctl(1), ctl(2)
	c1, c2 := start(s1, quiet), start(s2, quiet)
	wait("controller 1", c1)
	ctl2 := wait("controller 2", c2)
	// Controller 2 stops: controller 1's member answers but cannot commit.
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	if err := ctl2.Shutdown(sctx); err != nil {
		t.Fatalf("controller 2 shutdown: %v", err)
	}
	cancel()
	var blog syncBuffer
	brokerCh := start(map[string]string{
		"node.id": "4", "process.roles": "broker", "listeners": "PLAINTEXT://127.0.0.1:0",
		"controller.listener.names": "CONTROLLER", "controller.quorum.voters": strings.Join(voters, ","),
		"log.dirs": t.TempDir(), "strata.metrics.listener": "",
	}, slog.New(slog.NewTextHandler(&blog, nil)))
	// The broker meets a store that does not answer and retries.
	deadline := time.Now().Add(90 * time.Second)
	for !strings.Contains(blog.String(), "metadata store not answering at start; retrying") {
		select {
		case r := <-brokerCh:
			t.Fatalf("the broker's start ended before the quorum was back: %v\n%s", r.err, blog.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the broker logged no retry while the quorum was lost:\n%s", blog.String())
		}
	}
	// Controller 2 returns on its directory: the quorum is back.
	wait("controller 2 again", start(s2, quiet))
	var b *server.Server
	select {
	case r := <-brokerCh:
		if r.err != nil {
			t.Fatalf("broker start after the quorum came back: %v\n%s", r.err, blog.String())
		}
		b = r.srv
	case <-time.After(3 * time.Minute):
		t.Fatalf("broker start still running 3 minutes after the quorum came back:\n%s", blog.String())
	}
	t.Logf("broker started at %v", time.Since(began).Round(time.Millisecond))
	if b.BrokerEpoch() == 0 {
		t.Fatal("the broker is not registered")
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr().String()), kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("after-quorum"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("produce through the broker: %v", err)
	}
}

// TestStorageErrorSaysWhy: a first produce refused by the free-space
// reserve (strata.log.min.free.bytes above the disk's free space) answers
// KAFKA_STORAGE_ERROR with a message naming the setting (Produce v8+), and
// the broker's log says why: a client that shows only the code (older
// Produce versions) leaves the operator the log.
func TestStorageErrorSaysWhy(t *testing.T) {
	var blog syncBuffer
	b := servertest.Start(t, servertest.Options{
		Settings: map[string]string{"strata.log.min.free.bytes": "9000000000000000000"},
		Logger:   slog.New(slog.NewTextHandler(&blog, nil)),
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if r, err := b.Admin().CreateTopic(ctx, 1, 1, nil, "full"); err != nil || r.Err != nil {
		t.Fatalf("create: %v %v", err, r.Err)
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 30000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "full"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = testBatch(false)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, b.Client())
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != kerr.KafkaStorageError.Code {
		t.Fatalf("produce above the reserve: code %d, want KAFKA_STORAGE_ERROR", p.ErrorCode)
	}
	if p.ErrorMessage == nil || !strings.Contains(*p.ErrorMessage, "strata.log.min.free.bytes") {
		t.Errorf("error message does not name the reserve: %v", p.ErrorMessage)
	}
	log := blog.String()
	if !strings.Contains(log, "KAFKA_STORAGE_ERROR") || !strings.Contains(log, "strata.log.min.free.bytes") {
		t.Errorf("the broker log does not say why the produce was refused:\n%s", log)
	}
}
