package console_test

import (
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/servertest"
	"github.com/strata-io/strata/internal/tlstest"
)

// TestConsoleOverSecureInterBrokerListener: a two-node cluster whose
// inter-broker listener is SASL_SSL (TLS with the listener's trust store,
// SASL PLAIN with the brokers' own credentials) next to an SSL client
// listener. Node 1's console reaches node 2
// the way the replica fetchers do, over the inter-broker listener with its
// credentials: the topic page shows the size of the partition node 2 leads
// (DescribeLogDirs on node 2) and the messages page reads that partition
// from node 2.
func TestConsoleOverSecureInterBrokerListener(t *testing.T) {
	p, err := tlstest.Generate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c := servertest.StartN(t, 2, servertest.Options{Controllers: 1, Metrics: true, Settings: map[string]string{
		"listeners":                                      "CLIENT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
		"listener.security.protocol.map":                 "CLIENT:SSL,INTERNAL:SASL_SSL,CONTROLLER:PLAINTEXT",
		"inter.broker.listener.name":                     "INTERNAL",
		"sasl.mechanism.inter.broker.protocol":           "PLAIN",
		"listener.name.internal.sasl.enabled.mechanisms": "PLAIN",
		"listener.name.internal.plain.sasl.jaas.config":  `org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" password="broker-secret" user_broker="broker-secret";`,
		"ssl.keystore.location":                          p.ServerKeystore,
		"listener.name.internal.ssl.truststore.location": p.CAFile,
		"offsets.topic.replication.factor":               "1",
		"transaction.state.log.replication.factor":       "1",
	}, Logger: servertest.TestLogger(t, slog.LevelWarn)})
	cl := c.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DialTLSConfig(p.ClientConfig(false)))
	ctx := ctxT(t)
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30000
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "split", -1, -1
	ct.ReplicaAssignment = []kmsg.CreateTopicsRequestTopicReplicaAssignment{{Partition: 0, Replicas: []int32{1}}, {Partition: 1, Replicas: []int32{2}}}
	req.Topics = append(req.Topics, ct)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		t.Fatalf("create: %v", err)
	}
	var recs []*kgo.Record
	for part := int32(0); part < 2; part++ {
		for i := 0; i < 3; i++ {
			recs = append(recs, &kgo.Record{Topic: "split", Partition: part, Key: []byte(fmt.Sprintf("k%d-%d", part, i)), Value: []byte("v")})
		}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	_, port, err := net.SplitHostPort(c.Brokers[0].MetricsAddr())
	if err != nil {
		t.Fatal(err)
	}
	w := newWeb(t, "http://127.0.0.1:"+port)
	waitBody := func(path, what string, ok func(string) bool) string {
		t.Helper()
		var body string
		for deadline := time.Now().Add(90 * time.Second); ; {
			_, body = w.get(path)
			if ok(body) {
				return body
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %s never showed:\n%s", path, what, body)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	// Partition 1 is led by node 2: its records come from node 2.
	waitBody("/topics/split/messages?from=start&partition=1", "the records of split/1 (led by node 2)", func(b string) bool {
		return strings.Contains(b, "k1-0") && strings.Contains(b, "k1-2")
	})
	// Every partition's size, node 2's from its DescribeLogDirs. Node 2's
	// Metadata, asked over the inter-broker listener, advertises the
	// brokers there: the console reaches them at those addresses too (it
	// knew only the first listener's, and a page lost its offsets and
	// sizes whenever its client had asked node 2).
	waitBody("/topics/split", "a size for both partitions", func(b string) bool {
		if strings.Contains(b, "no registered broker") {
			t.Fatalf("the console could not reach a broker at an address Metadata gave:\n%s", b)
		}
		rows := partRowRe.FindAllStringSubmatch(b, -1)
		if len(rows) != 2 {
			return false
		}
		for _, r := range rows {
			if r[9] == "—" || r[9] == "" || r[8] != "3" {
				return false
			}
		}
		return true
	})
}
