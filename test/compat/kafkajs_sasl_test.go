package compat

import (
	"fmt"
	"strings"
	"testing"
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
	b, _ := startSASLBroker(t)
	for i, auth := range saslUsers {
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
