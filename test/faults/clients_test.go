package faults

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/faults"
)

// event is one line a fault-test client prints (test/faults/clients/*), or
// one an in-process client (sarama) records.
type event struct {
	Event      string  `json:"event"` // assigned, revoked, record, committed, txn, send, ack, error, exit, closed
	TS         int64   `json:"ts"`    // wall clock, microseconds since the Unix epoch
	Partition  int32   `json:"partition"`
	Offset     int64   `json:"offset"`
	Partitions []int32 `json:"partitions"`
	Value      string  `json:"value"`
	Status     string  `json:"status"` // ack: ok, fail, unknown
	Count      int     `json:"count"`
	ErrorCode  int16   `json:"error_code"`
	Error      string  `json:"error"`
	who        string  // the client incarnation that printed it, set on receipt
}

// nowMicros is the wall clock as the clients stamp their events.
func nowMicros() int64 { return time.Now().UnixMicro() }

// eventLog collects every client's events in arrival order.
type eventLog struct {
	mu  sync.Mutex
	all []event
}

func (l *eventLog) add(ev event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all = append(l.all, ev)
}

func (l *eventLog) snapshot() []event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]event(nil), l.all...)
}

// count counts the events of one kind.
func (l *eventLog) count(kind string) int {
	n := 0
	for _, ev := range l.snapshot() {
		if ev.Event == kind {
			n++
		}
	}
	return n
}

// clientOp configures one client role (the JSON the scripts take).
type clientOp struct {
	Bootstrap       string `json:"bootstrap"`
	Group           string `json:"group,omitempty"`
	Topic           string `json:"topic"`
	Out             string `json:"out,omitempty"`
	TransactionalID string `json:"transactional_id,omitempty"`
	Partitions      int    `json:"partitions,omitempty"`
	Count           int    `json:"count,omitempty"`
	Prefix          string `json:"prefix,omitempty"`
	IntervalMs      int    `json:"interval_ms,omitempty"`
}

// role runs one client until ctx is done (then it leaves cleanly) or it
// fails; emit records its events.
type role func(ctx context.Context, emit func(event)) error

// faultClient is one Kafka client library with the roles the tests use
// (nil when the client has none).
type faultClient struct {
	name                      string
	member, pipeline, produce func(clientOp) role
	// groupType is the ListGroups type (KIP-848) the members' group must
	// have, when the test checks it ("consumer" for the consumer protocol).
	groupType string
}

