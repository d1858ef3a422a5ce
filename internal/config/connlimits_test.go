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
