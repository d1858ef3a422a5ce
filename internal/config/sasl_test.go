package config

import (
	"errors"
	"maps"
	"strings"
	"testing"
)

const testJAAS = `org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret" user_bob='b\"ob';`

func saslBroker(extra map[string]string) (*Broker, error) {
	ovr := map[string]string{
		"listeners":               "SASL_PLAINTEXT://127.0.0.1:0",
		"sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
		"listener.name.sasl_plaintext.plain.sasl.jaas.config": testJAAS,
	}
	for k, v := range extra {
		if v == "-" {
			delete(ovr, k)
			continue
		}
		ovr[k] = v
	}
	return LoadBroker("", nil, ovr)
}

func TestSASLValid(t *testing.T) {
	b, err := saslBroker(nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(b.SASLMechanisms(), ","); got != "PLAIN,SCRAM-SHA-256" {
		t.Errorf("mechanisms %q", got)
	}
	users, err := b.PlainUsers()
	if err != nil || !maps.Equal(users, map[string]string{"alice": "alice-secret", "bob": `b"ob`}) {
		t.Errorf("users %v %v", users, err)
	}
	if tc, err := b.ServerTLS(); tc != nil || err != nil {
		t.Errorf("SASL_PLAINTEXT has TLS: %v %v", tc, err)
	}
	b, err = saslBroker(map[string]string{"sasl.enabled.mechanisms": "SCRAM-SHA-512", "listener.name.sasl_plaintext.plain.sasl.jaas.config": "-"})
	if err != nil {
		t.Fatal(err)
	}
	if users, _ := b.PlainUsers(); len(users) != 0 {
		t.Errorf("SCRAM only: PLAIN users %v", users)
	}
	p := genPKI(t)
	b, err = saslBroker(map[string]string{"listeners": "SASL_SSL://127.0.0.1:0", "ssl.keystore.location": p.ServerKeystore,
		"listener.name.sasl_plaintext.plain.sasl.jaas.config": "-", "listener.name.sasl_ssl.plain.sasl.jaas.config": testJAAS})
	if err != nil {
		t.Fatal(err)
	}
	if tc, err := b.ServerTLS(); tc == nil || err != nil {
		t.Errorf("SASL_SSL without TLS: %v", err)
	}
	if users, _ := b.PlainUsers(); len(users) != 2 {
		t.Errorf("SASL_SSL users %v", users)
	}
	d := DefaultBroker()
	if d.SASLMechanisms() != nil {
		t.Error("PLAINTEXT listener has SASL mechanisms")
	}
}

func TestSASLSettingsRejected(t *testing.T) {
	const jaasName = "listener.name.sasl_plaintext.plain.sasl.jaas.config"
	cases := []struct {
		name  string
		extra map[string]string
		want  string
	}{
		{"default mechanisms", map[string]string{"sasl.enabled.mechanisms": "-", jaasName: "-"}, `invalid value "GSSAPI" for configuration sasl.enabled.mechanisms: GSSAPI (Kafka's default) is not supported (Strata has no Kerberos): set sasl.enabled.mechanisms to a subset of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512`},
		{"gssapi", map[string]string{"sasl.enabled.mechanisms": "PLAIN,GSSAPI"}, "GSSAPI is not supported (Strata has no Kerberos)"},
		{"oauthbearer", map[string]string{"sasl.enabled.mechanisms": "OAUTHBEARER"}, `invalid value "OAUTHBEARER" for configuration sasl.enabled.mechanisms: OAUTHBEARER is not supported (allowed: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)`},
		{"unknown mechanism", map[string]string{"sasl.enabled.mechanisms": "SCRAM-SHA-1"}, `unknown or unsupported SASL mechanism "SCRAM-SHA-1"`},
		{"empty mechanisms", map[string]string{"sasl.enabled.mechanisms": ""}, "sasl.enabled.mechanisms is empty"},
		{"twice", map[string]string{"sasl.enabled.mechanisms": "PLAIN,PLAIN"}, `"PLAIN" is listed twice`},
		{"plain without users", map[string]string{jaasName: "-"}, "sasl.enabled.mechanisms of listener SASL_PLAINTEXT includes PLAIN but listener.name.sasl_plaintext.plain.sasl.jaas.config is not set"},
		{"users without plain", map[string]string{"sasl.enabled.mechanisms": "SCRAM-SHA-256"}, "does not include PLAIN, so it would not be used"},
		{"other listener's users", map[string]string{"listener.name.sasl_ssl.plain.sasl.jaas.config": testJAAS}, "listener.name.sasl_ssl.plain.sasl.jaas.config is set but listeners (SASL_PLAINTEXT://127.0.0.1:0) has no client listener SASL_SSL"},
		{"sasl on plaintext", map[string]string{"listeners": "PLAINTEXT://127.0.0.1:0", jaasName: "-"}, "sasl.enabled.mechanisms is set but no listener in listeners (PLAINTEXT://127.0.0.1:0) is SASL_PLAINTEXT or SASL_SSL"},
		{"jaas on plaintext", map[string]string{"listeners": "PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "-"}, jaasName + " is set but listeners (PLAINTEXT://127.0.0.1:0) has no client listener SASL_PLAINTEXT"},
		{"ssl on sasl_plaintext", map[string]string{"ssl.client.auth": "required"}, "ssl.client.auth is set but no listener in listeners (SASL_PLAINTEXT://127.0.0.1:0) is SSL or SASL_SSL"},
		{"sasl_ssl without keystore", map[string]string{"listeners": "SASL_SSL://127.0.0.1:0", jaasName: "-", "listener.name.sasl_ssl.plain.sasl.jaas.config": testJAAS}, "uses TLS but no key store is set"},
		{"client sasl.jaas.config", map[string]string{"sasl.jaas.config": testJAAS}, "sasl.jaas.config is a client setting in Kafka and not read by brokers"},
		{"reauth", map[string]string{"connections.max.reauth.ms": "3600000"}, `invalid value "3600000" for configuration connections.max.reauth.ms: re-authentication (KIP-368) is not supported`},
		{"jaas no semicolon", map[string]string{jaasName: `org.apache.kafka.common.security.plain.PlainLoginModule required user_a="x"`}, `invalid value "[hidden]" for configuration ` + jaasName + `: malformed JAAS entry: missing the terminating ';'`},
		{"jaas module", map[string]string{jaasName: `org.apache.kafka.common.security.scram.ScramLoginModule required;`}, `login module "org.apache.kafka.common.security.scram.ScramLoginModule" is not supported`},
		{"jaas flag", map[string]string{jaasName: `org.apache.kafka.common.security.plain.PlainLoginModule needed user_a="x";`}, `login module flag "needed"`},
		{"jaas no users", map[string]string{jaasName: `org.apache.kafka.common.security.plain.PlainLoginModule required;`}, "no users"},
		{"jaas inter-broker", map[string]string{jaasName: `org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="p" user_admin="p";`}, "has username and password, the broker's own credentials, but they would not be used"},
		{"jaas unquoted end", map[string]string{jaasName: `org.apache.kafka.common.security.plain.PlainLoginModule required user_a="x;`}, "unterminated quoted value"},
		{"jaas missing value", map[string]string{jaasName: `org.apache.kafka.common.security.plain.PlainLoginModule required user_a=;`}, `expected name="value"`},
		{"jaas two modules", map[string]string{jaasName: testJAAS + testJAAS}, "exactly one login module"},
		{"jaas duplicate", map[string]string{jaasName: `org.apache.kafka.common.security.plain.PlainLoginModule required user_a="x" user_a="y";`}, "option user_a is listed twice"},
		{"jaas empty password", map[string]string{jaasName: `org.apache.kafka.common.security.plain.PlainLoginModule required user_a="";`}, "user a has an empty password"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := saslBroker(c.extra)
			if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want it to contain %q", err, c.want)
			}
			if err != nil && strings.Contains(err.Error(), "alice-secret") {
				t.Errorf("error shows a password: %v", err)
			}
		})
	}
}

func FuzzParsePlainJAAS(f *testing.F) {
	f.Add(testJAAS)
	f.Add(`org.apache.kafka.common.security.plain.PlainLoginModule required user_a=b;`)
	f.Add(`x y "z`)
	f.Fuzz(func(t *testing.T, v string) {
		users, err := ParsePlainJAAS(v)
		if err == nil && len(users) == 0 {
			t.Fatal("no error and no users")
		}
	})
}
