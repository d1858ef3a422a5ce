package txn

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/transcript"
)

// TestTranscripts runs the transaction coordinator transcripts of
// testdata/*.txt (run with -rewrite to regenerate the expected output).
// Producers are named by aliases (p1, p2, ...) that remember the
// transactional id, producer id and epoch their InitProducerId returned.
// After every command the markers the coordinator had written are
// printed. Commands:
//
//	init P id=TXN [timeout=30s] [version=4] [keep]
//	                                   InitProducerId (keep: send P's producer id and epoch, KIP-360)
//	add P TOPIC:PART... [pid=N] [epoch=E] [version=3]
//	                                   AddPartitionsToTxn
//	offsets P group=G [epoch=E]        AddOffsetsToTxn v3
//	end P commit|abort [epoch=E] [version=3]
//	                                   EndTxn
//	describe TXN                       DescribeTransactions
//	missing TOPIC:PART                 the partition no longer exists
//	markers fail|ok                    writing transaction markers fails (a partition
//	                                   leader unreachable) or works again
//	advance D                          move the clock
//	tick                               the coordinator's periodic work: abort timed-out
//	                                   transactions, retry unfinished ones, expire ids
//	restart                            reload the coordinator from __transaction_state
func TestTranscripts(t *testing.T) {
	transcript.Run(t, "testdata/*.txt", func(t *testing.T) func(transcript.Command) string {
		// The periodic work runs only on tick (the harness's periods are
		// beyond any advance).
		h := newHarness(t)
		h.cfg.MaxTimeout = 15 * time.Minute
		h.restart()
		s := &txnScript{h: h, producers: map[string]*producer{}}
		return s.run
	})
}

// producer is what an alias knows of its transactional producer.
type producer struct {
	id    string
	pid   int64
	epoch int16
}

type txnScript struct {
	h         *harness
	producers map[string]*producer
}

func (s *txnScript) producer(cmd transcript.Command) *producer {
	p, ok := s.producers[cmd.Arg(0)]
	if !ok {
		cmd.Fatalf("producer %s has not run init", cmd.Arg(0))
	}
	return p
}

