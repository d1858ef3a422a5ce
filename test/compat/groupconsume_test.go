package compat

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/segmentio/kafka-go"
)

// group_consume for the in-process and kcat clients: join op.Group on
// op.Topic, read op.Max records from the committed offsets (the earliest
// when none), commit them and leave.

// saramaGroupConsume consumes with sarama's ConsumerGroup, marking each
// record and committing synchronously before the session ends.
func saramaGroupConsume(ctx context.Context, client sarama.Client, op Op) Result {
	fail := func(err error) Result { return Result{ErrorCode: saramaCode(err), Error: err.Error()} }
	g, err := sarama.NewConsumerGroupFromClient(op.Group, client)
	if err != nil {
		return fail(fmt.Errorf("new consumer group: %w", err))
	}
	defer g.Close()
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	h := &saramaGroupHandler{max: op.Max, done: cancel}
	for cctx.Err() == nil {
		if err := g.Consume(cctx, []string{op.Topic}, h); err != nil && cctx.Err() == nil {
			return fail(fmt.Errorf("consume: %w", err))
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil {
		return fail(h.err)
	}
	return Result{Records: h.recs}
}

type saramaGroupHandler struct {
	max  int
	done context.CancelFunc
	mu   sync.Mutex
	recs []Rec
	err  error
}

func (h *saramaGroupHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *saramaGroupHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *saramaGroupHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for m := range c.Messages() {
		h.mu.Lock()
		r := Rec{Partition: m.Partition, Offset: m.Offset, Timestamp: m.Timestamp.UnixMilli()}
		if m.Key != nil {
			r.Key = strp(string(m.Key))
		}
		if m.Value != nil {
			r.Value = strp(string(m.Value))
		}
		h.recs = append(h.recs, r)
		s.MarkMessage(m, "")
		full := len(h.recs) >= h.max
		h.mu.Unlock()
		if full {
			s.Commit() // synchronous with auto-commit off
			h.done()
			return nil
		}
	}
	return nil
}

// kafkaGoGroupConsume consumes with a kafka-go group Reader and commits
// the records synchronously (CommitInterval 0).
func kafkaGoGroupConsume(ctx context.Context, op Op) Result {
	fail := func(err error) Result { return Result{ErrorCode: kafkaGoCode(err), Error: err.Error()} }
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{op.Bootstrap}, GroupID: op.Group, Topic: op.Topic,
		StartOffset: kafka.FirstOffset, MaxWait: 200 * time.Millisecond,
		SessionTimeout: 10 * time.Second, HeartbeatInterval: 500 * time.Millisecond, JoinGroupBackoff: 250 * time.Millisecond})
	defer r.Close()
	var res Result
	var msgs []kafka.Message
	for len(msgs) < op.Max {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			return fail(fmt.Errorf("fetch after %d records: %w", len(msgs), err))
		}
		msgs = append(msgs, m)
		rec := Rec{Partition: int32(m.Partition), Offset: m.Offset, Timestamp: m.Time.UnixMilli()}
		if m.Key != nil {
			rec.Key = strp(string(m.Key))
		}
		if m.Value != nil {
			rec.Value = strp(string(m.Value))
		}
		res.Records = append(res.Records, rec)
	}
	if err := r.CommitMessages(ctx, msgs...); err != nil {
		return fail(fmt.Errorf("commit: %w", err))
	}
	return res
}

// kcatGroupConsume runs kcat's balanced consumer (-G): it exits after
// op.Max records and commits what it read as it closes (librdkafka's
// auto-commit of the stored offsets).
func kcatGroupConsume(ctx context.Context, path string, op Op) Result {
	args := []string{"-b", op.Bootstrap, "-G", op.Group, "-c", strconv.Itoa(op.Max), "-J",
		"-X", "auto.offset.reset=earliest", "-X", "session.timeout.ms=10000", "-X", "heartbeat.interval.ms=500", op.Topic}
	stdout, stderr, err := kcatRun(ctx, path, nil, args...)
	if err != nil {
		return kcatFail(args, stderr, err)
	}
	var res Result
	sc := bufio.NewScanner(strings.NewReader(stdout))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var m struct {
			Partition int32   `json:"partition"`
			Offset    int64   `json:"offset"`
			Ts        int64   `json:"ts"`
			Key       *string `json:"key"`
			Payload   *string `json:"payload"`
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			return Result{ErrorCode: -1, Error: fmt.Sprintf("kcat output %q: %v", line, err)}
		}
		res.Records = append(res.Records, Rec{Key: m.Key, Value: m.Payload, Timestamp: m.Ts, Partition: m.Partition, Offset: m.Offset})
	}
	return res
}
