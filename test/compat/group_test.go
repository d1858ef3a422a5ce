package compat

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// memberEvent is one line a streamed group member prints.
type memberEvent struct {
	Event      string  `json:"event"`
	Partitions []int32 `json:"partitions"`
	Record     Rec     `json:"record"`
	ErrorCode  int16   `json:"error_code"`
	Error      string  `json:"error"`
}

// member is one running group-member process.
type member struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{}

	mu       sync.Mutex
	assigned []int32
	records  []Rec
	errors   []string
	closed   bool
	stderr   *lockedBuffer
}

type lockedBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b = append(l.b, p...)
	return len(p), nil
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.b)
}

// startMember runs c's driver as a streamed member of group on topic. It is
// stopped (and waited for) when the test ends at the latest.
func startMember(t *testing.T, c *Client, name, bootstrap, group, topic string) *member {
	t.Helper()
	op, _ := json.Marshal(Op{Op: "group_member", Bootstrap: bootstrap, Group: group, Topic: topic})
	args := append(append([]string{}, c.argv[1:]...), "--member", string(op))
	m := &member{name: name, cmd: exec.Command(c.argv[0], args...), done: make(chan struct{}), stderr: &lockedBuffer{}}
	m.cmd.Dir = c.dir
	m.cmd.Stderr = m.stderr
	stdout, err := m.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if m.stdin, err = m.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := m.cmd.Start(); err != nil {
		t.Fatalf("start member %s: %v", name, err)
	}
	go func() {
		defer close(m.done)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			var ev memberEvent
			if json.Unmarshal(sc.Bytes(), &ev) != nil {
				continue
			}
			m.mu.Lock()
			switch ev.Event {
			case "assigned":
				m.assigned = ev.Partitions
			case "revoked":
				m.assigned = nil
			case "record":
				m.records = append(m.records, ev.Record)
			case "error":
				m.errors = append(m.errors, fmt.Sprintf("code %d: %s", ev.ErrorCode, ev.Error))
			case "closed":
				m.closed = true
			}
			m.mu.Unlock()
		}
		_ = m.cmd.Wait()
	}()
	t.Cleanup(func() { m.stop(t) })
	return m
}

// stop asks the member to leave the group and waits for it to exit.
func (m *member) stop(t *testing.T) {
	select {
	case <-m.done:
		return
	default:
	}
	_, _ = io.WriteString(m.stdin, "stop\n")
	_ = m.stdin.Close()
	select {
	case <-m.done:
	case <-time.After(30 * time.Second):
		_ = m.cmd.Process.Kill()
		<-m.done
		t.Errorf("member %s did not leave within 30s; killed. stderr: %s", m.name, tail(m.stderr.String()))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.closed {
		t.Errorf("member %s exited without closing cleanly; stderr: %s", m.name, tail(m.stderr.String()))
	}
}

func (m *member) snapshot() (assigned []int32, records []Rec, errs []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]int32(nil), m.assigned...), append([]Rec(nil), m.records...), append([]string(nil), m.errors...)
}

// produceSpread writes n records to each partition of topic with sarama.
func produceSpread(t *testing.T, b *testBroker, topic string, partitions int32, n, first int) {
	t.Helper()
	for p := int32(0); p < partitions; p++ {
		var recs []Rec
		for i := 0; i < n; i++ {
			recs = append(recs, Rec{Key: strp(fmt.Sprintf("k-%d-%d", p, first+i)), Value: strp(fmt.Sprintf("p%d #%d", p, first+i))})
		}
		saramaClient().Must(t, b.Addr(), Op{Op: opProduce, Topic: topic, Partition: p, Records: recs})
	}
}

// committed returns the group's committed offsets for topic (kadm).
func committed(t *testing.T, b *testBroker, group, topic string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	offs, err := b.Admin(t).FetchOffsets(ctx, group)
	if err != nil {
		t.Fatalf("kadm fetch offsets %s: %v", group, err)
	}
	out := map[int32]int64{}
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic && o.Err == nil {
			out[o.Partition] = o.At
		}
	})
	return out
}

