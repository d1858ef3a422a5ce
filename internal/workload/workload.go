// Package workload drives real Kafka clients (franz-go kgo) against any
// bootstrap list and records what they saw as a checker.History: idempotent
// producers, transactional producers that commit or abort, consumer-group
// sessions and assign-mode sessions, all reading at READ_COMMITTED. After the
// faults stop and the cluster heals, Drain reads every partition from its
// start to its last stable offset, so the checker can tell lost writes from
// lag. It knows nothing of Strata: it is a Kafka client.
//
// Use:
//
//	r, err := workload.Start(ctx, cfg)   // creates the topic, starts the clients
//	... inject faults (internal/faults), recording them with r.Recorder() ...
//	r.Stop()                              // clients finish what they were doing
//	... heal ...
//	err = r.Drain(ctx)
//	res := r.Check()                      // checker.Check with Drained set
//	workload.WriteArtifacts(dir, r.History(), res)
package workload

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/checker"
)

// Config says which clients run and how hard they push.
type Config struct {
	Brokers           []string // bootstrap list
	Topic             string
	Partitions        int32
	ReplicationFactor int16 // -1: the broker's default
	Group             string

	Producers       int // idempotent producers
	TxnProducers    int // transactional producers
	GroupConsumers  int // consumer-group sessions (subscribe)
	AssignConsumers int // assign-mode sessions, from each partition's start
	// EtlWorkers are consume-transform-produce transactional sessions
	// (kgo.GroupTransactSession): they read Topic in group Group+"-etl" and
	// write one record per input to Topic+"-etl", committing the input
	// offsets in the same transaction.
	EtlWorkers int

	// Rate is records per second per producer (transactions per second per
	// transactional producer); 0 means 100.
	Rate float64
	// InFlight bounds the records an idempotent producer has outstanding.
	InFlight int
	// AbortOneIn makes a transactional producer abort one transaction in N
	// (0: 5).
	AbortOneIn int
	// TxnTimeout is transaction.timeout.ms for the transactional producers:
	// how long a transaction left open by a killed client holds back the
	// last stable offset. 0: 10 s.
	TxnTimeout time.Duration
	// ClientOpts are added to every client (timeouts, SASL, TLS ...).
	ClientOpts []kgo.Opt
	// Logf receives progress lines (may be nil).
	Logf func(format string, args ...any)
	// Seed makes partition choices and abort decisions repeatable.
	Seed uint64
}

