package group_test

// sarama consumer groups and kafka-go readers with GroupID against a real
// broker: partitions split between members, a killed member's partitions
// move after the session timeout, commits survive a broker restart.

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/segmentio/kafka-go"
)

// Dial makes killSwitch a sarama proxy dialer.
func (k *killSwitch) Dial(network, addr string) (net.Conn, error) {
	return k.dial(context.Background(), network, addr)
}

// saramaMember is one sarama consumer group member.
type saramaMember struct {
	cg     sarama.ConsumerGroup
	ks     *killSwitch
	cancel context.CancelFunc
	done   chan struct{}
	h      *saramaHandler
}

type saramaHandler struct {
	s     *seen
	mu    sync.Mutex
	taken int
	limit int // 0 = unlimited
}

func (h *saramaHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *saramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

// ConsumeClaim records and marks each message; sarama commits marks every
// 100ms and when the member closes. (A synchronous Commit per message costs
// a fetch long-poll: sarama shares one connection per broker.)
func (h *saramaHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for msg := range claim.Messages() {
		h.mu.Lock()
		if h.limit > 0 && h.taken >= h.limit {
			h.mu.Unlock()
			return nil
		}
		h.taken++
		h.s.add(string(msg.Value), msg.Partition, msg.Offset)
		sess.MarkMessage(msg, "")
		h.mu.Unlock()
	}
	return nil
}

func (b *testBroker) saramaMember(t *testing.T, group, topic string, s *seen, limit int) *saramaMember {
	t.Helper()
	m := &saramaMember{ks: &killSwitch{}, done: make(chan struct{}), h: &saramaHandler{s: s, limit: limit}}
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_8_0_0
	cfg.ClientID = "strata-group-sarama"
	cfg.Net.Proxy.Enable = true
	cfg.Net.Proxy.Dialer = m.ks
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Interval = 100 * time.Millisecond
	cfg.Consumer.Group.Session.Timeout = 3 * time.Second
	cfg.Consumer.Group.Heartbeat.Interval = 300 * time.Millisecond
	cfg.Consumer.Group.Rebalance.Timeout = 10 * time.Second
	cfg.Consumer.Group.Rebalance.Retry.Backoff = 200 * time.Millisecond
	cfg.Consumer.MaxWaitTime = 100 * time.Millisecond
	cfg.Metadata.Retry.Backoff = 100 * time.Millisecond
	cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyRange()}
	cg, err := sarama.NewConsumerGroup([]string{b.Addr()}, group, cfg)
	if err != nil {
		t.Fatalf("sarama group: %v", err)
	}
	m.cg = cg
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			if err := cg.Consume(ctx, []string{topic}, m.h); err != nil {
				if errors.Is(err, sarama.ErrClosedConsumerGroup) {
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	}()
	t.Cleanup(m.close)
	return m
}

func (m *saramaMember) close() {
	m.cancel()
	<-m.done
	m.cg.Close()
}

func TestSaramaGroup(t *testing.T) {
	b := startBroker(t, nil)
	const parts, n = 4, 200
	b.createTopic("t", parts, n)
	s := newSeen()
	b.saramaMember(t, "g", "t", s, 0)
	m2 := b.saramaMember(t, "g", "t", s, 0)
	adm := b.Admin()
	waitSplit(t, adm, "g", "t", 2, parts)
	waitFor(t, 30*time.Second, "all records consumed", func() bool { return s.len() == n })
	// Kill member 2 without LeaveGroup: member 1 takes every partition.
	m2.ks.kill()
	waitSplit(t, adm, "g", "t", 1, parts)
	b.produce("t", n, n+40)
	waitFor(t, 30*time.Second, "records after the kill consumed", func() bool { return s.len() == n+40 })
}

func TestSaramaCommitRestartResume(t *testing.T) {
	b := startBroker(t, nil)
	const parts, n = 3, 150
	b.createTopic("t", parts, n)
	s1 := newSeen()
	m := b.saramaMember(t, "g", "t", s1, n/3)
	waitFor(t, 30*time.Second, "a third of the records", func() bool { return s1.len() >= n/3 })
	m.close()
	b.Restart()
	s2 := newSeen()
	b.saramaMember(t, "g", "t", s2, 0)
	waitFor(t, 30*time.Second, "the rest of the records", func() bool { return s1.len()+s2.len() >= n })
	time.Sleep(300 * time.Millisecond)
	checkExactlyOnce(t, "t", n, s1, s2)
}

// kafkaGoReader runs a kafka-go Reader with GroupID, committing each
// message synchronously, until limit messages (0 = unlimited).
type kafkaGoReader struct {
	r      *kafka.Reader
	ks     *killSwitch
	cancel context.CancelFunc
	done   chan struct{}
}

func (b *testBroker) kafkaGoReader(t *testing.T, group, topic string, s *seen, limit int) *kafkaGoReader {
	t.Helper()
	kr := &kafkaGoReader{ks: &killSwitch{}, done: make(chan struct{})}
	kr.r = kafka.NewReader(kafka.ReaderConfig{
		Brokers:           []string{b.Addr()},
		GroupID:           group,
		Topic:             topic,
		Dialer:            &kafka.Dialer{ClientID: "strata-group-kafka-go", DialFunc: kr.ks.dial, Timeout: 5 * time.Second},
		MinBytes:          1,
		MaxBytes:          1 << 20,
		MaxWait:           100 * time.Millisecond,
		StartOffset:       kafka.FirstOffset,
		SessionTimeout:    3 * time.Second,
		HeartbeatInterval: 300 * time.Millisecond,
		RebalanceTimeout:  5 * time.Second,
		JoinGroupBackoff:  200 * time.Millisecond,
		ReadBackoffMin:    50 * time.Millisecond,
		ReadBackoffMax:    200 * time.Millisecond,
	})
	ctx, cancel := context.WithCancel(context.Background())
	kr.cancel = cancel
	go func() {
		defer close(kr.done)
		for taken := 0; ctx.Err() == nil && (limit == 0 || taken < limit); {
			m, err := kr.r.FetchMessage(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				time.Sleep(50 * time.Millisecond)
				continue
			}
			if err := kr.r.CommitMessages(ctx, m); err != nil {
				continue // uncommitted: it will be redelivered
			}
			taken++
			s.add(string(m.Value), int32(m.Partition), m.Offset)
		}
	}()
	t.Cleanup(kr.close)
	return kr
}

func (kr *kafkaGoReader) close() {
	kr.cancel()
	<-kr.done
	kr.r.Close()
}

func TestKafkaGoGroup(t *testing.T) {
	b := startBroker(t, nil)
	const parts, n = 4, 200
	b.createTopic("t", parts, n)
	s := newSeen()
	b.kafkaGoReader(t, "g", "t", s, 0)
	r2 := b.kafkaGoReader(t, "g", "t", s, 0)
	adm := b.Admin()
	waitSplit(t, adm, "g", "t", 2, parts)
	waitFor(t, 30*time.Second, "all records consumed", func() bool { return s.len() == n })
	r2.ks.kill()
	waitSplit(t, adm, "g", "t", 1, parts)
	b.produce("t", n, n+40)
	waitFor(t, 30*time.Second, "records after the kill consumed", func() bool { return s.len() == n+40 })
}

func TestKafkaGoCommitRestartResume(t *testing.T) {
	b := startBroker(t, nil)
	const parts, n = 3, 150
	b.createTopic("t", parts, n)
	s1 := newSeen()
	r := b.kafkaGoReader(t, "g", "t", s1, n/3)
	waitFor(t, 30*time.Second, "a third of the records", func() bool { return s1.len() >= n/3 })
	r.close()
	b.Restart()
	s2 := newSeen()
	b.kafkaGoReader(t, "g", "t", s2, 0)
	waitFor(t, 30*time.Second, "the rest of the records", func() bool { return s1.len()+s2.len() >= n })
	time.Sleep(300 * time.Millisecond)
	checkExactlyOnce(t, "t", n, s1, s2)
}
