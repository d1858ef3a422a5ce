package config

import (
	"errors"
	"strings"
	"testing"
)

const ibJAAS = `org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" password="b-secret" user_broker="b-secret";`

func kraftWith(extra map[string]string) (*Broker, error) {
	vals := map[string]string{
		"process.roles": "broker,controller", "node.id": "1", "controller.listener.names": "CONTROLLER",
		"controller.quorum.voters": "1@127.0.0.1:19193",
		"listeners":                "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:19193",
	}
	for k, v := range extra {
		vals[k] = v
	}
	return LoadBroker("", nil, vals)
}

// TestSeveralListeners: kafka-go's CI layout (PLAINTEXT and SASL_PLAINTEXT
// on one node), custom names through the protocol map, advertised
// addresses per listener, per-listener settings winning over the
// unprefixed ones, and the inter-broker listener by Kafka's rules.
func TestSeveralListeners(t *testing.T) {
	b, err := kraftWith(map[string]string{
		"advertised.listeners":                                 "PLAINTEXT://localhost:9092,SASL_PLAINTEXT://localhost:9093",
		"sasl.enabled.mechanisms":                              "PLAIN,SCRAM-SHA-256",
		"listener.name.sasl_plaintext.sasl.enabled.mechanisms": "SCRAM-SHA-512",
	})
	if err != nil {
		t.Fatal(err)
	}
	cls := b.ClientListeners()
	if len(cls) != 2 || cls[0].Name != "PLAINTEXT" || cls[1].Protocol != ProtocolSASLPlaintext {
		t.Fatalf("client listeners %+v", cls)
	}
	adv := b.AdvertisedListeners()
	if len(adv) != 2 || adv[0].Addr() != "localhost:9092" || adv[1].Addr() != "localhost:9093" {
		t.Errorf("advertised %+v", adv)
	}
	if m := b.SASLMechanismsFor(cls[1]); len(m) != 1 || m[0] != "SCRAM-SHA-512" {
		t.Errorf("per-listener mechanisms %v", m)
	}
	if m := b.SASLMechanismsFor(cls[0]); m != nil {
		t.Errorf("PLAINTEXT mechanisms %v", m)
	}
	if ib, ok := b.InterBrokerListener(); !ok || ib.Name != "PLAINTEXT" {
		t.Errorf("inter-broker listener %+v (security.inter.broker.protocol's default names PLAINTEXT)", ib)
	}
	ic, err := b.InterBrokerClient()
	if err != nil || ic.TLS != nil || ic.SASLMechanism != "" || ic.Unavailable != "" {
		t.Errorf("inter-broker client %+v, %v", ic, err)
	}

	// Custom names, the inter-broker listener SASL with PLAIN credentials.
	b, err = kraftWith(map[string]string{
		"listeners":                                     "EXTERNAL://127.0.0.1:0,INTERNAL://127.0.0.1:0,CONTROLLER://127.0.0.1:19193",
		"listener.security.protocol.map":                "EXTERNAL:SASL_PLAINTEXT,INTERNAL:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
		"inter.broker.listener.name":                    "internal",
		"sasl.enabled.mechanisms":                       "PLAIN",
		"sasl.mechanism.inter.broker.protocol":          "PLAIN",
		"listener.name.internal.plain.sasl.jaas.config": ibJAAS,
		"listener.name.external.plain.sasl.jaas.config": `org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="a";`,
	})
	if err != nil {
		t.Fatal(err)
	}
	ic, err = b.InterBrokerClient()
	if err != nil || ic.Listener.Name != "INTERNAL" || ic.SASLMechanism != "PLAIN" || ic.Username != "broker" || ic.Password != "b-secret" {
		t.Errorf("inter-broker client %+v, %v", ic, err)
	}
	users, _ := b.PlainUsersFor(b.ClientListeners()[0])
	if len(users) != 1 || users["alice"] != "a" {
		t.Errorf("EXTERNAL users %v", users)
	}

	// A SASL inter-broker listener without sasl.mechanism.inter.broker.protocol
	// starts, but has no credentials (replication is refused with this reason).
	b, err = kraftWith(map[string]string{
		"security.inter.broker.protocol": "SASL_PLAINTEXT", "sasl.enabled.mechanisms": "SCRAM-SHA-256",
	})
	if err != nil {
		t.Fatal(err)
	}
	if ic, err := b.InterBrokerClient(); err != nil || !strings.Contains(ic.Unavailable, "sasl.mechanism.inter.broker.protocol is not set") {
		t.Errorf("inter-broker client %+v, %v", ic, err)
	}
}

