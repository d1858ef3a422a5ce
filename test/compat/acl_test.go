package compat

import (
	"context"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/strata-io/strata/internal/tlstest"
)

// Authorization with real clients (issue 15): a broker with Kafka's
// StandardAuthorizer semantics, users admin (super user) and alice over
// SASL/PLAIN. Each client, as alice, with READ on topic t and group g:
// consumes t in g, is refused producing to t (TOPIC_AUTHORIZATION_FAILED
// 29), does not see topic secret; a prefixed ACL (app.) covers topics
// created after it; a DENY (WRITE on app.locked) beats the prefixed
// ALLOW; the super user produces where alice may not.

const aclJAAS = `org.apache.kafka.common.security.plain.PlainLoginModule required ` +
	`user_admin="admin-secret" user_alice="alice-secret";`

const codeTopicAuthz = 29

var (
	aclAdmin = SASLAuth{"PLAIN", "admin", "admin-secret"}
	aclAlice = SASLAuth{"PLAIN", "alice", "alice-secret"}
)

// kraftExtra are the settings of a combined one-node KRaft cluster (the
// ACLs live in its metadata store) with listener as its client listener.
func kraftExtra(t *testing.T, listener string) map[string]string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return map[string]string{
		"node.id":                      "1",
		"process.roles":                "broker,controller",
		"listeners":                    fmt.Sprintf("%s://127.0.0.1:0,CONTROLLER://127.0.0.1:%d", listener, port),
		"controller.listener.names":    "CONTROLLER",
		"controller.quorum.voters":     fmt.Sprintf("1@127.0.0.1:%d", port),
		"offsets.topic.num.partitions": "3",
		"authorizer.class.name":        "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
	}
}