func (c *Config) defaults() {
	if c.Rate == 0 {
		c.Rate = 100
	}
	if c.InFlight == 0 {
		c.InFlight = 10
	}
	if c.AbortOneIn == 0 {
		c.AbortOneIn = 5
	}
	if c.TxnTimeout == 0 {
		c.TxnTimeout = 10 * time.Second
	}
	if c.Group == "" {
		c.Group = c.Topic + "-group"
	}
	if c.Partitions == 0 {
		c.Partitions = 3
	}
	if c.ReplicationFactor == 0 {
		c.ReplicationFactor = -1
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
}

// Runner is a running workload. Its goroutines are owned by it and end in
// Stop.
type Runner struct {
	cfg    Config
	rec    *checker.Recorder
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	seq    atomic.Int64 // value counter
	// writersDone is closed once every producer has finished.
	stopOnce sync.Once
	drained  bool
}

// Start creates the topic (an existing one is fine) and starts every client.
func Start(ctx context.Context, cfg Config) (*Runner, error) {
	cfg.defaults()
	if len(cfg.Brokers) == 0 || cfg.Topic == "" {
		return nil, errors.New("workload: Brokers and Topic are required")
	}
	r := &Runner{cfg: cfg, rec: checker.NewRecorder()}
	for _, topic := range r.topics() {
		if err := createTopic(ctx, cfg, topic); err != nil {
			return nil, err
		}
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	for i := 0; i < cfg.Producers; i++ {
		r.spawn(func() { r.producer(i) })
	}
	for i := 0; i < cfg.TxnProducers; i++ {
		r.spawn(func() { r.txnProducer(i) })
	}
	for i := 0; i < cfg.GroupConsumers; i++ {
		r.spawn(func() { r.groupConsumer(i) })
	}
	for i := 0; i < cfg.AssignConsumers; i++ {
		r.spawn(func() { r.assignConsumer(i) })
	}
	for i := 0; i < cfg.EtlWorkers; i++ {
		r.spawn(func() { r.etl(i) })
	}
	return r, nil
}

func (r *Runner) spawn(fn func()) {
	r.wg.Add(1)
	go func() { // owner: r; ends when r.ctx is cancelled (Stop)
		defer r.wg.Done()
		fn()
	}()
}

// Recorder is the history being recorded (faults add KindNemesis ops to it).
func (r *Runner) Recorder() *checker.Recorder { return r.rec }

// History is what was recorded so far.
func (r *Runner) History() *checker.History { return r.rec.History() }

// Stop ends every client: producers stop sending and end their transaction,
// consumers stop polling. In-flight operations are recorded with the status
// their clients report (Unknown when cut short).
func (r *Runner) Stop() {
	r.stopOnce.Do(func() {
		r.cancel()
		r.wg.Wait()
	})
}

// Check runs the checker over the history.
func (r *Runner) Check() *checker.Result {
	res := checker.Check(r.History(), checker.Options{Drained: r.drained})
	res.Note("topic", fmt.Sprintf("%s, %d partitions", r.cfg.Topic, r.cfg.Partitions))
	res.Note("clients", fmt.Sprintf("%d idempotent producers, %d transactional producers, %d group consumers, %d assign consumers, %d consume-transform-produce sessions (READ_COMMITTED)",
		r.cfg.Producers, r.cfg.TxnProducers, r.cfg.GroupConsumers, r.cfg.AssignConsumers, r.cfg.EtlWorkers))
	return res
}

func (r *Runner) value(kind string, worker int) string {
	return fmt.Sprintf("%s%d-%d", kind, worker, r.seq.Add(1))
}

func (r *Runner) client(extra ...kgo.Opt) (*kgo.Client, error) {
	opts := []kgo.Opt{
		kgo.SeedBrokers(r.cfg.Brokers...),
		kgo.RetryTimeout(10 * time.Second),
		kgo.RequestTimeoutOverhead(5 * time.Second),
	}
	opts = append(opts, r.cfg.ClientOpts...)
	opts = append(opts, extra...)
	return kgo.NewClient(opts...)
}

// pace waits for the next tick of a producer running at Rate, or returns
// false once the runner stops.
func (r *Runner) pace(tick *time.Ticker) bool {
	select {
	case <-r.ctx.Done():
		return false
	case <-tick.C:
		return true
	}
}

func (r *Runner) tp(p int32) checker.TP { return checker.TP{Topic: r.cfg.Topic, Partition: p} }

// etlTopic is where the consume-transform-produce transactions write.
func (r *Runner) etlTopic() string { return r.cfg.Topic + "-etl" }

// topics are the topics the workload writes.
func (r *Runner) topics() []string {
	if r.cfg.EtlWorkers > 0 {
		return []string{r.cfg.Topic, r.etlTopic()}
	}
	return []string{r.cfg.Topic}
}

// producer sends single records to random partitions with an idempotent
// producer (kgo's default: acks=all, idempotent), up to InFlight at once.
// After a failed record it lets the outstanding ones settle and replaces the
// client, as an application would (a broker that lost its state, a topic
// recreated under a new id, leave a client's state stale).
func (r *Runner) producer(id int) {
	proc := fmt.Sprintf("producer-%d", id)
	rng := rand.New(rand.NewPCG(r.cfg.Seed, uint64(id)))
	tick := time.NewTicker(time.Duration(float64(time.Second) / r.cfg.Rate))
	defer tick.Stop()
	for r.ctx.Err() == nil {
		r.producerClient(proc, id, rng, tick)
	}
}

// producerClient runs one client until the runner stops or a record fails.
func (r *Runner) producerClient(proc string, id int, rng *rand.Rand, tick *time.Ticker) {
	cl, err := r.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic(r.cfg.Topic),
		kgo.MaxBufferedRecords(r.cfg.InFlight), kgo.ProducerLinger(0))
	if err != nil {
		r.cfg.Logf("%s: client: %v", proc, err)
		sleepCtx(r.ctx, time.Second)
		return
	}
	var failed atomic.Bool
	sem := make(chan struct{}, r.cfg.InFlight)
	for !failed.Load() && r.pace(tick) {
		select {
		case sem <- struct{}{}:
		case <-r.ctx.Done():
		}
		if r.ctx.Err() != nil {
			break
		}
		v := r.value("p", id)
		p := rng.Int32N(r.cfg.Partitions)
		start := r.rec.Now()
		// context.Background: stopping must not cancel records already
		// handed over; Close below settles them.
		cl.Produce(context.Background(), &kgo.Record{Partition: p, Value: []byte(v)}, func(rec *kgo.Record, err error) {
			op := checker.Op{Process: proc, Kind: checker.KindSend, Idempotent: true, Start: start, End: r.rec.Now(),
				Sends: []checker.Send{{TP: r.tp(p), Value: v, Offset: checker.NoOffset}}}
			if err == nil {
				op.Status = checker.OK
				op.Sends[0].Offset = rec.Offset
			} else {
				// Retries may have written it: the fate is unknown.
				op.Status, op.Error = checker.Unknown, err.Error()
				failed.Store(true)
			}
			r.rec.Add(op)
			<-sem
		})
	}
	fctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	_ = cl.Flush(fctx)
	cl.Close() // fails what is still buffered: recorded as unknown
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// txnProducer runs transactions of 1-4 records over random partitions,
// committing or (one in AbortOneIn) aborting. After any error the client is
// replaced: the new one's InitProducerID fences the old and ends its
// transaction.
func (r *Runner) txnProducer(id int) {
	proc := fmt.Sprintf("txn-%d", id)
	rng := rand.New(rand.NewPCG(r.cfg.Seed^0x7478, uint64(id)))
	tick := time.NewTicker(time.Duration(float64(time.Second) / r.cfg.Rate))
	defer tick.Stop()
	var cl *kgo.Client
	defer func() {
		if cl != nil {
			cl.Close()
		}
	}()
	for r.pace(tick) {
		if cl == nil {
			var err error
			cl, err = r.client(kgo.TransactionalID(fmt.Sprintf("%s-txn-%d", r.cfg.Topic, id)),
				kgo.TransactionTimeout(r.cfg.TxnTimeout), kgo.RecordPartitioner(kgo.ManualPartitioner()),
				kgo.DefaultProduceTopic(r.cfg.Topic), kgo.ProducerLinger(0))
			if err != nil {
				r.cfg.Logf("%s: client: %v", proc, err)
				return
			}
		}
		if !r.oneTxn(cl, proc, id, rng) {
			cl.Close()
			cl = nil
		}
	}
}

// oneTxn runs one transaction and records it; false means the client must
// be replaced.
func (r *Runner) oneTxn(cl *kgo.Client, proc string, id int, rng *rand.Rand) bool {
	op := checker.Op{Process: proc, Kind: checker.KindTxn, Idempotent: true, Start: r.rec.Now()}
	if err := cl.BeginTransaction(); err != nil {
		r.cfg.Logf("%s: begin: %v", proc, err)
		return false
	}
	n := 1 + rng.IntN(4)
	recs := make([]*kgo.Record, n)
	for i := range recs {
		p := rng.Int32N(r.cfg.Partitions)
		v := r.value("t", id)
		recs[i] = &kgo.Record{Partition: p, Value: []byte(v)}
		op.Sends = append(op.Sends, checker.Send{TP: r.tp(p), Value: v, Offset: checker.NoOffset})
	}
	// Records are produced with a context that outlives Stop, so a stop
	// never cuts a transaction in half on the client side.
	pctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	results := cl.ProduceSync(pctx, recs...)
	produced := true
	// Results come in completion order, not the order given.
	index := map[*kgo.Record]int{}
	for i, rec := range recs {
		index[rec] = i
	}
	for _, res := range results {
		if res.Err != nil {
			produced = false
			op.Error = res.Err.Error()
			continue
		}
		op.Sends[index[res.Record]].Offset = res.Record.Offset
	}
	commit := produced && rng.IntN(r.cfg.AbortOneIn) != 0
	op.Commit = commit
	op.EndStart = r.rec.Now()
	err := cl.EndTransaction(pctx, kgo.TransactionEndTry(commit))
	op.End = r.rec.Now()
	switch {
	case err == nil && commit:
		op.Status = checker.OK
	case err == nil:
		op.Status = checker.Fail // aborted: none of it may be seen at READ_COMMITTED
	default:
		op.Status = checker.Unknown
		op.Error = err.Error()
	}
	r.rec.Add(op)
	return err == nil && produced
}

// consumeOpts are the options of every consumer session.
func (r *Runner) consumeOpts() []kgo.Opt {
	return []kgo.Opt{
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(500 * time.Millisecond),
	}
}

// groupConsumer is one consumer-group session for the whole run. Rebalances
// are recorded between polls (BlockRebalanceOnPoll).
func (r *Runner) groupConsumer(id int) {
	proc := fmt.Sprintf("group-%d", id)
	rebalance := func(what string) func(context.Context, *kgo.Client, map[string][]int32) {
		return func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			op := checker.Op{Process: proc, Kind: checker.KindRebalance, Status: checker.OK, Start: r.rec.Now(), Note: what}
			for _, p := range m[r.cfg.Topic] {
				op.Partitions = append(op.Partitions, r.tp(p))
			}
			op.End = op.Start
			r.rec.Add(op)
		}
	}
	opts := append(r.consumeOpts(),
		kgo.ConsumerGroup(r.cfg.Group), kgo.ConsumeTopics(r.cfg.Topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(rebalance("assigned")), kgo.OnPartitionsRevoked(rebalance("revoked")),
		kgo.OnPartitionsLost(rebalance("lost")),
		kgo.SessionTimeout(10*time.Second), kgo.HeartbeatInterval(time.Second))
	cl, err := r.client(opts...)
	if err != nil {
		r.cfg.Logf("%s: client: %v", proc, err)
		return
	}
	defer cl.Close()
	r.poll(cl, proc, cl.AllowRebalance)
}

// assignConsumer reads every partition from its log start (looked up, so the
// first position is known exactly).
func (r *Runner) assignConsumer(id int) {
	proc := fmt.Sprintf("assign-%d", id)
	starts, err := r.startOffsets(r.ctx, r.cfg.Topic)
	if err != nil {
		r.cfg.Logf("%s: start offsets: %v", proc, err)
		return
	}
	cl, err := r.assignAt(proc, starts)
	if err != nil {
		r.cfg.Logf("%s: client: %v", proc, err)
		return
	}
	defer cl.Close()
	r.poll(cl, proc, nil)
}

// assignAt opens an assign-mode session at the given offsets and records it.
func (r *Runner) assignAt(proc string, starts map[checker.TP]int64) (*kgo.Client, error) {
	offs := map[string]map[int32]kgo.Offset{}
	op := checker.Op{Process: proc, Kind: checker.KindAssign, Status: checker.OK, Start: r.rec.Now()}
	for _, tp := range sortedTPs(starts) {
		if offs[tp.Topic] == nil {
			offs[tp.Topic] = map[int32]kgo.Offset{}
		}
		offs[tp.Topic][tp.Partition] = kgo.NewOffset().At(starts[tp])
		op.Positions = append(op.Positions, checker.Position{TP: tp, Offset: starts[tp]})
	}
	op.End = r.rec.Now()
	r.rec.Add(op)
	return r.client(append(r.consumeOpts(), kgo.ConsumePartitions(offs))...)
}

func sortedTPs(m map[checker.TP]int64) []checker.TP {
	out := make([]checker.TP, 0, len(m))
	for tp := range m {
		out = append(out, tp)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}

// poll records every non-empty poll until the runner stops.
func (r *Runner) poll(cl *kgo.Client, proc string, after func()) {
	for r.ctx.Err() == nil {
		r.pollOnce(r.ctx, cl, proc, time.Second)
		if after != nil {
			after()
		}
	}
}

// pollOnce polls for at most wait and records what came back; it returns the
// records read.
func (r *Runner) pollOnce(ctx context.Context, cl *kgo.Client, proc string, wait time.Duration) []checker.Record {
	pctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	start := r.rec.Now()
	fs := cl.PollFetches(pctx)
	op := checker.Op{Process: proc, Kind: checker.KindPoll, Status: checker.OK, ReadCommitted: true, Start: start, End: r.rec.Now()}
	fs.EachRecord(func(rec *kgo.Record) {
		op.Reads = append(op.Reads, checker.Record{TP: checker.TP{Topic: rec.Topic, Partition: rec.Partition}, Offset: rec.Offset, Value: string(rec.Value)})
	})
	for _, fe := range fs.Errors() {
		if errors.Is(fe.Err, context.DeadlineExceeded) || errors.Is(fe.Err, context.Canceled) {
			continue
		}
		op.Error = fmt.Sprintf("%s/%d: %v", fe.Topic, fe.Partition, fe.Err)
	}
	if len(op.Reads) > 0 || op.Error != "" {
		r.rec.Add(op)
	}
	return op.Reads
}

// startOffsets looks up the log start offset of every partition of topics.
func (r *Runner) startOffsets(ctx context.Context, topics ...string) (map[checker.TP]int64, error) {
	cl, err := r.client()
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	out := map[checker.TP]int64{}
	for _, topic := range topics {
		offs, err := listed(ctx, kadm.NewClient(cl).ListStartOffsets, topic)
		if err != nil {
			return nil, fmt.Errorf("list start offsets of %s: %w", topic, err)
		}
		for p, o := range offs {
			out[checker.TP{Topic: topic, Partition: p}] = o
		}
	}
	return out, nil
}

func createTopic(ctx context.Context, cfg Config, topic string) error {
	opts := append([]kgo.Opt{kgo.SeedBrokers(cfg.Brokers...)}, cfg.ClientOpts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("workload: client: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for {
		res, err := adm.CreateTopic(ctx, cfg.Partitions, cfg.ReplicationFactor, nil, topic)
		if err == nil {
			err = res.Err
		}
		if err == nil || errors.Is(err, kerr.TopicAlreadyExists) {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("workload: create topic %s: %w", topic, err)
		}
		time.Sleep(200 * time.Millisecond) // the cluster may still be starting
	}
}

// WriteArtifacts saves a run: report.txt (readable), anomalies.json (every
// anomaly), history.jsonl (every operation, for re-checking).
func WriteArtifacts(dir string, h *checker.History, res *checker.Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("artifacts dir: %w", err)
	}
	write := func(name string, fn func(f *os.File) error) error {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		if err := fn(f); err != nil {
			f.Close()
			return fmt.Errorf("write %s: %w", name, err)
		}
		return f.Close()
	}
	if err := write("report.txt", func(f *os.File) error { return res.WriteReport(f) }); err != nil {
		return err
	}
	if err := write("anomalies.json", func(f *os.File) error { return res.WriteJSON(f) }); err != nil {
		return err
	}
	return write("history.jsonl", func(f *os.File) error { return h.WriteJSONL(f) })
}
