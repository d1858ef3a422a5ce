package compat

import (
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// TestSaramaIdempotentAcrossRestart keeps one idempotent sarama producer
// connected while the broker restarts on the same address: the broker must
// remember the producer's sequence numbers (Kafka keeps producer state
// across restarts), so the producer continues without duplicates, gaps or
// OUT_OF_ORDER_SEQUENCE_NUMBER.
func TestSaramaIdempotentAcrossRestart(t *testing.T) {
	t.Parallel()
	if targetKfake() {
		t.Skip("kfake cannot restart on the same port")
	}
	b := startBroker(t, brokerOpts{})
	const topic = "idem-restart"
	adminCreate(t, b, topic, 1, nil)
	waitTopic(t, b, topic, 1)

	cfg := saramaConfig(Op{Idempotent: true, Records: make([]Rec, 1)})
	cfg.Producer.Retry.Max = 50
	cfg.Producer.Retry.Backoff = 200 * time.Millisecond
	cfg.Metadata.Retry.Max = 50
	cfg.Metadata.Retry.Backoff = 200 * time.Millisecond
	p, err := sarama.NewSyncProducer([]string{b.Addr()}, cfg)
	if err != nil {
		t.Fatalf("sarama producer: %v", err)
	}
	defer p.Close()
	var want []Rec
	send := func(from, n int) {
		t.Helper()
		for i := from; i < from+n; i++ {
			k, v := fmt.Sprintf("k%d", i%5), fmt.Sprintf("value %d", i)
			_, off, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(k), Value: sarama.StringEncoder(v)})
			if err != nil {
				t.Fatalf("send record %d: %v", i, err)
			}
			if off != int64(i) {
				t.Errorf("record %d acknowledged at offset %d", i, off)
			}
			want = append(want, Rec{Key: strp(k), Value: strp(v), Offset: int64(i)})
		}
	}
	send(0, 20)
	b.RestartSamePort()
	send(20, 20)
	b.RestartSamePort()
	send(40, 20)
	got := saramaClient().Must(t, b.Addr(), Op{Op: opFetch, Topic: topic, Offset: -2, Max: len(want)}).Records
	checkRecords(t, "after two restarts", got, want, false)
}