// runGroupSuite: two members split a 4-partition topic and commit what they
// read; when one leaves the other takes over after its commits; after the
// broker restarts, a new member resumes after the commits.
func runGroupSuite(t *testing.T, c *Client) {
	const (
		topic      = "group-topic"
		group      = "compat-group"
		partitions = 4
		perPart    = 10
	)
	b := startBroker(t, brokerOpts{})
	adminCreate(t, b, topic, partitions, nil)
	waitTopic(t, b, topic, partitions)
	produceSpread(t, b, topic, partitions, perPart, 0)

	a := startMember(t, c, "A", b.Addr(), group, topic)
	m2 := startMember(t, c, "B", b.Addr(), group, topic)
	waitFor(t, "two members split the partitions and read every record", 90*time.Second, func() error {
		pa, ra, ea := a.snapshot()
		pb, rb, eb := m2.snapshot()
		if len(ea)+len(eb) > 0 {
			return fmt.Errorf("member errors: %v %v", ea, eb)
		}
		if len(pa) == 0 || len(pb) == 0 {
			return fmt.Errorf("assignments A %v B %v", pa, pb)
		}
		all := append(append([]int32{}, pa...), pb...)
		sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
		if fmt.Sprint(all) != "[0 1 2 3]" {
			return fmt.Errorf("assignments A %v B %v do not split [0 1 2 3]", pa, pb)
		}
		seen := map[string]bool{}
		for _, r := range append(ra, rb...) {
			seen[fmt.Sprintf("%d/%d", r.Partition, r.Offset)] = true
		}
		if len(seen) != partitions*perPart {
			return fmt.Errorf("read %d distinct records of %d", len(seen), partitions*perPart)
		}
		return nil
	})
	// B leaves: A takes over every partition and continues after B's
	// commits (no committed record read again).
	m2.stop(t)
	_, ra, _ := a.snapshot()
	_, rb, _ := m2.snapshot()
	t.Logf("member A read %d records, B read %d", len(ra), len(rb))
	seenBefore := len(ra)
	produceSpread(t, b, topic, partitions, 5, perPart)
	waitFor(t, "the remaining member takes over every partition", 90*time.Second, func() error {
		pa, ra, ea := a.snapshot()
		if len(ea) > 0 {
			return fmt.Errorf("member errors: %v", ea)
		}
		if fmt.Sprint(pa) != "[0 1 2 3]" {
			return fmt.Errorf("A assigned %v", pa)
		}
		if got := distinct(ra[seenBefore:]); got < partitions*5 {
			return fmt.Errorf("A read %d of %d new records", got, partitions*5)
		}
		return nil
	})
	a.stop(t)
	_, ra, _ = a.snapshot()
	for _, r := range ra[seenBefore:] {
		if r.Offset < perPart {
			t.Errorf("after B left, A re-read committed record %v", r)
		}
	}
	next := int64(perPart + 5)
	want := map[int32]int64{0: next, 1: next, 2: next, 3: next}
	if got := committed(t, b, group, topic); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("committed offsets %v, want %v", got, want)
	}

	// The broker restarts: commits survive and a new member resumes.
	produceSpread(t, b, topic, partitions, 5, int(next))
	b.Restart()
	if got := committed(t, b, group, topic); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("committed offsets after restart %v, want %v", got, want)
	}
	cm := startMember(t, c, "C", b.Addr(), group, topic)
	waitFor(t, "member resumes after the committed offsets", 90*time.Second, func() error {
		_, rc, ec := cm.snapshot()
		if len(ec) > 0 {
			return fmt.Errorf("member errors: %v", ec)
		}
		if got := distinct(rc); got < partitions*5 {
			return fmt.Errorf("read %d of %d new records", got, partitions*5)
		}
		return nil
	})
	cm.stop(t)
	_, rc, _ := cm.snapshot()
	for _, r := range rc {
		if r.Offset < next {
			t.Errorf("after restart the group re-read committed record %v", r)
		}
	}
	want = map[int32]int64{0: next + 5, 1: next + 5, 2: next + 5, 3: next + 5}
	if got := committed(t, b, group, topic); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("committed offsets at the end %v, want %v", got, want)
	}
}

// distinct counts records by partition and offset.
func distinct(recs []Rec) int {
	seen := map[string]bool{}
	for _, r := range recs {
		seen[fmt.Sprintf("%d/%d", r.Partition, r.Offset)] = true
	}
	return len(seen)
}

func TestGroupKafkaJS(t *testing.T) {
	t.Parallel()
	runGroupSuite(t, kafkaJSClient(t))
}

func TestGroupConfluentKafkaPython(t *testing.T) {
	t.Parallel()
	runGroupSuite(t, confluentClient(t))
}

func TestGroupKafkaPython(t *testing.T) {
	t.Parallel()
	runGroupSuite(t, kafkaPythonClient(t))
}
