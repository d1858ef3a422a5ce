package compat

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Burrow (LinkedIn's lag checker, Debian package burrow 1.2.1) reads a
// cluster the way an operator's monitoring does: sarama Metadata and
// ListOffsets for the end offsets, and a consumer of __consumer_offsets that
// decodes Kafka's offset-commit records. TestBurrowLag runs the real Burrow
// binary against a Strata broker and checks the lag it reports.

const (
	burrowCluster = "strata"
	// zooKeeperJar is Debian's zookeeper package jar; its manifest class
	// path names every dependency.
	zooKeeperJar = "/usr/share/java/zookeeper.jar"
)

// TestBurrowLag produces 50 records to each of 3 partitions, consumes them in
// a franz-go group that commits offsets 10, 20 and 30, and waits until
// Burrow's HTTP API reports exactly those committed offsets and lags 40, 30
// and 20.
//
// Burrow 1.2.1 asks for end offsets with ListOffsets v0 whatever its
// kafka-version setting (fixed upstream in Burrow 1.9.4, commit 18dc676).
// Kafka 4.0 no longer serves v0 (KIP-896); Strata does, for this client, so
// the test fails if the broker stops advertising it or Burrow logs a failed
// offset fetch.
func TestBurrowLag(t *testing.T) {
	if targetKfake() {
		t.Skip("kfake has no __consumer_offsets topic for Burrow to read")
	}
	burrowBin := findBurrow(t)
	zk := startZooKeeper(t)
	b := startBroker(t, brokerOpts{extra: burrowBrokerSettings(nil)})
	if minV := listOffsetsMinVersion(t, b.Addr()); minV > 0 {
		t.Fatalf("broker serves ListOffsets from v%d: Burrow 1.2.1 fetches end offsets with v0 only", minV)
	}
	bw := runBurrowLag(t, burrowBin, zk, b.Addr())
	for _, l := range strings.Split(bw.out.String(), "\n") {
		if strings.Contains(l, "failed to fetch offsets from broker") {
			t.Errorf("Burrow: %s", l)
		}
	}
}

// burrowBrokerSettings are the broker settings of the Burrow tests plus extra.
// Burrow's sarama 1.22 looks up the starting offset of each
// __consumer_offsets partition on the same connection as its long-polling
// Fetch, so each lookup waits up to the Fetch max wait (250 ms): with Kafka's
// default 50 partitions Burrow needs about 15 s before it reads any commit (as
// it would from Kafka). Five partitions keep the test short.
func burrowBrokerSettings(extra map[string]string) map[string]string {
	m := map[string]string{
		"offsets.topic.num.partitions":     "5",
		"group.initial.rebalance.delay.ms": "0",
	}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

// runBurrowLag is the Burrow scenario; kafka is the bootstrap address every
// client (and Burrow) uses. It returns the Burrow it ran.
func runBurrowLag(t *testing.T, burrowBin, zk, kafka string) *burrowProc {
	const (
		topic   = "burrow-lag"
		group   = "burrow-lag-group"
		perPart = 50
	)
	commits := map[int32]int64{0: 10, 1: 20, 2: 30}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adm := adminAt(t, kafka)
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, topic); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	produceBurrowRecords(ctx, t, kafka, topic, 3, perPart)

	// The group consumes everything but commits only part of it.
	member, err := kgo.NewClient(
		kgo.SeedBrokers(kafka),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(),
		kgo.FetchMaxWait(200*time.Millisecond),
	)
	if err != nil {
		t.Fatalf("group client: %v", err)
	}
	defer member.Close()
	epochs := map[int32]int32{}
	for seen := 0; seen < 3*perPart; {
		fs := member.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("poll after %d records: %v", seen, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			seen++
			epochs[r.Partition] = r.LeaderEpoch
		})
	}

	// Burrow drops a commit for a partition whose end offset it has not
	// fetched yet, so start it (and wait for the end offsets) first.
	start := time.Now()
	bw := startBurrow(t, burrowBin, zk, kafka)
	t.Logf("Burrow HTTP up after %v", time.Since(start).Round(time.Millisecond))
	waitFor(t, "Burrow end offsets of "+topic, time.Minute, func() error {
		var resp struct {
			Offsets []int64 `json:"offsets"`
		}
		if err := bw.get("/v3/kafka/"+burrowCluster+"/topic/"+topic, &resp); err != nil {
			return err
		}
		if fmt.Sprint(resp.Offsets) != fmt.Sprint([]int64{perPart, perPart, perPart}) {
			return fmt.Errorf("offsets %v", resp.Offsets)
		}
		return nil
	})

	offsets := map[string]map[int32]kgo.EpochOffset{topic: {}}
	for p, o := range commits {
		offsets[topic][p] = kgo.EpochOffset{Epoch: epochs[p], Offset: o}
	}
	t.Logf("Burrow has the end offsets after %v", time.Since(start).Round(time.Millisecond))
	var commitErr error
	member.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		commitErr = err
		if err == nil {
			for _, rt := range resp.Topics {
				for _, rp := range rt.Partitions {
					if rp.ErrorCode != 0 {
						commitErr = fmt.Errorf("commit %s/%d: error code %d", rt.Topic, rp.Partition, rp.ErrorCode)
					}
				}
			}
		}
	})
	if commitErr != nil {
		t.Fatalf("commit: %v", commitErr)
	}

	// The same lag through DescribeGroups + OffsetFetch + ListOffsets.
	lags, err := adm.Lag(ctx, group)
	if err != nil {
		t.Fatalf("kadm lag: %v", err)
	}
	gl := lags[group]
	if gl.Error() != nil {
		t.Fatalf("kadm lag of %s: %v", group, gl.Error())
	}
	for p, o := range commits {
		ml, ok := gl.Lag.Lookup(topic, p)
		if !ok || ml.Commit.At != o || ml.Lag != perPart-o || ml.Member == nil {
			t.Fatalf("kadm lag %s/%d = %+v (found %v), want commit %d lag %d with a member", topic, p, ml, ok, o, perPart-o)
		}
	}

	waitFor(t, "Burrow lists group "+group, time.Minute, func() error {
		var resp struct {
			Consumers []string `json:"consumers"`
		}
		if err := bw.get("/v3/kafka/"+burrowCluster+"/consumer", &resp); err != nil {
			return err
		}
		for _, c := range resp.Consumers {
			if c == group {
				return nil
			}
		}
		return fmt.Errorf("consumers %v", resp.Consumers)
	})

	var last burrowLag
	waitFor(t, "Burrow lag of "+group, time.Minute, func() error {
		if err := bw.get("/v3/kafka/"+burrowCluster+"/consumer/"+group+"/lag", &last); err != nil {
			return err
		}
		got := map[int32]burrowPartition{}
		for _, p := range last.Status.Partitions {
			if p.Topic == topic {
				got[p.Partition] = p
			}
		}
		for p, o := range commits {
			gp, ok := got[p]
			if !ok || gp.End == nil {
				return fmt.Errorf("partition %d not reported yet: %+v", p, last.Status)
			}
			if gp.End.Offset != o || gp.CurrentLag != uint64(perPart-o) {
				return fmt.Errorf("partition %d: committed %d lag %d, want %d lag %d", p, gp.End.Offset, gp.CurrentLag, o, perPart-o)
			}
		}
		if want := uint64(3*perPart) - uint64(10+20+30); last.Status.TotalLag != want {
			return fmt.Errorf("total lag %d, want %d", last.Status.TotalLag, want)
		}
		return nil
	})
	t.Logf("Burrow reports the lag after %v", time.Since(start).Round(time.Millisecond))
	if os.Getenv("STRATA_BURROW_LOG") != "" {
		t.Log(bw.out.String())
	}
	for _, p := range last.Status.Partitions {
		t.Logf("Burrow: %s/%d committed %d lag %d status %s", p.Topic, p.Partition, p.End.Offset, p.CurrentLag, p.Status)
	}
	t.Logf("Burrow: group %s status %s total lag %d", group, last.Status.Status, last.Status.TotalLag)
	if n := bw.decodeFailures(); n != "" {
		t.Logf("Burrow could not decode some __consumer_offsets records (lag unaffected):\n%s", n)
	}
	return bw
}

