package faults

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

// saramaFaults is IBM/sarama, in-process, with the same roles as the
// client scripts (events stamped with the same wall clock).
func saramaFaults() faultClient {
	return faultClient{name: "sarama", member: saramaMember, pipeline: saramaPipeline, produce: saramaProduce}
}

func saramaConfig() *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_8_0_0
	cfg.ClientID = "strata-faults-sarama"
	cfg.Metadata.RefreshFrequency = time.Second
	cfg.Metadata.Retry.Max = 30
	cfg.Metadata.Retry.Backoff = 250 * time.Millisecond
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Enable = false
	cfg.Consumer.Group.Session.Timeout = 10 * time.Second
	cfg.Consumer.Group.Heartbeat.Interval = 500 * time.Millisecond
	cfg.Consumer.Return.Errors = true
	cfg.Consumer.MaxWaitTime = 200 * time.Millisecond
	return cfg
}

func saramaEmitErr(emit func(event), what string, err error) {
	var kerr sarama.KError
	code := int16(-1)
	if errors.As(err, &kerr) {
		code = int16(kerr)
	}
	emit(event{Event: "error", TS: nowMicros(), ErrorCode: code, Error: what + ": " + err.Error()})
}

// saramaMember is a consumer group member that commits each record with an
// OffsetCommit request of its generation (sarama's session.Commit reports
// no outcome) and records each acknowledged commit.
func saramaMember(op clientOp) role {
	return func(ctx context.Context, emit func(event)) error {
		client, err := sarama.NewClient(strings.Split(op.Bootstrap, ","), saramaConfig())
		if err != nil {
			return fmt.Errorf("client: %w", err)
		}
		defer client.Close()
		g, err := sarama.NewConsumerGroupFromClient(op.Group, client)
		if err != nil {
			return fmt.Errorf("group: %w", err)
		}
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { // owned: ends when g is closed
			defer wg.Done()
			for err := range g.Errors() {
				saramaEmitErr(emit, "group", err)
			}
		}()
		h := &saramaMemberHandler{client: client, op: op, emit: emit}
		for ctx.Err() == nil {
			if err := g.Consume(ctx, []string{op.Topic}, h); err != nil && ctx.Err() == nil {
				saramaEmitErr(emit, "consume", err)
				time.Sleep(250 * time.Millisecond)
			}
		}
		err = g.Close()
		wg.Wait()
		emit(event{Event: "closed", TS: nowMicros()})
		return err
	}
}

type saramaMemberHandler struct {
	client sarama.Client
	op     clientOp
	emit   func(event)
}

func (h *saramaMemberHandler) Setup(s sarama.ConsumerGroupSession) error {
	ps := append([]int32(nil), s.Claims()[h.op.Topic]...)
	sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	h.emit(event{Event: "assigned", TS: nowMicros(), Partitions: ps})
	return nil
}

func (h *saramaMemberHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *saramaMemberHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for m := range c.Messages() {
		h.emit(event{Event: "record", TS: nowMicros(), Partition: m.Partition, Offset: m.Offset, Value: string(m.Value)})
		if err := h.commitRetrying(s, m.Partition, m.Offset+1); err != nil {
			continue
		}
		h.emit(event{Event: "committed", TS: nowMicros(), Partition: m.Partition, Offset: m.Offset + 1})
	}
	return nil
}

