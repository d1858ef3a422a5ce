package server_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// errorLog is a kgo.Logger that keeps the log lines naming one of the
// given errors.
type errorLog struct {
	watch []string
	mu    sync.Mutex
	seen  []string
}

func (l *errorLog) Level() kgo.LogLevel { return kgo.LogLevelDebug }

func (l *errorLog) Log(_ kgo.LogLevel, msg string, keyvals ...any) {
	line := msg + " " + fmt.Sprint(keyvals...)
	for _, w := range l.watch {
		if strings.Contains(line, w) {
			l.mu.Lock()
			l.seen = append(l.seen, line)
			l.mu.Unlock()
			return
		}
	}
}

func (l *errorLog) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.seen...)
}

// describeKIP848 renders a KIP-848 group as the coordinator describes it:
// group epoch, and per member (sorted) its id, epoch and assignment.
func describeKIP848(ctx context.Context, adm *kadm.Client, group string) (string, error) {
	dg, err := adm.DescribeConsumerGroups(ctx, group)
	if err != nil {
		return "", err
	}
	g := dg[group]
	if g.Err != nil {
		return "", g.Err
	}
	var ms []string
	for _, m := range g.Members {
		var ps []string
		for topic, parts := range m.Assignment {
			for p := range parts {
				ps = append(ps, fmt.Sprintf("%s/%d", topic, p))
			}
		}
		sort.Strings(ps)
		ms = append(ms, fmt.Sprintf("%s@%d%v", m.MemberID, m.MemberEpoch, ps))
	}
	sort.Strings(ms)
	return fmt.Sprintf("%s epoch %d assignment epoch %d: %s", g.State, g.Epoch, g.AssignmentEpoch, strings.Join(ms, " ")), nil
}

// TestClusterConsumerGroupMove: a KIP-848 group (two franz-go members with
// the consumer protocol) keeps its members through a move of its
// coordinator to another broker (the old one stops): the new coordinator
// loads the group from Kafka's consumer group records in
// __consumer_offsets (types 3-8), so it describes the same member ids,
// member epochs, group epoch and assignments; the members' heartbeats go
// on there without UNKNOWN_MEMBER_ID or FENCED_MEMBER_EPOCH, no rebalance
// happens (the group epoch does not move), committed offsets are intact
// and nothing committed is read again.
func TestClusterConsumerGroupMove(t *testing.T) {
	c, ctx, adm := moveCluster(t, 4)
	const g = "kip848-move"
	coord := coordinatorOf(t, c.Brokers[0].Addr(), 0, g)
	prod := c.Client(kgo.DefaultProduceTopic("data"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	defer prod.Close()
	produce := func(round, n int) {
		t.Helper()
		for i := 0; i < n; i++ {
			if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("%d-%d", round, i))}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	log := &errorLog{watch: []string{"UNKNOWN_MEMBER_ID", "FENCED_MEMBER_EPOCH"}}
	var mu sync.Mutex
	seen := map[string]int{}
	type member struct {
		cl   *kgo.Client
		done chan struct{}
	}
	var members []member
	for i := 0; i < 2; i++ {
		cl := c.Client(kgo.ConsumerGroup(g), kgo.ConsumeTopics("data"), kgo.ServerSideBalancer(),
			kgo.Balancers(kgo.RangeBalancer()), kgo.DisableAutoCommit(), kgo.WithLogger(log),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.ClientID(fmt.Sprintf("member-%d", i)))
		m := member{cl: cl, done: make(chan struct{})}
		members = append(members, m)
		go func() {
			defer close(m.done)
			for {
				fs := cl.PollFetches(context.Background())
				if fs.IsClientClosed() {
					return
				}
				fs.EachRecord(func(r *kgo.Record) {
					mu.Lock()
					seen[string(r.Value)]++
					mu.Unlock()
				})
				// Commit what was polled before polling again (errors
				// are retried by the next round's commit).
				_ = cl.CommitUncommittedOffsets(context.Background())
			}
		}()
	}
	defer func() {
		for _, m := range members {
			m.cl.Close()
			<-m.done
		}
	}()
	consumed := func(what string, n int) {
		t.Helper()
		eventually(t, what, func() error {
			mu.Lock()
			defer mu.Unlock()
			if len(seen) < n {
				return fmt.Errorf("%d of %d records consumed", len(seen), n)
			}
			return nil
		})
	}
	committedAtEnd := func(adm *kadm.Client) func() error {
		return func() error {
			ends, err := adm.ListEndOffsets(ctx, "data")
			if err != nil {
				return err
			}
			got, err := adm.FetchOffsets(ctx, g)
			if err != nil {
				return err
			}
			var errs []error
			ends.Each(func(o kadm.ListedOffset) {
				if n, ok := got.Lookup(o.Topic, o.Partition); !ok || n.At != o.Offset {
					errs = append(errs, fmt.Errorf("data-%d: committed %d, end %d", o.Partition, n.At, o.Offset))
				}
			})
			return errors.Join(errs...)
		}
	}
	// The group settles before any record is there to read, so no
	// partition changes hands with records read but not committed.
	var before string
	eventually(t, "a stable group of two members with two partitions each", func() error {
		d, err := describeKIP848(ctx, kadm.NewClient(brokerByID(t, c, coord).Client()), g)
		if err != nil {
			return err
		}
		if !strings.HasPrefix(d, "Stable ") || strings.Count(d, "data/") != 4 || strings.Count(d, "@") != 2 {
			return fmt.Errorf("group: %s", d)
		}
		before = d
		return nil
	})
	produce(0, 40)
	consumed("the first 40 records", 40)
	eventually(t, "the first 40 records committed", committedAtEnd(adm))

	moved := stopCoordinator(t, c, coord, g)
	after := kadm.NewClient(brokerByID(t, c, moved).Client())
	eventually(t, "the group loaded on the new coordinator", func() error {
		d, err := describeKIP848(ctx, after, g)
		if err != nil {
			return err
		}
		if d != before {
			t.Fatalf("the new coordinator describes the group as\n%s\nthe old one described it as\n%s", d, before)
		}
		return nil
	})
	eventually(t, "committed offsets intact on the new coordinator", committedAtEnd(after))
	produce(1, 40)
	consumed("the 40 records produced after the move", 80)
	eventually(t, "the last 40 records committed", committedAtEnd(after))
	mu.Lock()
	for v, n := range seen {
		if n != 1 {
			t.Errorf("record %s consumed %d times", v, n)
		}
	}
	mu.Unlock()
	d, err := describeKIP848(ctx, after, g)
	if err != nil {
		t.Fatal(err)
	}
	if d != before {
		t.Fatalf("the group changed after the move (a member rejoined or was fenced):\n%s\nbefore the move:\n%s", d, before)
	}
	if lines := log.lines(); len(lines) > 0 {
		t.Fatalf("members got %d errors a coordinator move must not cause, first: %s", len(lines), lines[0])
	}
}