// burrowLag is Burrow's /v3/kafka/<cluster>/consumer/<group>/lag answer.
type burrowLag struct {
	Error   bool   `json:"error"`
	Message string `json:"message"`
	Status  struct {
		Status     string            `json:"status"`
		Complete   float64           `json:"complete"`
		Partitions []burrowPartition `json:"partitions"`
		TotalLag   uint64            `json:"totallag"`
	} `json:"status"`
}

// burrowPartition is one partition of Burrow's lag answer.
type burrowPartition struct {
	Topic      string `json:"topic"`
	Partition  int32  `json:"partition"`
	Status     string `json:"status"`
	CurrentLag uint64 `json:"current_lag"`
	End        *struct {
		Offset int64 `json:"offset"`
		Lag    int64 `json:"lag"`
	} `json:"end"`
}

// produceBurrowRecords writes n records to each of parts partitions of topic.
func produceBurrowRecords(ctx context.Context, t *testing.T, addr, topic string, parts int32, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatalf("producer: %v", err)
	}
	defer cl.Close()
	var rs []*kgo.Record
	for p := int32(0); p < parts; p++ {
		for i := 0; i < n; i++ {
			rs = append(rs, &kgo.Record{Topic: topic, Partition: p, Value: []byte(fmt.Sprintf("p%d-%d", p, i))})
		}
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// findBurrow returns the Burrow binary (Debian installs /usr/bin/Burrow).
func findBurrow(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"Burrow", "burrow"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	missing(t, "Burrow binary not found (Debian package burrow)")
	return ""
}

// freeAddr returns a loopback address with a port that was free just now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	defer l.Close()
	return l.Addr().String()
}