// startACLBroker starts the broker of the scenario, creates its topics
// (t with three records, secret, and after the ACLs app.new and
// app.locked) and ACLs, and returns it.
func startACLBroker(t *testing.T) *testBroker {
	t.Helper()
	extra := kraftExtra(t, "SASL_PLAINTEXT")
	extra["sasl.enabled.mechanisms"] = "PLAIN"
	extra["listener.name.sasl_plaintext.plain.sasl.jaas.config"] = aclJAAS
	extra["super.users"] = "User:admin"
	b := startBroker(t, brokerOpts{extra: extra, metrics: true})
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.SASL(plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	for _, topic := range []string{"t", "secret"} {
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: fmt.Appendf(nil, "v%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range []*kadm.ACLBuilder{
		kadm.NewACLs().Allow("User:alice").Topics("t").Groups("g").Operations(kadm.OpRead),
		kadm.NewACLs().Allow("User:alice").Topics("app.").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpWrite, kadm.OpRead),
		kadm.NewACLs().Deny("User:alice").Topics("app.locked").Operations(kadm.OpWrite),
	} {
		res, err := adm.CreateACLs(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("create ACL: %v", r.Err)
			}
		}
	}
	for _, topic := range []string{"app.new", "app.locked"} {
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// runACLScenario drives the scenario with a client of the suite's drivers.
func runACLScenario(t *testing.T, c *Client) {
	if targetKfake() {
		t.Skip("kfake has no authorizer configured like this")
	}
	b := startACLBroker(t)
	alice := func(op Op) Result { op.SASL = &aclAlice; return c.Do(t, b.Addr(), op) }

	r := alice(Op{Op: opList})
	if r.ErrorCode != 0 {
		t.Fatalf("alice lists topics: %d %s", r.ErrorCode, r.Error)
	}
	if !slices.Contains(r.Topics, "t") || slices.Contains(r.Topics, "secret") {
		t.Errorf("alice sees %v: want t and no secret", r.Topics)
	}

	if c.can(opGroupConsume) {
		r = alice(Op{Op: opGroupConsume, Topic: "t", Group: "g", Max: 3, TimeoutMs: 30000})
	} else { // a partition consumer (sarama's driver): READ on the topic
		r = alice(Op{Op: opFetch, Topic: "t", Offset: -2, Max: 3})
	}
	if r.ErrorCode != 0 || len(r.Records) != 3 {
		t.Fatalf("alice consumes t: %d records, code %d %s", len(r.Records), r.ErrorCode, r.Error)
	}

	one := []Rec{{Value: strp("x")}}
	if r = alice(Op{Op: opProduce, Topic: "t", Records: one}); r.ErrorCode != codeTopicAuthz {
		t.Errorf("alice produces to t: code %d %s, want TOPIC_AUTHORIZATION_FAILED 29", r.ErrorCode, r.Error)
	}
	if r = alice(Op{Op: opProduce, Topic: "app.new", Records: one}); r.ErrorCode != 0 {
		t.Errorf("alice produces to app.new (prefixed ACL, topic created after it): code %d %s", r.ErrorCode, r.Error)
	}
	if r = alice(Op{Op: opProduce, Topic: "app.locked", Records: one}); r.ErrorCode != codeTopicAuthz {
		t.Errorf("alice produces to app.locked (DENY beats the prefixed ALLOW): code %d %s, want 29", r.ErrorCode, r.Error)
	}
	// The super user is bound by no ACL.
	if r = c.Do(t, b.Addr(), Op{Op: opProduce, Topic: "secret", Records: one, SASL: &aclAdmin}); r.ErrorCode != 0 {
		t.Errorf("super user produces to secret: code %d %s", r.ErrorCode, r.Error)
	}
}

func TestACLsKafkaJS(t *testing.T) { t.Parallel(); runACLScenario(t, kafkaJSClient(t)) }

func TestACLsSarama(t *testing.T) { t.Parallel(); runACLScenario(t, saramaClient()) }

func TestACLsConfluentKafkaPython(t *testing.T) {
	t.Parallel()
	runACLScenario(t, confluentClient(t))
}

// TestACLsKcat runs the scenario with kcat (librdkafka): -L for Metadata,
// a balanced consumer (-G) for the group, -P for produce.
func TestACLsKcat(t *testing.T) {
	t.Parallel()
	if targetKfake() {
		t.Skip("kfake has no authorizer configured like this")
	}
	path := requireTool(t, "kcat", "-V")
	b := startACLBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*opTimeout)
	defer cancel()
	auth := func(a SASLAuth) []string {
		return []string{"-b", b.Addr(), "-X", "security.protocol=sasl_plaintext", "-X", "sasl.mechanisms=PLAIN",
			"-X", "sasl.username=" + a.Username, "-X", "sasl.password=" + a.Password}
	}

	stdout, stderr, err := kcatRun(ctx, path, nil, append([]string{"-L", "-J"}, auth(aclAlice)...)...)
	if err != nil {
		t.Fatalf("kcat -L as alice: %v: %s", err, stderr)
	}
	var md struct {
		Topics []struct {
			Topic string `json:"topic"`
		} `json:"topics"`
	}
	if err := json.Unmarshal([]byte(stdout), &md); err != nil {
		t.Fatalf("kcat -L -J output %q: %v", stdout, err)
	}
	var seen []string
	for _, tp := range md.Topics {
		seen = append(seen, tp.Topic)
	}
	if !slices.Contains(seen, "t") || slices.Contains(seen, "secret") {
		t.Errorf("alice sees %v: want t and no secret", seen)
	}

	stdout, stderr, err = kcatRun(ctx, path, nil, append([]string{"-C", "-G", "g", "-X", "auto.offset.reset=earliest", "-c", "3", "-f", `%s\n`, "t"}, auth(aclAlice)...)...)
	if err != nil || stdout != "v0\nv1\nv2\n" {
		t.Fatalf("kcat -G g t as alice: %q %v: %s", stdout, err, stderr)
	}

	produce := func(a SASLAuth, topic string) string {
		args := append([]string{"-P", "-t", topic, "-X", "acks=all", "-X", "message.send.max.retries=0"}, auth(a)...)
		_, stderr, err := kcatRun(ctx, path, []byte("x\n"), args...)
		if err != nil || strings.Contains(stderr, "Delivery failed") {
			return stderr + fmt.Sprint(err)
		}
		return ""
	}
	const denied = "Broker: Topic authorization failed"
	if msg := produce(aclAlice, "t"); !strings.Contains(msg, denied) {
		t.Errorf("alice produces to t: %q, want %q", msg, denied)
	}
	if msg := produce(aclAlice, "app.new"); msg != "" {
		t.Errorf("alice produces to app.new: %s", msg)
	}
	if msg := produce(aclAlice, "app.locked"); !strings.Contains(msg, denied) {
		t.Errorf("alice produces to app.locked: %q, want %q", msg, denied)
	}
	if msg := produce(aclAdmin, "secret"); msg != "" {
		t.Errorf("super user produces to secret: %s", msg)
	}
}

// TestACLsKcatMTLS: kcat (librdkafka, OpenSSL) with client certificates
// on an SSL listener; each principal is the certificate's subject mapped
// by ssl.principal.mapping.rules (CN=alice,O=Example -> User:alice): alice
// has WRITE on t and produces, bob has none and gets
// TOPIC_AUTHORIZATION_FAILED.
func TestACLsKcatMTLS(t *testing.T) {
	t.Parallel()
	if targetKfake() {
		t.Skip("kfake has no SSL listener")
	}
	path := requireTool(t, "kcat", "-V")
	p, err := tlstest.Generate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	certs := map[string]*tlstest.ClientCert{}
	for _, user := range []string{"admin", "alice", "bob"} {
		if certs[user], err = p.NewClient(pkix.Name{CommonName: user, Organization: []string{"Example"}}); err != nil {
			t.Fatal(err)
		}
	}
	extra := kraftExtra(t, "SSL")
	extra["ssl.keystore.location"] = p.ServerKeystore
	extra["ssl.truststore.location"] = p.CAFile
	extra["ssl.client.auth"] = "required"
	extra["ssl.principal.mapping.rules"] = `RULE:^CN=([^,]+),O=Example$/$1/,DEFAULT`
	extra["super.users"] = "User:admin"
	b := startBroker(t, brokerOpts{extra: extra})
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.DialTLSConfig(certs["admin"].TLS))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "t"); err != nil {
		t.Fatalf("super user (CN=admin,O=Example) creates t: %v", err)
	}
	res, err := adm.CreateACLs(ctx, kadm.NewACLs().Allow("User:alice").Topics("t").Operations(kadm.OpWrite, kadm.OpRead))
	if err != nil || res[0].Err != nil {
		t.Fatalf("create ACL: %+v %v", res, err)
	}
	run := func(user string, stdin []byte, args ...string) (string, string, error) {
		c := certs[user]
		args = append(args, "-b", b.Addr(), "-t", "t", "-X", "security.protocol=ssl", "-X", "ssl.ca.location="+p.CAFile,
			"-X", "ssl.certificate.location="+c.CertFile, "-X", "ssl.key.location="+c.KeyFile)
		return kcatRun(ctx, path, stdin, args...)
	}
	if _, stderr, err := run("alice", []byte("from-alice\n"), "-P", "-X", "acks=all"); err != nil || strings.Contains(stderr, "Delivery failed") {
		t.Fatalf("alice produces: %v: %s", err, stderr)
	}
	_, stderr, _ := run("bob", []byte("from-bob\n"), "-P", "-X", "acks=all", "-X", "message.send.max.retries=0")
	if !strings.Contains(stderr, "Broker: Topic authorization failed") {
		t.Errorf("bob produces: %s, want Topic authorization failed", stderr)
	}
	stdout, stderr, err := run("alice", nil, "-C", "-o", "beginning", "-c", "1", "-e", "-f", `%s\n`)
	if err != nil || stdout != "from-alice\n" {
		t.Fatalf("alice consumes: %q %v: %s", stdout, err, stderr)
	}
	// kcat -C without a group reads through Metadata, ListOffsets and
	// Fetch: bob, who may not describe t, does not get its records.
	stdout, _, _ = run("bob", nil, "-C", "-o", "beginning", "-c", "1", "-e", "-f", `%s\n`)
	if stdout != "" {
		t.Errorf("bob read %q from t without READ", stdout)
	}
}