// scriptRole runs a client script (argv + role + op as JSON) as a child
// process: its stdout lines are its events; at ctx's end it is told to stop
// on stdin and given 30 s to leave its group.
func scriptRole(argv, env []string, name string, op clientOp) role {
	return func(ctx context.Context, emit func(event)) error {
		js, _ := json.Marshal(op)
		cmd := exec.Command(argv[0], append(append(append([]string{}, argv[1:]...), name), string(js))...)
		cmd.Env = append(os.Environ(), env...)
		var stderr strings.Builder
		var mu sync.Mutex
		cmd.Stderr = writerFunc(func(p []byte) (int, error) {
			mu.Lock()
			defer mu.Unlock()
			if stderr.Len() < 64<<10 {
				stderr.Write(p)
			}
			return len(p), nil
		})
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return err
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return err
		}
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("start %s: %w", argv[len(argv)-1], err)
		}
		stopped := make(chan struct{})
		go func() { // owned: ends when the process does
			select {
			case <-ctx.Done():
				_, _ = io.WriteString(stdin, "stop\n")
				_ = stdin.Close()
				select {
				case <-time.After(30 * time.Second):
					_ = cmd.Process.Kill()
				case <-stopped:
				}
			case <-stopped:
			}
		}()
		var exit *event
		lastErr := ""
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			var ev event
			if json.Unmarshal(sc.Bytes(), &ev) != nil {
				continue
			}
			switch ev.Event {
			case "exit":
				exit = &ev
			case "error":
				lastErr = ev.Error
			}
			emit(ev)
		}
		werr := cmd.Wait()
		close(stopped)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case exit != nil:
			return fmt.Errorf("exited: code %d: %s (last error: %s)", exit.ErrorCode, exit.Error, lastErr)
		case ctx.Err() == nil:
			return fmt.Errorf("exited (%v) unasked; stderr: %s", werr, tailString(stderr.String(), 2000))
		}
		return nil
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func tailString(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// confluentFaults is confluent-kafka-python (librdkafka) driving
// clients/confluent_faults.py with Debian's python3-confluent-kafka.
func confluentFaults(t *testing.T) faultClient {
	t.Helper()
	py := "/usr/bin/python3"
	if out, err := exec.Command(py, "-c", "import confluent_kafka").CombinedOutput(); err != nil {
		t.Fatalf("CLIENT MISSING: %s cannot import confluent_kafka (scripts/test.sh installs python3-confluent-kafka): %v %s", py, err, out)
	}
	script, _ := filepath.Abs(filepath.Join("clients", "confluent_faults.py"))
	mk := func(name string) func(clientOp) role {
		return func(op clientOp) role { return scriptRole([]string{py, script}, nil, name, op) }
	}
	return faultClient{name: "confluent-kafka-python", member: mk("member"), pipeline: mk("pipeline"), produce: mk("produce")}
}

// kafkajsFaults is kafkajs driving clients/kafkajs_faults.js with the
// kafkajs of test/compat/node (installed by scripts/test.sh).
func kafkajsFaults(t *testing.T) faultClient {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("CLIENT MISSING: node (scripts/test.sh installs nodejs): %v", err)
	}
	modules, _ := filepath.Abs(filepath.Join("..", "compat", "node", "node_modules"))
	if _, err := os.Stat(filepath.Join(modules, "kafkajs", "package.json")); err != nil {
		t.Fatalf("CLIENT MISSING: kafkajs in %s (scripts/test.sh runs npm install there): %v", modules, err)
	}
	script, _ := filepath.Abs(filepath.Join("clients", "kafkajs_faults.js"))
	mk := func(name string) func(clientOp) role {
		return func(op clientOp) role {
			return scriptRole([]string{node, script}, []string{"NODE_PATH=" + modules}, name, op)
		}
	}
	return faultClient{name: "kafkajs", member: mk("member"), pipeline: mk("pipeline"), produce: mk("produce")}
}

// supervisor runs roles, each restarted after it fails (a new process, a
// new group member, a new producer: what an application's supervisor
// does), until stop.
type supervisor struct {
	t      *testing.T
	log    *eventLog
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	fails  []string
}

func newSupervisor(t *testing.T, log *eventLog) *supervisor {
	ctx, cancel := context.WithCancel(context.Background())
	s := &supervisor{t: t, log: log, ctx: ctx, cancel: cancel}
	t.Cleanup(func() {
		s.stop()
		if t.Failed() { // what the clients printed last
			evs := log.snapshot()
			for _, ev := range evs[max(0, len(evs)-30):] {
				t.Logf("%s: %s p%d@%d %v %s %s", ev.who, ev.Event, ev.Partition, ev.Offset, ev.Partitions, ev.Status, ev.Error)
			}
		}
	})
	return s
}

// run starts r as name (incarnations name#1, name#2, ...), at most ten
// times.
func (s *supervisor) run(name string, r role) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for inc := 1; s.ctx.Err() == nil; inc++ {
			who := fmt.Sprintf("%s#%d", name, inc)
			err := r(s.ctx, func(ev event) {
				ev.who = who
				if os.Getenv("STRATA_FAULTS_EVENTS") == "1" { // debugging: every event as it comes
					s.t.Logf("%s: %s p%d@%d %v %s %s", ev.who, ev.Event, ev.Partition, ev.Offset, ev.Partitions, ev.Status, ev.Error)
				}
				s.log.add(ev)
			})
			if s.ctx.Err() != nil {
				return
			}
			s.mu.Lock()
			s.fails = append(s.fails, fmt.Sprintf("%s: %v", who, err))
			s.mu.Unlock()
			if inc >= 10 {
				s.t.Errorf("%s ended: %v; %d failures, not starting it again", who, err, inc)
				return
			}
			s.t.Logf("%s ended: %v; starting it again", who, err)
			select {
			case <-s.ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
}

// stop tells every role to stop and waits for them.
func (s *supervisor) stop() {
	s.cancel()
	s.wg.Wait()
}

// restarts lists the roles' failures (each followed by a restart).
func (s *supervisor) restarts() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.fails...)
}

