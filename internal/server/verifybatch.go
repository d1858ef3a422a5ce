package server

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/txn"
)

// Transactional produce verification with coordinators on other brokers,
// batched as Kafka's AddPartitionsToTxnManager batches it (KIP-890 part 1):
// a produce request's partitions that need verification go to the
// transaction's coordinator together, one AddPartitionsToTxn v4 VerifyOnly
// carries every transaction waiting for the same coordinator broker, and
// at most one such request is in flight per broker: verifications that
// arrive meanwhile wait and go together in the next one. Kafka sends them
// from one inter-broker thread; here the first caller to find no request
// in flight sends, and after each answer hands the sending over to the
// first caller still waiting, so no goroutine is left to own.

// verifyTimeout bounds one AddPartitionsToTxn VerifyOnly round trip.
const verifyTimeout = 10 * time.Second

// verifyBatcher holds the verifications waiting per coordinator broker.
type verifyBatcher struct {
	mu    sync.Mutex
	nodes map[int32]*verifyQueue
	// requests and partitions count what was sent (Kafka's
	// AddPartitionsToTxnManager has VerificationTimeMs and
	// VerificationFailureRate; these show the batching).
	requests, partitions prometheus.Counter
}

func newVerifyBatcher() *verifyBatcher {
	return &verifyBatcher{
		requests: prometheus.NewCounter(prometheus.CounterOpts{Name: "strata_txn_verify_requests_total",
			Help: "AddPartitionsToTxn VerifyOnly requests sent to transaction coordinators on other brokers (KIP-890 part 1)."}),
		partitions: prometheus.NewCounter(prometheus.CounterOpts{Name: "strata_txn_verify_partitions_total",
			Help: "Partitions verified with transaction coordinators on other brokers, over all requests."}),
	}
}

// Describe implements prometheus.Collector.
func (b *verifyBatcher) Describe(ch chan<- *prometheus.Desc) {
	b.requests.Describe(ch)
	b.partitions.Describe(ch)
}

// Collect implements prometheus.Collector.
func (b *verifyBatcher) Collect(ch chan<- prometheus.Metric) {
	b.requests.Collect(ch)
	b.partitions.Collect(ch)
}

// verifyQueue is one coordinator broker's: whether a request is in flight
// and the verifications waiting for the next one.
type verifyQueue struct {
	inflight bool
	waiting  []*verifyCall
}

// verifyCall is one caller's verification: a transaction's partitions,
// answered on done (send: this caller sends the next request).
type verifyCall struct {
	id    string
	pid   int64
	epoch int16
	parts []txn.TopicPartition
	errs  []error
	done  chan bool // true: you send; false: errs is filled
}

// verifyBatched verifies parts of transaction id (producer pid, epoch) with its
// coordinator, broker node, and returns each partition's error.
func (s *Server) verifyBatched(ctx context.Context, node int32, id string, pid int64, epoch int16, parts []txn.TopicPartition) []error {
	b := s.coord.verify
	call := &verifyCall{id: id, pid: pid, epoch: epoch, parts: parts, done: make(chan bool, 1)}
	b.mu.Lock()
	if b.nodes == nil {
		b.nodes = map[int32]*verifyQueue{}
	}
	q := b.nodes[node]
	if q == nil {
		q = &verifyQueue{}
		b.nodes[node] = q
	}
	q.waiting = append(q.waiting, call)
	send := !q.inflight
	q.inflight = true
	b.mu.Unlock()
	if !send {
		send = <-call.done
	}
	for send {
		// This caller sends what waits for node, its own call among it
		// unless an earlier request answered it.
		b.mu.Lock()
		batch, rest := takeVerifyBatch(q.waiting)
		q.waiting = rest
		b.mu.Unlock()
		s.sendVerify(ctx, node, batch)
		for _, c := range batch {
			if c != call {
				c.done <- false
			}
		}
		b.mu.Lock()
		answered := call.errs != nil
		switch {
		case len(q.waiting) == 0:
			q.inflight = false
			send = false
		case answered:
			// Hand the sending to the first caller waiting.
			q.waiting[0].done <- true
			send = false
		}
		b.mu.Unlock()
	}
	return call.errs
}

