package compat

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// TestTwoListeners: one broker serves PLAINTEXT and SASL_PLAINTEXT at once
// (kafka-go's CI layout). kcat (librdkafka) lists the cluster through each
// listener and is given the broker's address on that listener; records
// kcat produces through one listener are read through the other;
// confluent-kafka-python produces with SASL/PLAIN on one and fetches
// without SASL on the other.
func TestTwoListeners(t *testing.T) {
	t.Parallel()
	if targetKfake() {
		t.Skip("this test drives Strata's listeners")
	}
	path := requireTool(t, "kcat", "-V")
	b := startBroker(t, brokerOpts{extra: map[string]string{
		"listeners":               "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
		"sasl.enabled.mechanisms": "PLAIN",
		"listener.name.sasl_plaintext.plain.sasl.jaas.config": `org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin-secret";`,
		"auto.create.topics.enable":                           "true",
	}})
	plainAddr, saslAddr := b.srv.ListenerAddr("PLAINTEXT"), b.srv.ListenerAddr("SASL_PLAINTEXT")
	sasl := []string{"-X", "security.protocol=sasl_plaintext", "-X", "sasl.mechanisms=PLAIN", "-X", "sasl.username=admin", "-X", "sasl.password=admin-secret"}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for _, l := range []struct {
		addr  string
		extra []string
	}{{plainAddr, nil}, {saslAddr, sasl}} {
		_, port, _ := net.SplitHostPort(l.addr)
		stdout, stderr, err := kcatRun(ctx, path, nil, append([]string{"-L", "-J", "-b", l.addr}, l.extra...)...)
		if err != nil {
			t.Fatalf("kcat -L on %s: %v: %s", l.addr, err, stderr)
		}
		if !strings.Contains(stdout, fmt.Sprintf(`"brokers":[{"id":1,"name":"127.0.0.1:%s"}]`, port)) {
			t.Errorf("kcat -L on %s: the broker is not listed at this listener's port:\n%s", l.addr, stdout)
		}
	}
	var in strings.Builder
	for i := range 10 {
		fmt.Fprintf(&in, "k%d:v%d\n", i, i)
	}
	if _, stderr, err := kcatRun(ctx, path, []byte(in.String()), "-P", "-K:", "-X", "acks=all", "-b", plainAddr, "-t", "two"); err != nil || strings.Contains(stderr, "Delivery failed") {
		t.Fatalf("kcat produce on PLAINTEXT: %v: %s", err, stderr)
	}
	stdout, stderr, err := kcatRun(ctx, path, nil, append([]string{"-C", "-o", "beginning", "-e", "-f", `%k=%s\n`, "-b", saslAddr, "-t", "two"}, sasl...)...)
	if err != nil || len(strings.Fields(stdout)) != 10 {
		t.Fatalf("kcat consume on SASL_PLAINTEXT: %v: %q %s", err, stdout, stderr)
	}

	c := confluentClient(t)
	one := []Rec{{Key: strp("ck"), Value: strp("cv")}}
	if r := c.Do(t, saslAddr, Op{Op: opProduce, Topic: "two", Records: one, SASL: &SASLAuth{"PLAIN", "admin", "admin-secret"}}); r.ErrorCode != 0 {
		t.Fatalf("confluent-kafka produce on SASL_PLAINTEXT: %d %s", r.ErrorCode, r.Error)
	}
	r := c.Do(t, plainAddr, Op{Op: opFetch, Topic: "two", Offset: -2, Max: 11})
	if r.ErrorCode != 0 || len(r.Records) != 11 {
		t.Fatalf("confluent-kafka fetch on PLAINTEXT: %d records, %d %s", len(r.Records), r.ErrorCode, r.Error)
	}
	if r := c.Do(t, saslAddr, Op{Op: opList}); r.ErrorCode == 0 {
		t.Errorf("confluent-kafka without SASL was served on the SASL listener: %+v", r)
	}
}