// runThrottleScenario: alice gets a producer_byte_rate of 10 KB/s (a burst
// of about 100 KB within Kafka's 11 one-second samples); the client
// produces 150 KB to app.new in one go, which the broker throttles
// (throttle_time_ms in the response, the connection muted, counted in
// strata_quota_throttled_responses_total{quota="produce"}); the client
// takes the throttled answer as a success.
func runThrottleScenario(t *testing.T, c *Client) {
	if targetKfake() {
		t.Skip("kfake has no client quotas configured like this")
	}
	b := startACLBroker(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.SASL(plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if res, err := kadm.NewClient(cl).AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: kadm.ClientQuotaEntity{{Type: "user", Name: kadm.StringPtr("alice")}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 10000}},
	}}); err != nil || res[0].Err != nil {
		t.Fatalf("alter quotas: %+v %v", res, err)
	}
	before := throttledProduces(t, b)
	var recs []Rec
	for range 150 {
		recs = append(recs, Rec{Value: strp(strings.Repeat("q", 1000))})
	}
	if r := c.Do(t, b.Addr(), Op{Op: opProduce, Topic: "app.new", Records: recs, Compression: "none", SASL: &aclAlice}); r.ErrorCode != 0 {
		t.Fatalf("alice produces 150 KB over her quota: code %d %s", r.ErrorCode, r.Error)
	}
	if after := throttledProduces(t, b); after <= before {
		t.Errorf("no produce response throttled (%v before, %v after)", before, after)
	}
}