// takeVerifyBatch splits the waiting calls into those one request carries
// and those left for the next: a request names each transactional id once,
// so calls of one id at the same producer id and epoch go together (their
// partitions merged), and one at another producer id or epoch waits
// (Kafka's addTxnData answers a fenced one at once; here the coordinator
// does, in the next request).
func takeVerifyBatch(waiting []*verifyCall) (batch, rest []*verifyCall) {
	type prod struct {
		pid   int64
		epoch int16
	}
	ids := map[string]prod{}
	for _, c := range waiting {
		if p, ok := ids[c.id]; ok && p != (prod{c.pid, c.epoch}) {
			rest = append(rest, c)
			continue
		}
		ids[c.id] = prod{c.pid, c.epoch}
		batch = append(batch, c)
	}
	return batch, rest
}

// sendVerify sends one AddPartitionsToTxn v4 (VerifyOnly) for calls to
// broker node and fills every call's errs; a failed request fails every
// partition with the retriable COORDINATOR_NOT_AVAILABLE (the producer
// sees NOT_ENOUGH_REPLICAS, verifyProduceError).
func (s *Server) sendVerify(ctx context.Context, node int32, calls []*verifyCall) {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = 4
	txns := map[string]int{}
	for _, c := range calls {
		c.errs = make([]error, len(c.parts))
		i, ok := txns[c.id]
		if !ok {
			i = len(req.Transactions)
			txns[c.id] = i
			tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
			tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tx.VerifyOnly = c.id, c.pid, c.epoch, true
			req.Transactions = append(req.Transactions, tx)
		}
		tx := &req.Transactions[i]
		for _, tp := range c.parts {
			addVerifyPartition(tx, tp)
		}
	}
	b := s.coord.verify
	b.requests.Inc()
	for _, tx := range req.Transactions {
		for _, tt := range tx.Topics {
			b.partitions.Add(float64(len(tt.Partitions)))
		}
	}
	rctx, cancel := context.WithTimeout(ctx, verifyTimeout)
	defer cancel()
	kresp, err := s.peerRequest(rctx, node, connVerify, req)
	fail := func(err error) {
		for _, c := range calls {
			for i := range c.errs {
				if c.errs[i] == nil {
					c.errs[i] = err
				}
			}
		}
	}
	if err != nil {
		fail(fmt.Errorf("verify with the transaction coordinator, broker %d: %v: %w", node, err, kerr.CoordinatorNotAvailable))
		return
	}
	resp := kresp.(*kmsg.AddPartitionsToTxnResponse)
	if e := kerr.ErrorForCode(resp.ErrorCode); e != nil {
		fail(fmt.Errorf("verify with the transaction coordinator, broker %d: %w", node, e))
		return
	}
	type key struct {
		id string
		tp txn.TopicPartition
	}
	codes := map[key]int16{}
	for _, rt := range resp.Transactions {
		for _, rtt := range rt.Topics {
			for _, rp := range rtt.Partitions {
				codes[key{rt.TransactionalID, txn.TopicPartition{Topic: rtt.Topic, Partition: rp.Partition}}] = rp.ErrorCode
			}
		}
	}
	for _, c := range calls {
		for i, tp := range c.parts {
			code, ok := codes[key{c.id, tp}]
			switch {
			case !ok:
				c.errs[i] = fmt.Errorf("the coordinator of %s did not answer for %s-%d: %w", c.id, tp.Topic, tp.Partition, kerr.CoordinatorNotAvailable)
			case code != 0:
				c.errs[i] = fmt.Errorf("%s-%d in the transaction of %s: %w", tp.Topic, tp.Partition, c.id, kerr.ErrorForCode(code))
			}
		}
	}
}

// addVerifyPartition adds tp to tx's topics (once).
func addVerifyPartition(tx *kmsg.AddPartitionsToTxnRequestTransaction, tp txn.TopicPartition) {
	for i := range tx.Topics {
		if tx.Topics[i].Topic == tp.Topic {
			for _, p := range tx.Topics[i].Partitions {
				if p == tp.Partition {
					return
				}
			}
			tx.Topics[i].Partitions = append(tx.Topics[i].Partitions, tp.Partition)
			return
		}
	}
	tt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
	tt.Topic, tt.Partitions = tp.Topic, []int32{tp.Partition}
	tx.Topics = append(tx.Topics, tt)
}
