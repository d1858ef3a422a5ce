package server_test

import (
	"context"
	"fmt"
	"net"
	"os"
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
// and fetch: two brokers in this process, identical (combined KRaft node,
// SASL/PLAIN listener, strata.durable.acks=false so the disk's fsync
// noise stays out) except that one runs the authorizer with 10,000 ACLs
// (5,000 literal and 5,000 prefixed topic ACLs of 100 other users, plus
// the bench user's own prefixed WRITE and READ) and the other none. The
// bench user is no super user, so every produce and fetch is decided
// against the ACLs. STRATA_BENCH_AUTHZ_AA=1 starts both without the
// authorizer: the ratio's noise floor on the machine. Each op produces benchAuthzRecords 1 KiB records to each broker
// and reads them back, alternating which broker goes first; the time
// spent on each side is summed, and the ratio on/off is reported (100 =
// no cost).
//
// go test ./internal/server -run '^$' -bench AuthorizerOverhead -benchtime 40x -count 3
func BenchmarkAuthorizerOverhead(b *testing.B) {
	on := startBenchBroker(b, os.Getenv("STRATA_BENCH_AUTHZ_AA") == "")
	off := startBenchBroker(b, false)
	val := benchValue()
	var prodOn, prodOff, fetchOn, fetchOff time.Duration
	var offsets [2]int64
	produce := func(addr string) time.Duration {
		cl := benchClient(b, addr, kgo.DefaultProduceTopic(benchAuthzTopic), kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.MaxBufferedRecords(100000))
		defer cl.Close()
		ctx := context.Background()
		start := time.Now()
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
		return time.Since(start)
	}
	fetch := func(addr string, from int64) time.Duration {
		cl := benchClient(b, addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
			benchAuthzTopic: {0: kgo.NewOffset().At(from)}}))
		defer cl.Close()
		ctx := context.Background()
		start := time.Now()
		for got := 0; got < benchAuthzRecords; {
			fs := cl.PollFetches(ctx)
			if err := fs.Err(); err != nil {
				b.Fatal(err)
			}
			got += fs.NumRecords()
		}
		return time.Since(start)
	}
	// One untimed round on each (connections, metadata, the first
	// segment's pages), then the timed ones.
	for i, addr := range []string{on.Addr(), off.Addr()} {
		produce(addr)
		fetch(addr, 0)
		offsets[i] = benchAuthzRecords
	}
	b.SetBytes(2 * 2 * benchAuthzRecords * benchRecordSize)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		sides := []struct {
			addr      string
			prod, fch *time.Duration
			offset    *int64
		}{{on.Addr(), &prodOn, &fetchOn, &offsets[0]}, {off.Addr(), &prodOff, &fetchOff, &offsets[1]}}
		if i%2 == 1 {
			sides[0], sides[1] = sides[1], sides[0]
		}
		for _, s := range sides {
			*s.prod += produce(s.addr)
		}
		for _, s := range sides {
			*s.fch += fetch(s.addr, *s.offset)
			*s.offset += benchAuthzRecords
		}
	}
	mb := func(d time.Duration) float64 {
		return float64(b.N) * benchAuthzRecords * benchRecordSize / d.Seconds() / 1e6
	}
	b.ReportMetric(mb(prodOn), "produce-on-MB/s")
	b.ReportMetric(mb(prodOff), "produce-off-MB/s")
	b.ReportMetric(mb(fetchOn), "fetch-on-MB/s")
	b.ReportMetric(mb(fetchOff), "fetch-off-MB/s")
	b.ReportMetric(100*prodOff.Seconds()/prodOn.Seconds(), "produce-on/off-%")
	b.ReportMetric(100*fetchOff.Seconds()/fetchOn.Seconds(), "fetch-on/off-%")
}

const (
	benchAuthzRecords = 4000
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
