package config

import (
	"strings"
	"testing"
)

// TestConnectionLimitSettings: Kafka's names, defaults and validation rules
// (KafkaConfig.validateValues) for the connection limits.
func TestConnectionLimitSettings(t *testing.T) {
	b, err := LoadBroker("", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"max.connections": "2147483647", "max.connections.per.ip": "2147483647",
		"max.connections.per.ip.overrides": "", "connections.max.idle.ms": "600000", "queued.max.request.bytes": "-1"} {
		if got := b.Get(name); got != want {
			t.Errorf("%s default %q, want %q", name, got, want)
		}
	}
	for _, tc := range []struct {
		set  map[string]string
		want string // "" = valid
	}{
		{map[string]string{"max.connections.per.ip": "0"}, "max.connections.per.ip can be set to zero only if max.connections.per.ip.overrides property is set."},
		{map[string]string{"max.connections.per.ip": "0", "max.connections.per.ip.overrides": "10.0.0.1:5"}, ""},
		{map[string]string{"max.connections.per.ip.overrides": "h/x:5"}, "invalid addresses"},
		{map[string]string{"max.connections.per.ip.overrides": "host"}, "not host:count"},
		{map[string]string{"max.connections.per.ip.overrides": "host:-1"}, "non-negative"},
		{map[string]string{"queued.max.request.bytes": "1000"}, "queued.max.request.bytes must be larger or equal to socket.request.max.bytes"},
		{map[string]string{"queued.max.request.bytes": "104857600"}, ""},
		{map[string]string{"queued.max.request.bytes": "0"}, ""},
		{map[string]string{"max.connections": "-1"}, "max.connections"},
		{map[string]string{"connections.max.idle.ms": "-1"}, ""},
	} {
		_, err := LoadBroker("", nil, tc.set)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: %v", tc.set, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v: error %v, want one mentioning %q", tc.set, err, tc.want)
		}
	}
	got, err := ConnectionOverrides("hostName:100, 127.0.0.1:200")
	if err != nil || got["hostName"] != 100 || got["127.0.0.1"] != 200 {
		t.Errorf("overrides: %v %v", got, err)
	}
}

// TestListenerMaxConnections: listener.name.<l>.max.connections is taken
// per listener (default max.connections, Kafka's prefix override),
// validated as max.connections, refused for a listener that does not
// exist, and updatable dynamically at the cluster default or per broker.
func TestListenerMaxConnections(t *testing.T) {
	two := map[string]string{"listeners": "EXTERNAL://127.0.0.1:9092,INTERNAL://127.0.0.1:9093",
		"listener.security.protocol.map": "EXTERNAL:PLAINTEXT,INTERNAL:PLAINTEXT", "inter.broker.listener.name": "INTERNAL",
		"max.connections": "50", "listener.name.external.max.connections": "7"}
	b, err := LoadBroker("", nil, two)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.ListenerMaxConnections("EXTERNAL"); got != 7 {
		t.Errorf("EXTERNAL: %d, want 7", got)
	}
	if got := b.ListenerMaxConnections("INTERNAL"); got != 50 {
		t.Errorf("INTERNAL: %d, want max.connections 50", got)
	}
	for _, tc := range []struct {
		set  map[string]string
		want string
	}{
		{map[string]string{"listener.name.external.max.connections": "-1"}, "max.connections"},
		{map[string]string{"listener.name.other.max.connections": "5"}, "no client listener OTHER"},
	} {
		set := map[string]string{}
		for k, v := range two {
			set[k] = v
		}
		for k, v := range tc.set {
			set[k] = v
		}
		if _, err := LoadBroker("", nil, set); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one mentioning %q", tc.set, err, tc.want)
		}
	}
	for _, perBroker := range []bool{false, true} {
		if err := ValidateDynamic(map[string]string{"listener.name.external.max.connections": "9", "max.connections": "10",
			"max.connections.per.ip": "3", "max.connections.per.ip.overrides": "10.0.0.1:5"}, perBroker); err != nil {
			t.Errorf("connection limits dynamically (per broker %v): %v", perBroker, err)
		}
	}
	if err := ValidateDynamic(map[string]string{"listener.name.external.max.connections": "-2"}, false); err == nil {
		t.Error("a negative listener max.connections was accepted dynamically")
	}
	if err := ValidateDynamic(map[string]string{"listener.name.external.ssl.keystore.location": "/x"}, true); err == nil ||
		!strings.Contains(err.Error(), "cannot apply these configs while running") {
		t.Errorf("a per-listener TLS setting dynamically: %v", err)
	}
	nb, ignored, err := b.WithDynamic(map[string]string{"listener.name.external.max.connections": "9"}, map[string]string{"max.connections": "60"})
	if err != nil || len(ignored) > 0 {
		t.Fatalf("with dynamic: %v %v", ignored, err)
	}
	if nb.ListenerMaxConnections("EXTERNAL") != 9 || nb.ListenerMaxConnections("INTERNAL") != 60 {
		t.Errorf("dynamic: EXTERNAL %d INTERNAL %d, want 9 and 60", nb.ListenerMaxConnections("EXTERNAL"), nb.ListenerMaxConnections("INTERNAL"))
	}
}
