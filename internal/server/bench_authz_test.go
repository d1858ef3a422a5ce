package server_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/servertest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// BenchmarkAuthorizerOverhead measures what the authorizer costs produce
// and fetch: three brokers in this process, identical (combined KRaft
// node, SASL/PLAIN listener, strata.durable.acks=false so the disk's
// fsync noise stays out) except that "on" runs the authorizer with 10,000
// ACLs (5,000 literal and 5,000 prefixed topic ACLs of 100 other users,
// plus the bench user's own prefixed WRITE and READ) and "off" and "off2"
// run none. The bench user is no super user, so every produce and fetch
// on "on" is decided against the ACLs.
//
// Each op is one round: benchAuthzRecords 1 KiB records produced with kgo
// to each broker, then read back from each, the brokers' order rotating
// from round to round (A/B/C, B/C/A, ...) so that load from elsewhere on a
// shared machine falls on every side alike. Per round and side the wall
// time and the process's CPU time (getrusage: the client and the broker
// both run here, the two idle brokers cost next to nothing) are taken;
// the reported figures are the MEDIAN over rounds of the per-round ratios
// off/on (100 = no cost, below 100 = the authorizer costs), for wall-time
// throughput and for CPU per byte, and the same for off2/off: the noise
// floor of two identical brokers in the same run. STRATA_BENCH_AUTHZ_ROUNDS=1
// logs every round's times.
//
// go test ./internal/server -run '^$' -bench AuthorizerOverhead -benchtime 30x
func BenchmarkAuthorizerOverhead(b *testing.B) {
	brokers := []*servertest.Broker{startBenchBroker(b, true), startBenchBroker(b, false), startBenchBroker(b, false)}
	const on, off, off2 = 0, 1, 2
	val := benchValue()
	var offsets [3]int64
	// cost is one side's wall and CPU time in one phase of a round.
	type cost struct{ wall, cpu time.Duration }
	timed := func(f func()) cost {
		var r0, r1 syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
		start := time.Now()
		f()
		wall := time.Since(start)
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
		cpu := time.Duration(r1.Utime.Nano()+r1.Stime.Nano()-r0.Utime.Nano()-r0.Stime.Nano()) * time.Nanosecond
		return cost{wall, cpu}
	}
	produce := func(addr string) {
		cl := benchClient(b, addr, kgo.DefaultProduceTopic(benchAuthzTopic), kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.MaxBufferedRecords(100000))
		defer cl.Close()
		ctx := context.Background()
		var firstErr error
		for range benchAuthzRecords {
			cl.Produce(ctx, &kgo.Record{Value: val}, func(_ *kgo.Record, err error) {
				if err != nil && firstErr == nil {
					firstErr = err
				}
			})
		}
		if err := cl.Flush(ctx); err != nil || firstErr != nil {
			b.Fatal(err, firstErr)
		}
	}
	fetch := func(addr string, from int64) {
		cl := benchClient(b, addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
			benchAuthzTopic: {0: kgo.NewOffset().At(from)}}))
		defer cl.Close()
		ctx := context.Background()
		for got := 0; got < benchAuthzRecords; {
			fs := cl.PollFetches(ctx)
			if err := fs.Err(); err != nil {
				b.Fatal(err)
			}
			got += fs.NumRecords()
		}
	}
	// One untimed round on each (connections, metadata, the first
	// segment's pages), then the timed ones.
	for i, tb := range brokers {
		produce(tb.Addr())
		fetch(tb.Addr(), 0)
		offsets[i] = benchAuthzRecords
	}
	var prod, fch [3][]cost
	b.SetBytes(3 * 2 * benchAuthzRecords * benchRecordSize)
	b.ResetTimer()
	for round := 0; b.Loop(); round++ {
		order := []int{on, off, off2}
		for range round % 3 {
			order = append(order[1:], order[0])
		}
		for _, i := range order {
			prod[i] = append(prod[i], timed(func() { produce(brokers[i].Addr()) }))
		}
		for _, i := range order {
			fch[i] = append(fch[i], timed(func() { fetch(brokers[i].Addr(), offsets[i]) }))
			offsets[i] += benchAuthzRecords
		}
	}
	b.StopTimer()
	if os.Getenv("STRATA_BENCH_AUTHZ_ROUNDS") != "" {
		for r := range prod[on] {
			b.Logf("round %d: produce wall/cpu ms on %d/%d off %d/%d off2 %d/%d; fetch on %d/%d off %d/%d off2 %d/%d", r,
				prod[on][r].wall.Milliseconds(), prod[on][r].cpu.Milliseconds(), prod[off][r].wall.Milliseconds(), prod[off][r].cpu.Milliseconds(),
				prod[off2][r].wall.Milliseconds(), prod[off2][r].cpu.Milliseconds(),
				fch[on][r].wall.Milliseconds(), fch[on][r].cpu.Milliseconds(), fch[off][r].wall.Milliseconds(), fch[off][r].cpu.Milliseconds(),
				fch[off2][r].wall.Milliseconds(), fch[off2][r].cpu.Milliseconds())
		}
	}
	// medianRatio is the median over rounds of 100 x num/den, of wall or
	// CPU time: den's time in the numerator, so 100 x (num's throughput /
	// den's) for wall time and (den's CPU per byte / num's) for CPU.
	medianRatio := func(cs [3][]cost, num, den int, cpu bool) float64 {
		var rs []float64
		for r := range cs[num] {
			n, d := cs[num][r].wall, cs[den][r].wall
			if cpu {
				n, d = cs[num][r].cpu, cs[den][r].cpu
			}
			rs = append(rs, 100*d.Seconds()/n.Seconds())
		}
		slices.Sort(rs)
		if len(rs)%2 == 1 {
			return rs[len(rs)/2]
		}
		return (rs[len(rs)/2-1] + rs[len(rs)/2]) / 2
	}
	for _, m := range []struct {
		name     string
		cs       [3][]cost
		num, den int
		cpu      bool
	}{
		{"produce-on/off-%", prod, on, off, false},
		{"fetch-on/off-%", fch, on, off, false},
		{"produce-cpu-on/off-%", prod, on, off, true},
		{"fetch-cpu-on/off-%", fch, on, off, true},
		{"produce-off2/off-%", prod, off2, off, false},
		{"fetch-off2/off-%", fch, off2, off, false},
		{"produce-cpu-off2/off-%", prod, off2, off, true},
		{"fetch-cpu-off2/off-%", fch, off2, off, true},
	} {
		b.ReportMetric(medianRatio(m.cs, m.num, m.den, m.cpu), m.name)
	}
}