// commitRetrying commits offset for partition p, retrying every 250 ms
// while the failure is retriable (the coordinator moving or loading, the
// connection to it lost) and the session lasts, as Java's commitSync
// retries retriable errors until its timeout. Each failure is printed.
// Without the retry, a member that read the last records of a partition
// while the coordinator moved (each commit answered NOT_COORDINATOR or
// COORDINATOR_LOAD_IN_PROGRESS) left them uncommitted for good: sarama
// keeps its session through a coordinator move (the new coordinator keeps
// the generation, as Kafka's), so no rebalance hands the partition to a
// member that would read and commit them again.
func (h *saramaMemberHandler) commitRetrying(s sarama.ConsumerGroupSession, p int32, offset int64) error {
	for {
		err := h.commit(s, p, offset)
		if err == nil {
			return nil
		}
		saramaEmitErr(h.emit, "commit", err)
		if !saramaCommitRetriable(err) {
			return err
		}
		select {
		case <-s.Context().Done():
			return err
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// saramaCommitRetriable reports whether an OffsetCommit failure is worth
// retrying in the same generation: a connection error, or the coordinator
// moving (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE), loading
// (COORDINATOR_LOAD_IN_PROGRESS) or timing out (REQUEST_TIMED_OUT).
// ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID and REBALANCE_IN_PROGRESS end the
// retries: the partition may belong to another member now.
func saramaCommitRetriable(err error) bool {
	var kerr sarama.KError
	if !errors.As(err, &kerr) {
		return true // no Kafka error code: the request did not get an answer
	}
	switch kerr {
	case sarama.ErrNotCoordinatorForConsumer, sarama.ErrConsumerCoordinatorNotAvailable,
		sarama.ErrOffsetsLoadInProgress, sarama.ErrRequestTimedOut:
		return true
	}
	return false
}

// commit sends OffsetCommit v2 for the session's generation to the group's
// coordinator.
func (h *saramaMemberHandler) commit(s sarama.ConsumerGroupSession, p int32, offset int64) error {
	coord, err := h.client.Coordinator(h.op.Group)
	if err != nil {
		return err
	}
	req := &sarama.OffsetCommitRequest{Version: 2, ConsumerGroup: h.op.Group,
		ConsumerGroupGeneration: s.GenerationID(), ConsumerID: s.MemberID(), RetentionTime: -1}
	req.AddBlock(h.op.Topic, p, offset, 0, "")
	resp, err := coord.CommitOffset(req)
	if err != nil {
		_ = h.client.RefreshCoordinator(h.op.Group)
		return err
	}
	if kerr := resp.Errors[h.op.Topic][p]; kerr != sarama.ErrNoError {
		if kerr == sarama.ErrNotCoordinatorForConsumer || kerr == sarama.ErrConsumerCoordinatorNotAvailable {
			_ = h.client.RefreshCoordinator(h.op.Group)
		}
		return kerr
	}
	return nil
}

// saramaPipeline is a consume-transform-produce loop with sarama's
// transactional producer: each claim's available records go to op.Out in
// one transaction that also commits their offsets for the group
// (AddMessageToTxn). The first error ends the role (the supervisor starts
// a new one: new producer, which fences the old, and new member).
func saramaPipeline(op clientOp) role {
	return func(ctx context.Context, emit func(event)) error {
		cfg := saramaConfig()
		cfg.Consumer.IsolationLevel = sarama.ReadCommitted
		cfg.Producer.Idempotent = true
		cfg.Producer.RequiredAcks = sarama.WaitForAll
		cfg.Producer.Return.Successes = true
		cfg.Producer.Retry.Max = 20
		cfg.Producer.Retry.Backoff = 250 * time.Millisecond
		cfg.Producer.Transaction.ID = op.TransactionalID
		cfg.Producer.Transaction.Timeout = 20 * time.Second
		cfg.Producer.Transaction.Retry.Max = 40
		cfg.Producer.Transaction.Retry.Backoff = 250 * time.Millisecond
		cfg.Net.MaxOpenRequests = 1
		brokers := strings.Split(op.Bootstrap, ",")
		prod, err := sarama.NewSyncProducer(brokers, cfg)
		if err != nil {
			return fmt.Errorf("transactional producer: %w", err)
		}
		defer prod.Close()
		g, err := sarama.NewConsumerGroup(brokers, op.Group, cfg)
		if err != nil {
			return fmt.Errorf("group: %w", err)
		}
		defer g.Close()
		h := &saramaPipelineHandler{prod: prod, op: op, emit: emit, failed: make(chan struct{})}
		for ctx.Err() == nil {
			cctx, cancel := context.WithCancel(ctx)
			go func() { // owned: ends with cctx
				select {
				case <-h.failed:
					cancel()
				case <-cctx.Done():
				}
			}()
			err := g.Consume(cctx, []string{op.Topic}, h)
			cancel()
			if h.err != nil {
				return h.err
			}
			if err != nil && ctx.Err() == nil {
				saramaEmitErr(emit, "consume", err)
				time.Sleep(250 * time.Millisecond)
			}
		}
		emit(event{Event: "closed", TS: nowMicros()})
		return nil
	}
}

type saramaPipelineHandler struct {
	prod   sarama.SyncProducer
	op     clientOp
	emit   func(event)
	mu     sync.Mutex // one transaction at a time
	err    error
	failed chan struct{}
}

func (h *saramaPipelineHandler) Setup(s sarama.ConsumerGroupSession) error {
	h.emit(event{Event: "assigned", TS: nowMicros(), Partitions: s.Claims()[h.op.Topic]})
	return nil
}

func (h *saramaPipelineHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *saramaPipelineHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for m := range c.Messages() {
		batch := []*sarama.ConsumerMessage{m}
	more:
		for len(batch) < 20 {
			select {
			case m, ok := <-c.Messages():
				if !ok {
					break more
				}
				batch = append(batch, m)
			default:
				break more
			}
		}
		if err := h.txn(s, batch); err != nil {
			h.mu.Lock()
			if h.err == nil {
				h.err = err
				close(h.failed)
			}
			h.mu.Unlock()
			return err
		}
	}
	return nil
}

func (h *saramaPipelineHandler) txn(s sarama.ConsumerGroupSession, batch []*sarama.ConsumerMessage) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil {
		return h.err
	}
	if err := h.prod.BeginTxn(); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	abort := func(what string, err error) error {
		_ = h.prod.AbortTxn()
		return fmt.Errorf("%s: %w", what, err)
	}
	var msgs []*sarama.ProducerMessage
	for _, m := range batch {
		msgs = append(msgs, &sarama.ProducerMessage{Topic: h.op.Out, Key: sarama.ByteEncoder(m.Key), Value: sarama.ByteEncoder(m.Value)})
	}
	if err := h.prod.SendMessages(msgs); err != nil {
		return abort("send", err)
	}
	last := batch[len(batch)-1]
	meta := &sarama.ConsumerGroupMetadata{GroupID: h.op.Group, GenerationID: s.GenerationID(), MemberID: s.MemberID()}
	if err := h.prod.AddOffsetsToTxnWithGroupMetadata(map[string][]*sarama.PartitionOffsetMetadata{
		h.op.Topic: {{Partition: last.Partition, Offset: last.Offset + 1}}}, meta); err != nil {
		return abort("add offsets", err)
	}
	if err := h.prod.CommitTxn(); err != nil {
		return abort("commit", err)
	}
	h.emit(event{Event: "txn", TS: nowMicros(), Status: "ok", Count: len(batch)})
	return nil
}

// saramaProduce is an idempotent acks=all producer (sarama's async
// producer, one request in flight as sarama requires for idempotence)
// sending op.Count records round-robin over op.Partitions partitions, each
// outcome recorded: ok with its offset, or unknown (sarama's errors after
// retries do not say whether the record was written).
func saramaProduce(op clientOp) role {
	return func(ctx context.Context, emit func(event)) error {
		cfg := saramaConfig()
		cfg.Producer.Idempotent = true
		cfg.Producer.RequiredAcks = sarama.WaitForAll
		cfg.Producer.Return.Successes = true
		cfg.Producer.Return.Errors = true
		cfg.Producer.Retry.Max = 50
		cfg.Producer.Retry.Backoff = 250 * time.Millisecond
		cfg.Producer.Partitioner = sarama.NewManualPartitioner
		cfg.Net.MaxOpenRequests = 1
		p, err := sarama.NewAsyncProducer(strings.Split(op.Bootstrap, ","), cfg)
		if err != nil {
			return fmt.Errorf("producer: %w", err)
		}
		var wg sync.WaitGroup
		answered := make(chan struct{}, op.Count)
		wg.Add(2)
		go func() { // owned: ends when p is closed
			defer wg.Done()
			for m := range p.Successes() {
				emit(event{Event: "ack", TS: nowMicros(), Status: "ok", Value: string(m.Value.(sarama.StringEncoder)), Partition: m.Partition, Offset: m.Offset})
				answered <- struct{}{}
			}
		}()
		go func() { // owned: ends when p is closed
			defer wg.Done()
			for e := range p.Errors() {
				emit(event{Event: "ack", TS: nowMicros(), Status: "unknown", Value: string(e.Msg.Value.(sarama.StringEncoder)),
					Partition: e.Msg.Partition, Offset: -1, Error: e.Err.Error()})
				answered <- struct{}{}
			}
		}()
		sent := 0
		for i := 0; i < op.Count && ctx.Err() == nil; i++ {
			v := fmt.Sprintf("%s-%d", op.Prefix, i)
			part := int32(i % op.Partitions)
			emit(event{Event: "send", TS: nowMicros(), Value: v, Partition: part})
			p.Input() <- &sarama.ProducerMessage{Topic: op.Topic, Partition: part, Value: sarama.StringEncoder(v)}
			sent++
			if op.IntervalMs > 0 {
				time.Sleep(time.Duration(op.IntervalMs) * time.Millisecond)
			}
		}
		// Every record answered before closing: sarama's AsyncClose fails
		// the records it is still retrying (ErrShuttingDown) instead of
		// finishing them.
		for n := 0; n < sent && ctx.Err() == nil; n++ {
			select {
			case <-answered:
			case <-ctx.Done():
			}
		}
		p.AsyncClose()
		wg.Wait()
		emit(event{Event: "closed", TS: nowMicros()})
		// The test waits for "closed" and stops the role then.
		<-ctx.Done()
		return nil
	}
}