// TestListenerSettingsRefused: per-listener settings Kafka reads but that
// would not be used, or that Strata does not take per listener, are
// refused with a message, as are Kafka's inter-broker rules.
func TestListenerSettingsRefused(t *testing.T) {
	cases := []struct {
		name  string
		extra map[string]string
		want  string
	}{
		{"unknown listener", map[string]string{"sasl.enabled.mechanisms": "PLAIN", "listener.name.sasl_plaintext.plain.sasl.jaas.config": ibJAAS[:0] + `org.apache.kafka.common.security.plain.PlainLoginModule required user_a="b";`,
			"listener.name.other.ssl.client.auth": "required"}, "listener.name.other.ssl.client.auth is set but listeners"},
		{"upper-case name", map[string]string{"listener.name.PLAINTEXT.ssl.client.auth": "required"}, "is written in lower case"},
		{"not per listener", map[string]string{"listener.name.plaintext.num.partitions": "3"}, "num.partitions cannot be set per listener"},
		{"connection creation rate per listener (KIP-612)", map[string]string{"listener.name.plaintext.max.connection.creation.rate": "5"},
			"max.connection.creation.rate is not supported: Strata does not throttle the rate of new connections"},
		{"connection creation rate (KIP-612)", map[string]string{"max.connection.creation.rate": "5"},
			"max.connection.creation.rate is not supported: Strata does not throttle the rate of new connections"},
		{"ssl on plaintext", map[string]string{"sasl.enabled.mechanisms": "SCRAM-SHA-256", "listener.name.plaintext.ssl.client.auth": "required"}, "listener.name.plaintext.ssl.client.auth is set but listener PLAINTEXT is PLAINTEXT"},
		{"bad value", map[string]string{"listener.name.plaintext.ssl.client.auth": "always"}, "must be one of none, requested, required"},
		{"unknown mechanism", map[string]string{"listener.name.sasl_plaintext.gssapi.sasl.jaas.config": "x"}, "SASL mechanism \"gssapi\" is not supported"},
		{"both inter-broker settings", map[string]string{"sasl.enabled.mechanisms": "SCRAM-SHA-256", "inter.broker.listener.name": "PLAINTEXT", "security.inter.broker.protocol": "PLAINTEXT"},
			"only one of inter.broker.listener.name and security.inter.broker.protocol should be set"},
		{"mechanism not enabled", map[string]string{"sasl.enabled.mechanisms": "SCRAM-SHA-256", "security.inter.broker.protocol": "SASL_PLAINTEXT", "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512"},
			"sasl.mechanism.inter.broker.protocol must be included in sasl.enabled.mechanisms when SASL is used for inter-broker communication"},
		{"no credentials", map[string]string{"sasl.enabled.mechanisms": "SCRAM-SHA-256", "security.inter.broker.protocol": "SASL_PLAINTEXT", "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256"},
			"listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config is not set"},
		{"credentials unused", map[string]string{"sasl.enabled.mechanisms": "SCRAM-SHA-256",
			"listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": `org.apache.kafka.common.security.scram.ScramLoginModule required username="b" password="p";`},
			"would not be used"},
		{"mechanism on plaintext inter-broker", map[string]string{"sasl.enabled.mechanisms": "SCRAM-SHA-256", "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256"},
			"the inter-broker listener (PLAINTEXT) is not SASL_PLAINTEXT or SASL_SSL"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := kraftWith(c.extra)
			if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want it to contain %q", err, c.want)
			}
			if err != nil && strings.Contains(err.Error(), "b-secret") {
				t.Errorf("error shows a password: %v", err)
			}
		})
	}
}
