package console_test

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/servertest"
)

// replicatedCluster is three combined nodes (a quorum survives one stop)
// with the console of node 1 and topics whose leaders are elsewhere:
//
//   - rep: 3 partitions, replication factor 3, min.insync.replicas=2,
//     leaders 1, 2 and 3 (preferred replicas first);
//   - strict: 1 partition on 2, 3, 1 with min.insync.replicas=3 (led by 2);
//   - lone: 1 partition on node 3 only.
type replicatedCluster struct {
	c   *servertest.Cluster
	cl  *kgo.Client
	adm *kadm.Client
	w   *web
	// base is node 1's console.
	base string
}

func startReplicated(t *testing.T) *replicatedCluster {
	t.Helper()
	c := servertest.StartN(t, 3, servertest.Options{Controllers: 3, Metrics: true,
		Settings: map[string]string{"replica.lag.time.max.ms": "2000", "replica.fetch.wait.max.ms": "200"}})
	rc := &replicatedCluster{c: c, cl: c.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))}
	rc.adm = kadm.NewClient(rc.cl)
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30000
	for _, spec := range []struct {
		name   string
		parts  [][]int32
		minISR string
	}{
		{"rep", [][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}}, "2"},
		{"strict", [][]int32{{2, 3, 1}}, "3"},
		{"lone", [][]int32{{3}}, "1"},
	} {
		ct := kmsg.NewCreateTopicsRequestTopic()
		ct.Topic, ct.NumPartitions, ct.ReplicationFactor = spec.name, -1, -1
		for p, rs := range spec.parts {
			ct.ReplicaAssignment = append(ct.ReplicaAssignment, kmsg.CreateTopicsRequestTopicReplicaAssignment{Partition: int32(p), Replicas: rs})
		}
		ct.Configs = []kmsg.CreateTopicsRequestTopicConfig{{Name: "min.insync.replicas", Value: kmsg.StringPtr(spec.minISR)}}
		req.Topics = append(req.Topics, ct)
	}
	resp, err := req.RequestWith(ctxT(t), rc.cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range resp.Topics {
		if err := kerr.ErrorForCode(rt.ErrorCode); err != nil {
			t.Fatalf("create %s: %v", rt.Topic, err)
		}
	}
	_, port, err := net.SplitHostPort(c.Brokers[0].MetricsAddr())
	if err != nil {
		t.Fatal(err)
	}
	rc.base = "http://127.0.0.1:" + port
	rc.w = newWeb(t, rc.base)
	// Every replica in sync before the test looks (the brokers apply the
	// new topics asynchronously; nothing is timed).
	rc.waitPage(t, "/topics/rep", "every partition of rep in sync", func(body string) bool {
		return strings.Count(body, ">in sync<") == 3
	})
	return rc
}