// throttledProduces reads strata_quota_throttled_responses_total{quota="produce"}.
func throttledProduces(t *testing.T, b *testBroker) float64 {
	t.Helper()
	resp, err := http.Get("http://" + b.metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, `strata_quota_throttled_responses_total{quota="produce"} `); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	return 0
}

func TestThrottleKafkaJS(t *testing.T) { t.Parallel(); runThrottleScenario(t, kafkaJSClient(t)) }

func TestThrottleSarama(t *testing.T) { t.Parallel(); runThrottleScenario(t, saramaClient()) }

func TestThrottleConfluentKafkaPython(t *testing.T) {
	t.Parallel()
	runThrottleScenario(t, confluentClient(t))
}

func TestThrottleKcat(t *testing.T) {
	t.Parallel()
	if targetKfake() {
		t.Skip("kfake has no client quotas configured like this")
	}
	// kcatDo's produce takes no SASL: run kcat directly.
	path := requireTool(t, "kcat", "-V")
	b := startACLBroker(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.SASL(plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if res, err := kadm.NewClient(cl).AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: kadm.ClientQuotaEntity{{Type: "user", Name: kadm.StringPtr("alice")}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 10000}},
	}}); err != nil || res[0].Err != nil {
		t.Fatalf("alter quotas: %+v %v", res, err)
	}
	before := throttledProduces(t, b)
	in := strings.Repeat(strings.Repeat("q", 1000)+"\n", 150)
	args := []string{"-P", "-t", "app.new", "-X", "acks=all", "-b", b.Addr(), "-X", "security.protocol=sasl_plaintext",
		"-X", "sasl.mechanisms=PLAIN", "-X", "sasl.username=alice", "-X", "sasl.password=alice-secret"}
	if _, stderr, err := kcatRun(ctx, path, []byte(in), args...); err != nil || strings.Contains(stderr, "Delivery failed") {
		t.Fatalf("kcat produces 150 KB over alice's quota: %v: %s", err, stderr)
	}
	if after := throttledProduces(t, b); after <= before {
		t.Errorf("no produce response throttled (%v before, %v after)", before, after)
	}
}