func (s *txnScript) run(cmd transcript.Command) string {
	h := s.h
	var out []string
	switch cmd.Name {
	case "init":
		alias := cmd.Arg(0)
		p := s.producers[alias]
		if p == nil {
			p = &producer{pid: -1, epoch: -1}
			s.producers[alias] = p
		}
		p.id = cmd.Str("id", p.id)
		pid, epoch := int64(-1), int16(-1)
		if _, ok := cmd.Opts["keep"]; ok || containsArg(cmd, "keep") {
			pid, epoch = p.pid, p.epoch
		}
		r := h.initReq(p.id, int16(cmd.Int("version", 4)), int32(cmd.Duration("timeout", 30*time.Second).Milliseconds()), pid, epoch)
		if r.ErrorCode != 0 {
			out = append(out, fmt.Sprintf("%s: init: %s", alias, transcript.ErrorName(r.ErrorCode)))
			break
		}
		p.pid, p.epoch = r.ProducerID, r.ProducerEpoch
		out = append(out, fmt.Sprintf("%s: init: producer id %d epoch %d", alias, r.ProducerID, r.ProducerEpoch))
	case "add":
		p := s.producer(cmd)
		var parts []TopicPartition
		for _, a := range cmd.Args[1:] {
			parts = append(parts, parseTP(cmd, a))
		}
		codes := h.addV(int16(cmd.Int("version", 3)), p.id, cmd.Int("pid", p.pid), int16(cmd.Int("epoch", int64(p.epoch))), parts...)
		for i, c := range codes {
			out = append(out, fmt.Sprintf("%s: add %s:%d: %s", cmd.Arg(0), parts[i].Topic, parts[i].Partition, transcript.ErrorName(c)))
		}
	case "offsets":
		p := s.producer(cmd)
		c := h.addOffsets(3, p.id, p.pid, int16(cmd.Int("epoch", int64(p.epoch))), cmd.Str("group", ""))
		out = append(out, fmt.Sprintf("%s: add offsets of %s: %s", cmd.Arg(0), cmd.Str("group", ""), transcript.ErrorName(c)))
	case "end":
		p := s.producer(cmd)
		commit := cmd.Arg(1) == "commit"
		if !commit && cmd.Arg(1) != "abort" {
			cmd.Fatalf("end wants commit or abort")
		}
		c := h.end(int16(cmd.Int("version", 3)), p.id, p.pid, int16(cmd.Int("epoch", int64(p.epoch))), commit)
		out = append(out, fmt.Sprintf("%s: end %s: %s", cmd.Arg(0), cmd.Arg(1), transcript.ErrorName(c)))
	case "describe":
		out = append(out, s.describe(cmd.Arg(0)))
	case "missing":
		tp := parseTP(cmd, cmd.Arg(0))
		h.d.set(func(d *testDeps) { d.missing[tp] = true })
	case "markers":
		var err error
		switch cmd.Arg(0) {
		case "fail":
			err = errMarkersDown
		case "ok":
		default:
			cmd.Fatalf("markers wants fail or ok")
		}
		h.d.set(func(d *testDeps) { d.markErr = err })
	case "advance":
		h.clk.Advance(cmd.ParseDuration(cmd.Arg(0)))
	case "tick":
		if n := h.c.abortTimedOut(); n > 0 {
			out = append(out, fmt.Sprintf("aborted %d timed-out transaction(s)", n))
		}
		h.c.retryUnfinished()
		if n := h.c.expireIDs(); n > 0 {
			out = append(out, fmt.Sprintf("expired %d transactional id(s)", n))
		}
	case "restart":
		h.restart()
		out = append(out, "coordinator reloaded")
	default:
		cmd.Fatalf("unknown command")
	}
	h.c.awaitCompletions() // markers are written after EndTxn is answered
	for _, m := range h.d.takeMarkers() {
		var ps []string
		for _, tp := range m.parts {
			ps = append(ps, fmt.Sprintf("%s:%d", tp.Topic, tp.Partition))
		}
		sort.Strings(ps)
		kind := "ABORT"
		if m.commit {
			kind = "COMMIT"
		}
		out = append(out, fmt.Sprintf("marker %s producer id %d epoch %d coordinator epoch %d on [%s]", kind, m.pid, m.epoch, m.coordEpoch, strings.Join(ps, " ")))
	}
	return strings.Join(out, "\n")
}

// errMarkersDown is the marker-write failure of "markers fail".
var errMarkersDown = errors.New("partition leader unreachable")

func containsArg(cmd transcript.Command, w string) bool {
	for _, a := range cmd.Args {
		if a == w {
			return true
		}
	}
	return false
}

func parseTP(cmd transcript.Command, s string) TopicPartition {
	topic, part, ok := strings.Cut(s, ":")
	var p int32
	if _, err := fmt.Sscanf(part, "%d", &p); !ok || err != nil {
		cmd.Fatalf("want TOPIC:PARTITION, got %q", s)
	}
	return TopicPartition{topic, p}
}

func (s *txnScript) describe(id string) string {
	d := s.h.describe(id)
	if d.ErrorCode != 0 {
		return fmt.Sprintf("%s: %s", id, transcript.ErrorName(d.ErrorCode))
	}
	var ps []string
	for _, t := range d.Topics {
		for _, p := range t.Partitions {
			ps = append(ps, fmt.Sprintf("%s:%d", t.Topic, p))
		}
	}
	sort.Strings(ps)
	out := fmt.Sprintf("%s: state=%s producer id %d epoch %d timeout=%s", id, d.State, d.ProducerID, d.ProducerEpoch,
		time.Duration(d.TimeoutMillis)*time.Millisecond)
	if d.StartTimestamp >= 0 {
		out += fmt.Sprintf(" started=%s", time.Duration(s.h.clk.Now().UnixMilli()-d.StartTimestamp)*time.Millisecond) + " ago"
	}
	if len(ps) > 0 {
		out += " partitions=[" + strings.Join(ps, " ") + "]"
	}
	return out
}