// waitPage polls a console page until ok holds: the brokers apply the
// metadata and shrink ISRs asynchronously. The deadline bounds the wait;
// no duration is asserted.
func (rc *replicatedCluster) waitPage(t *testing.T, path, what string, ok func(body string) bool) string {
	t.Helper()
	var body string
	for deadline := time.Now().Add(90 * time.Second); ; {
		_, body = rc.w.get(path)
		if ok(body) {
			return body
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s never showed:\n%s", path, what, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

var (
	factRe = func(name string) *regexp.Regexp {
		return regexp.MustCompile(`<dt>` + regexp.QuoteMeta(name) + `(?: \(\d+\))?</dt><dd(?: class="bad")?>(-?\d+)`)
	}
	urpFact, minISRFact, offlineFact = factRe("Under-replicated"), factRe("Under min ISR"), factRe("Offline")
	// partRowRe is a row of the topic page's partition table: partition,
	// leader, replicas, ISR, offline replicas, state, start, end, size.
	partRowRe = regexp.MustCompile(`<tr><td class="num"><a [^>]*>(\d+)</a></td><td>(?:(\d+)|<span class="bad">none</span>)</td><td>-?\d+</td><td>([^<]*)</td><td(?: class="bad")?>([^<]*)</td><td(?: class="bad")?>([^<]*)</td><td(?: class="bad")?>([^<]*)</td><td class="num">([^<]*)</td><td class="num">([^<]*)</td><td class="num">([^<]*)</td>`)
)

func fact(re *regexp.Regexp, body string) string {
	if m := re.FindStringSubmatch(body); m != nil {
		return m[1]
	}
	return "?"
}

// TestReplicatedCluster: node 1's console over a three-node cluster whose
// topics are replicated and led by other nodes. Every page reads through
// the leaders and coordinators wherever they are (records of a partition
// led by node 2, a record produced from the page to it, offsets and
// sizes of every partition, a group's lag, each broker's own log
// directories). Then node 3 stops: the overview, the topic list and the
// topic page count the under-replicated partitions (the ISRs shrink to
// two), the one under its min.insync.replicas and the offline one (its
// only replica was node 3; a partition without a leader is offline,
// Kafka's OfflinePartitionsCount), the partition table shows each ISR without
// node 3 and node 3 as an offline replica, and the overview lists node 3
// as offline. Chromium then loads the overview and the topic page.
func TestReplicatedCluster(t *testing.T) {
	rc := startReplicated(t)
	ctx := ctxT(t)
	var recs []*kgo.Record
	for p := int32(0); p < 3; p++ {
		for i := 0; i < 5; i++ {
			recs = append(recs, &kgo.Record{Topic: "rep", Partition: p, Key: []byte(fmt.Sprintf("k%d-%d", p, i)), Value: []byte(fmt.Sprintf(`{"p":%d,"i":%d}`, p, i))})
		}
	}
	recs = append(recs, &kgo.Record{Topic: "strict", Value: []byte("strict-0")}, &kgo.Record{Topic: "lone", Value: []byte("lone-0")})
	if err := rc.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	offs := kadm.Offsets{}
	for p := int32(0); p < 3; p++ {
		offs.Add(kadm.Offset{Topic: "rep", Partition: p, At: 2, LeaderEpoch: -1})
	}
	if err := rc.adm.CommitAllOffsets(ctx, "audit", offs); err != nil {
		t.Fatalf("commit: %v", err)
	}
	w := rc.w

	t.Run("pages-read-from-leaders", func(t *testing.T) {
		rc.w.t = t
		// Partition 1 is led by node 2: the page fetches from it.
		mp := w.mustGet("/topics/rep/messages?from=start&partition=1")
		for i := 0; i < 5; i++ {
			if !strings.Contains(mp, fmt.Sprintf("k1-%d", i)) {
				t.Errorf("messages of rep/1 (led by node 2) lack k1-%d", i)
			}
		}
		all := w.mustGet("/topics/rep/messages?from=start")
		for p := 0; p < 3; p++ {
			if !strings.Contains(all, fmt.Sprintf("k%d-4", p)) {
				t.Errorf("messages of every partition lack k%d-4", p)
			}
		}
		// Produce from node 1's page to partition 1, led by node 2.
		code, body := w.post("/topics/rep/produce", url.Values{"partition": {"1"}, "key": {"from-page"}, "value": {"to node 2"}})
		if msg, isErr := flashOf(body); code != 200 || isErr || !strings.HasPrefix(msg, "Produced to partition 1") {
			t.Fatalf("produce to rep/1 from node 1's page: %d %q", code, msg)
		}
		if mp := w.mustGet("/topics/rep/messages?from=end&partition=1"); !strings.Contains(mp, "from-page") {
			t.Error("the produced record is not on the page")
		}
		// The topic page: every partition's offsets and its leader's size.
		tp := w.mustGet("/topics/rep")
		rows := partRowRe.FindAllStringSubmatch(tp, -1)
		if len(rows) != 3 {
			t.Fatalf("partition rows %q", rows)
		}
		for _, r := range rows {
			wantEnd := "5"
			if r[1] == "1" {
				wantEnd = "6"
			}
			if r[2] != map[string]string{"0": "1", "1": "2", "2": "3"}[r[1]] || r[7] != "0" || r[8] != wantEnd || r[6] != "in sync" || r[9] == "—" {
				t.Errorf("partition row %q: want leader %s, offsets 0-%s, in sync, a size", r[1:], r[1], wantEnd)
			}
		}
		if !strings.Contains(tp, `href="/groups/audit"`) {
			t.Error("topic page lacks the group audit")
		}
		// The group (its coordinator anywhere): lag per partition.
		gp := w.mustGet("/groups/audit")
		if !strings.Contains(gp, "Total lag</dt><dd>10</dd>") {
			t.Errorf("group page: want total lag 10 (3×5+1 − 3×2):\n%s", gp)
		}
		// The overview: every broker's log directory, each once.
		ov := w.mustGet("/")
		for id := 1; id <= 3; id++ {
			if n := strings.Count(ov, fmt.Sprintf("<tr><td>%d</td><td><code>/", id)); n != 1 {
				t.Errorf("log directories of node %d: %d rows, want 1", id, n)
			}
		}
		if fact(urpFact, ov) != "0" || fact(offlineFact, ov) != "0" || fact(minISRFact, ov) != "0" {
			t.Errorf("overview before the stop: under-replicated %s, under min ISR %s, offline %s", fact(urpFact, ov), fact(minISRFact, ov), fact(offlineFact, ov))
		}
	})

	t.Run("node-3-stopped", func(t *testing.T) {
		rc.w.t = t
		rc.c.Brokers[2].Close()
		// rep's 3 partitions, strict's and __consumer_offsets' 2 lose
		// node 3 from their ISRs and lone has no ISR left: 7
		// under-replicated (an ISR smaller than the replicas, as
		// kafka-topics.sh --under-replicated-partitions counts); strict
		// is below its min.insync.replicas=3; lone has no leader.
		ov := rc.waitPage(t, "/", "7 under-replicated, 1 under min ISR, 1 offline", func(b string) bool {
			return fact(urpFact, b) == "7" && fact(minISRFact, b) == "1" && fact(offlineFact, b) == "1"
		})
		rows := brokerRowRe.FindAllStringSubmatch(ov, -1)
		// (Nodes 1 and 2 are "registered", or "fenced" for a moment when
		// the loaded machine delays a session renewal: not offline.)
		if len(rows) != 3 || rows[2][1] != "3" || !strings.HasPrefix(rows[2][4], "offline") || strings.HasPrefix(rows[0][4], "offline") || strings.HasPrefix(rows[1][4], "offline") {
			t.Errorf("broker rows: %q", rows)
		}
		tl := w.mustGet("/topics")
		for _, want := range []string{`3 under-replicated`, `1 under min ISR`, `1 offline`} {
			if !strings.Contains(tl, want) {
				t.Errorf("topic list lacks %q", want)
			}
		}
		tp := rc.waitPage(t, "/topics/rep", "rep: 3 under-replicated", func(b string) bool { return fact(urpFact, b) == "3" })
		for _, r := range partRowRe.FindAllStringSubmatch(tp, -1) {
			if strings.Contains(r[4], "3") || len(strings.Split(r[4], ", ")) != 2 || r[5] != "3" || r[6] != "under-replicated" || r[2] == "3" || r[9] == "—" {
				t.Errorf("rep partition row %q: want an ISR of two without node 3, offline replica 3, under-replicated, a size", r[1:])
			}
		}
		sp := w.mustGet("/topics/strict")
		if fact(minISRFact, sp) != "1" || !strings.Contains(sp, "under min ISR: acks=all refused") {
			t.Errorf("strict: under min ISR not shown:\n%s", sp)
		}
		lp := w.mustGet("/topics/lone")
		if fact(offlineFact, lp) != "1" || !strings.Contains(lp, "offline: no leader") {
			t.Errorf("lone: offline not shown:\n%s", lp)
		}
		// What the pages show is what a client sees: rep still serves
		// reads (from its new leaders) and strict refuses acks=all.
		if mp := w.mustGet("/topics/rep/messages?from=start&partition=2"); !strings.Contains(mp, "k2-4") {
			t.Error("rep/2 (failed over from node 3) unreadable from the console")
		}
		pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		strictCl := rc.c.Brokers[0].Client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordRetries(2))
		if err := strictCl.ProduceSync(pctx, &kgo.Record{Topic: "strict", Value: []byte("x")}).FirstErr(); err == nil {
			t.Error("acks=all produce to strict accepted under min ISR")
		}
	})

	t.Run("browser", func(t *testing.T) {
		rc.w.t = t
		tb := newTab(t, rc.base)
		dir := screenshotDir(t)
		tb.nav("/")
		got := eval[[]string](tb, `Array.from(document.querySelectorAll("dl.facts div")).map((d) => d.innerText.replace(/\s+/g, " "))`)
		joined := strings.Join(got, "|")
		for _, want := range []string{"Under-replicated 7", "Under min ISR 1", "Offline 1"} {
			if !strings.Contains(joined, want) {
				t.Errorf("overview in chromium: %q lacks %q", joined, want)
			}
		}
		if st := eval[string](tb, `Array.from(document.querySelectorAll("table tbody tr")).find((tr) => tr.cells[0].innerText.trim() === "3").cells[4].innerText`); !strings.HasPrefix(st, "offline") {
			t.Errorf("node 3's state in chromium: %q", st)
		}
		tb.shot(dir, "cluster-overview")
		tb.checkA11y("/ (cluster)")
		tb.nav("/topics/rep")
		isrs := eval[[]string](tb, `Array.from(document.querySelectorAll("#partitions ~ table:first-of-type tbody tr")).map((tr) => tr.cells[4].innerText)`)
		if len(isrs) != 3 {
			t.Errorf("ISR cells in chromium: %q", isrs)
		}
		for _, isr := range isrs {
			if strings.Contains(isr, "3") || strings.Count(isr, ",") != 1 {
				t.Errorf("ISR in chromium: %q, want two replicas without node 3", isr)
			}
		}
		tb.shot(dir, "cluster-topic")
		tb.checkA11y("/topics/rep (cluster)")
		tb.checkClean()
	})
}