// childProc is a child process with its combined output kept in memory; it
// is killed and waited for when the test ends.
type childProc struct {
	name string
	cmd  *exec.Cmd
	out  *lockedBuffer
	done chan struct{}
}

func startChild(t *testing.T, name string, cmd *exec.Cmd) *childProc {
	t.Helper()
	c := &childProc{name: name, cmd: cmd, out: &lockedBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = c.out, c.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		_ = cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-c.done
		if t.Failed() {
			t.Logf("%s output:\n%s", name, tail(c.out.String()))
		}
	})
	return c
}

// exited reports an error if the process has ended.
func (c *childProc) exited() error {
	select {
	case <-c.done:
		return fmt.Errorf("%s exited (%v): %s", c.name, c.cmd.ProcessState, tail(c.out.String()))
	default:
		return nil
	}
}

// startZooKeeper runs a standalone ZooKeeper (Debian package zookeeper) on a
// random port and returns its address. Burrow 1.x refuses to start without
// one.
func startZooKeeper(t *testing.T) string {
	t.Helper()
	java, err := exec.LookPath("java")
	if err != nil {
		missing(t, "java not found (Debian package zookeeper pulls in default-jre)")
	}
	if _, err := os.Stat(zooKeeperJar); err != nil {
		missing(t, "ZooKeeper jar missing (Debian package zookeeper): "+err.Error())
	}
	dir := t.TempDir()
	addr := freeAddr(t)
	host, port, _ := net.SplitHostPort(addr)
	cfg := fmt.Sprintf("tickTime=2000\ndataDir=%s\nclientPort=%s\nclientPortAddress=%s\nadmin.enableServer=false\n4lw.commands.whitelist=srvr\n",
		filepath.Join(dir, "data"), port, host)
	cfgPath := filepath.Join(dir, "zoo.cfg")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatalf("write zoo.cfg: %v", err)
	}
	zk := startChild(t, "zookeeper", exec.Command(java, "-Xmx128m", "-cp", zooKeeperJar,
		"org.apache.zookeeper.server.ZooKeeperServerMain", cfgPath))
	waitFor(t, "ZooKeeper listening on "+addr, time.Minute, func() error {
		if err := zk.exited(); err != nil {
			t.Fatal(err)
		}
		// The port opens before ZooKeeper serves sessions; its "srvr"
		// command reports the mode only once it does.
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte("srvr")); err != nil {
			return err
		}
		out, err := io.ReadAll(c)
		if !strings.Contains(string(out), "Mode: standalone") {
			return fmt.Errorf("srvr: %q (%v)", out, err)
		}
		return nil
	})
	return addr
}

