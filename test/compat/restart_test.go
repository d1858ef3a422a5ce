package compat

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
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

// session is a long-lived driver process running one Op per line.
type session struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    *bufio.Scanner
	stderr *lockedBuffer
}

func startSession(t *testing.T, c *Client) *session {
	t.Helper()
	args := append(append([]string{}, c.argv[1:]...), "--session")
	s := &session{cmd: exec.Command(c.argv[0], args...), stderr: &lockedBuffer{}}
	s.cmd.Dir = c.dir
	s.cmd.Stderr = s.stderr
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if s.stdin, err = s.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start %s session: %v", c.Name, err)
	}
	s.out = bufio.NewScanner(stdout)
	s.out.Buffer(make([]byte, 1<<20), 16<<20)
	t.Cleanup(func() {
		_ = s.stdin.Close()
		done := make(chan struct{})
		go func() { _ = s.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = s.cmd.Process.Kill()
			<-done
		}
	})
	return s
}

// do runs one op in the session. A result must arrive within opTimeout.
func (s *session) do(t *testing.T, bootstrap string, op Op) Result {
	t.Helper()
	op.Bootstrap = bootstrap
	line, _ := json.Marshal(op)
	if _, err := s.stdin.Write(append(line, '\n')); err != nil {
		t.Fatalf("session write: %v; stderr: %s", err, tail(s.stderr.String()))
	}
	got := make(chan bool, 1)
	go func() { got <- s.out.Scan() }()
	select {
	case ok := <-got:
		if !ok {
			t.Fatalf("session ended; stderr: %s", tail(s.stderr.String()))
		}
	case <-time.After(opTimeout):
		_ = s.cmd.Process.Kill()
		t.Fatalf("session op %s: no result within %v; stderr: %s", op.Op, opTimeout, tail(s.stderr.String()))
	}
	var r Result
	if err := json.Unmarshal(s.out.Bytes(), &r); err != nil {
		t.Fatalf("session output %q: %v", s.out.Text(), err)
	}
	return r
}

// runIdempotentAcrossRestart keeps one idempotent producer of a process
// client alive while the broker restarts twice on the same address.
func runIdempotentAcrossRestart(t *testing.T, c *Client) {
	if targetKfake() {
		t.Skip("kfake cannot restart on the same port")
	}
	b := startBroker(t, brokerOpts{})
	const topic = "idem-restart"
	adminCreate(t, b, topic, 1, nil)
	waitTopic(t, b, topic, 1)
	s := startSession(t, c)
	var want []Rec
	for round := 0; round < 3; round++ {
		if round > 0 {
			b.RestartSamePort()
		}
		var in []Rec
		for i := 0; i < 20; i++ {
			n := round*20 + i
			r := Rec{Key: strp(fmt.Sprintf("k%d", n%5)), Value: strp(fmt.Sprintf("value %d", n)), Offset: int64(n)}
			in = append(in, r)
			want = append(want, r)
		}
		r := s.do(t, b.Addr(), Op{Op: opProduce, Topic: topic, Records: in, Idempotent: true})
		if r.ErrorCode != 0 {
			t.Fatalf("round %d: idempotent produce after restart: code %d: %s", round, r.ErrorCode, r.Error)
		}
		for i, o := range r.Offsets {
			if o != int64(round*20+i) {
				t.Errorf("round %d: record %d acknowledged at offset %d", round, round*20+i, o)
				break
			}
		}
	}
	got := c.Must(t, b.Addr(), Op{Op: opFetch, Topic: topic, Offset: -2, Max: len(want)}).Records
	checkRecords(t, c.Name+" after two restarts", got, want, false)
}

func TestConfluentIdempotentAcrossRestart(t *testing.T) {
	t.Parallel()
	runIdempotentAcrossRestart(t, confluentClient(t))
}

func TestKafkaJSIdempotentAcrossRestart(t *testing.T) {
	t.Parallel()
	runIdempotentAcrossRestart(t, kafkaJSClient(t))
}