// killer kills brokers with SIGKILL and restarts them in the background;
// wait returns once every restart finished.
type killer struct {
	t     *testing.T
	procs []*faults.Proc
	wg    sync.WaitGroup
}

// kill kills procs[i] and starts it again at once (it waits for its old
// registration to lapse before serving, docs/cluster.md). It returns the
// wall-clock time just before the signal.
func (k *killer) kill(ctx context.Context, i int, why string) int64 {
	k.t.Helper()
	p := k.procs[i]
	k.t.Logf("kill -9 %s (%s)", p.Name(), why)
	at := nowMicros()
	if err := p.Kill(ctx); err != nil {
		k.t.Fatal(err)
	}
	k.wg.Add(1)
	go func() {
		defer k.wg.Done()
		if err := p.Start(ctx); err != nil {
			k.t.Errorf("restart %s: %v", p.Name(), err)
		}
	}()
	return at
}

func (k *killer) wait() { k.wg.Wait() }

// findCoordinator waits for the index of the broker coordinating key.
func findCoordinator(t *testing.T, ctx context.Context, addrs []string, typ int8, key string) int {
	t.Helper()
	for ctx.Err() == nil {
		if i := coordinatorIndex(ctx, addrs, typ, key); i >= 0 {
			return i
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("no coordinator for %q: %v", key, ctx.Err())
	return -1
}

// waitUntil polls cond every 200 ms until it holds; it fails the test with
// what cond last said when ctx ends first.
func waitUntil(t *testing.T, ctx context.Context, what string, cond func() error) {
	t.Helper()
	for {
		err := cond()
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not reached: %v", what, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// produceValues writes values round-robin over topic's partitions with an
// idempotent acks=all franz-go producer.
func produceValues(t *testing.T, ctx context.Context, addrs []string, topic string, values []string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.RecordDeliveryTimeout(90*time.Second),
		kgo.ProducerBatchCompression(kgo.NoCompression()), // kafkajs reads no snappy
		kgo.MetadataMinAge(250*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, v := range values {
		cl.Produce(ctx, &kgo.Record{Value: []byte(v)}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce %s: %v", v, err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// endOffsets lists topic's end offsets (high watermarks) per partition.
func endOffsets(ctx context.Context, admin *kadm.Client, topic string) (map[int32]int64, error) {
	l, err := admin.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	var errs []error
	l.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			errs = append(errs, o.Err)
		}
		out[o.Partition] = o.Offset
	})
	return out, errors.Join(errs...)
}

// groupOffsets is group's committed offsets of topic per partition.
func groupOffsets(ctx context.Context, admin *kadm.Client, group, topic string) (map[int32]int64, error) {
	offs, err := admin.FetchOffsets(ctx, group)
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	var errs []error
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic != topic {
			return
		}
		if o.Err != nil {
			errs = append(errs, o.Err)
		}
		out[o.Partition] = o.At
	})
	return out, errors.Join(errs...)
}

// caughtUp is nil when group has committed every partition of topic to its
// end.
func caughtUp(ctx context.Context, admin *kadm.Client, group, topic string) error {
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ends, err := endOffsets(qctx, admin, topic)
	if err != nil {
		return err
	}
	got, err := groupOffsets(qctx, admin, group, topic)
	if err != nil {
		return err
	}
	for p, end := range ends {
		if got[p] != end {
			return fmt.Errorf("committed %v, ends %v", got, ends)
		}
	}
	return nil
}

// newAdmin is a franz-go admin client on the cluster, closed with the test.
func newAdmin(t *testing.T, addrs []string) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.MetadataMinAge(250*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// createTopics creates each topic with partitions partitions, replicated
// three times (the cluster's default min.insync.replicas=2).
func createTopics(t *testing.T, ctx context.Context, admin *kadm.Client, partitions int32, topics ...string) {
	t.Helper()
	for _, topic := range topics {
		r, err := admin.CreateTopic(ctx, partitions, 3, nil, topic)
		if err == nil {
			err = r.Err
		}
		if err != nil {
			t.Fatalf("create %s: %v", topic, err)
		}
	}
}
