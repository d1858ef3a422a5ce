package compat

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// TestKafkaJSSASL runs kafkajs against a SASL_PLAINTEXT listener with
// PLAIN (a JAAS user) and SCRAM-SHA-256/512 (users created with kadm):
// each creates a topic, produces and consumes; a wrong password is
// SASL_AUTHENTICATION_FAILED.
func TestKafkaJSSASL(t *testing.T) {
	t.Parallel()
	if targetKfake() {
		t.Skip("this test drives Strata's SASL listener")
	}
	c := kafkaJSClient(t)
	b := startBroker(t, brokerOpts{extra: map[string]string{
		"listeners":               "SASL_PLAINTEXT://127.0.0.1:0",
		"sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
		"listener.name.sasl_plaintext.plain.sasl.jaas.config": `org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin-secret";`,
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.SASL(plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "js256", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "pw-256"},
		{User: "js512", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "pw-512"},
	}); err != nil {
		t.Fatal(err)
	}
	for i, auth := range []SASLAuth{{"PLAIN", "admin", "admin-secret"}, {"SCRAM-SHA-256", "js256", "pw-256"}, {"SCRAM-SHA-512", "js512", "pw-512"}} {
		topic := fmt.Sprintf("js-sasl-%d", i)
		c.Must(t, b.Addr(), Op{Op: opCreate, Topic: topic, Partitions: 1, SASL: &auth})
		var recs []Rec
		for j := range 3 {
			recs = append(recs, Rec{Value: strp(fmt.Sprint(j))})
		}
		c.Must(t, b.Addr(), Op{Op: opProduce, Topic: topic, Records: recs, SASL: &auth})
		got := c.Must(t, b.Addr(), Op{Op: opFetch, Topic: topic, Offset: -2, Max: 3, SASL: &auth}).Records
		if len(got) != 3 || *got[2].Value != "2" {
			t.Errorf("%s: fetched %+v", auth.Mechanism, got)
		}
	}
	r := c.Do(t, b.Addr(), Op{Op: "list_topics", SASL: &SASLAuth{"SCRAM-SHA-256", "js256", "wrong"}})
	// kafkajs raises KafkaJSSASLAuthenticationError with the broker's
	// message but without the code.
	if r.ErrorCode == 0 || !strings.Contains(r.Error, "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256") {
		t.Errorf("wrong password: %+v, want Kafka's SASL_AUTHENTICATION_FAILED message", r)
	}
}