// burrowProc is a running Burrow with its HTTP API address.
type burrowProc struct {
	*childProc
	t    *testing.T
	http string
}

// startBurrow writes burrow.toml from burrow/burrow.toml.tmpl and runs Burrow
// against the broker at kafka, waiting until its HTTP API answers.
func startBurrow(t *testing.T, bin, zk, kafka string) *burrowProc {
	t.Helper()
	tmpl, err := template.ParseFiles(filepath.Join("burrow", "burrow.toml.tmpl"))
	if err != nil {
		t.Fatalf("burrow config template: %v", err)
	}
	dir := t.TempDir()
	bp := &burrowProc{t: t, http: freeAddr(t)}
	var cfg bytes.Buffer
	if err := tmpl.Execute(&cfg, map[string]string{"Dir": dir, "ZooKeeper": zk, "Kafka": kafka, "HTTP": bp.http}); err != nil {
		t.Fatalf("burrow config: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "burrow.toml"), cfg.Bytes(), 0o644); err != nil {
		t.Fatalf("write burrow.toml: %v", err)
	}
	cmd := exec.Command(bin, "-config-dir", dir)
	cmd.Dir = dir
	cmd.Env = burrowEnv()
	bp.childProc = startChild(t, "Burrow", cmd)
	waitFor(t, "Burrow HTTP API on "+bp.http, time.Minute, func() error {
		var resp struct {
			Clusters []string `json:"clusters"`
		}
		if err := bp.get("/v3/kafka", &resp); err != nil {
			return err
		}
		if len(resp.Clusters) != 1 || resp.Clusters[0] != burrowCluster {
			return fmt.Errorf("clusters %v", resp.Clusters)
		}
		return nil
	})
	return bp
}

// burrowEnv is the environment without BURROW_* variables, which Burrow
// would take as configuration overrides.
func burrowEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(strings.ToUpper(kv), "BURROW_") {
			env = append(env, kv)
		}
	}
	return env
}

// get fetches one Burrow API path into v. A Burrow that exited fails the
// test at once with its log.
func (bp *burrowProc) get(path string, v any) error {
	if err := bp.exited(); err != nil {
		bp.t.Fatal(err)
	}
	client := http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + bp.http + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: HTTP %d: %s", path, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("GET %s: %w: %s", path, err, body)
	}
	return nil
}

// decodeFailures returns Burrow's "failed to decode" log lines, one per
// distinct reason and version.
func (bp *burrowProc) decodeFailures() string {
	seen := map[string]bool{}
	var out []string
	for _, line := range strings.Split(bp.out.String(), "\n") {
		if !strings.Contains(line, "failed to decode") {
			continue
		}
		var l struct {
			Reason  string `json:"reason"`
			Version *int   `json:"version"`
		}
		_ = json.Unmarshal([]byte(line), &l)
		k := l.Reason
		if l.Version != nil {
			k += " " + strconv.Itoa(*l.Version)
		}
		if !seen[k] {
			seen[k] = true
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// adminAt returns a franz-go admin client for addr, closed when the test ends.
func adminAt(t *testing.T, addr string) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatalf("kgo client: %v", err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// listOffsetsMinVersion returns the lowest ListOffsets version the broker at
// addr advertises in ApiVersions.
func listOffsetsMinVersion(t *testing.T, addr string) int16 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatalf("kgo client: %v", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("ApiVersions: %v", err)
	}
	for _, k := range resp.ApiKeys {
		if k.ApiKey == int16(kmsg.ListOffsets) {
			return k.MinVersion
		}
	}
	t.Fatalf("broker does not advertise ListOffsets")
	return 0
}