const (
	benchAuthzRecords = 30000
	benchAuthzTopic   = "bench.authz"
)

func benchClient(b *testing.B, addr string, opts ...kgo.Opt) *kgo.Client {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr),
		kgo.SASL(plain.Auth{User: "bench", Pass: "bench-secret"}.AsMechanism())}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	return cl
}

// startBenchBroker starts one broker of BenchmarkAuthorizerOverhead with
// its topic (and with the authorizer, its 10,000 ACLs).
func startBenchBroker(b *testing.B, authorizer bool) *servertest.Broker {
	port := freePortB(b)
	s := map[string]string{
		"node.id":                   "1",
		"process.roles":             "broker,controller",
		"listeners":                 fmt.Sprintf("SASL_PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:%d", port),
		"controller.listener.names": "CONTROLLER",
		"controller.quorum.voters":  fmt.Sprintf("1@127.0.0.1:%d", port),
		"sasl.enabled.mechanisms":   "PLAIN",
		"listener.name.sasl_plaintext.plain.sasl.jaas.config": `org.apache.kafka.common.security.plain.PlainLoginModule required ` +
			`user_admin="admin-secret" user_bench="bench-secret";`,
		"strata.durable.acks": "false",
	}
	if authorizer {
		s["authorizer.class.name"] = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
		s["super.users"] = "User:admin"
	}
	tb := servertest.Start(b, servertest.Options{Settings: s})
	cl, err := kgo.NewClient(kgo.SeedBrokers(tb.Addr()), kgo.SASL(plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism()))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, benchAuthzTopic); err != nil {
		b.Fatal(err)
	}
	if !authorizer {
		return tb
	}
	// One CreateAcls request, so the metadata watch applies them at once
	// (not a rebuild per request while the benchmark runs).
	req := kmsg.NewPtrCreateACLsRequest()
	add := func(user, name string, pattern kmsg.ACLResourcePatternType, op kmsg.ACLOperation) {
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeTopic, name, pattern
		c.Principal, c.Host, c.Operation, c.PermissionType = user, "*", op, kmsg.ACLPermissionTypeAllow
		req.Creations = append(req.Creations, c)
	}
	for i := range 5000 {
		user := fmt.Sprintf("User:team%d", i%100)
		add(user, fmt.Sprintf("orders.%d.events", i), kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLOperationWrite)
		add(user, fmt.Sprintf("team%d.app%d.", i%100, i), kmsg.ACLResourcePatternTypePrefixed, kmsg.ACLOperationRead)
	}
	add("User:bench", "bench.", kmsg.ACLResourcePatternTypePrefixed, kmsg.ACLOperationWrite)
	add("User:bench", "bench.", kmsg.ACLResourcePatternTypePrefixed, kmsg.ACLOperationRead)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		b.Fatal(err)
	}
	for _, r := range resp.Results {
		if r.ErrorCode != 0 {
			b.Fatal(kerr.ErrorForCode(r.ErrorCode))
		}
	}
	described, err := adm.DescribeACLs(ctx, kadm.NewACLs().AnyResource().Allow().AllowHosts().
		Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny))
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	for _, d := range described {
		n += len(d.Described)
	}
	if n != 10002 {
		b.Fatalf("%d ACLs, want 10,002", n)
	}
	return tb
}

func freePortB(b *testing.B) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
