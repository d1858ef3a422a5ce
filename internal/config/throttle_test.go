package config

import (
	"strings"
	"testing"
)

// TestReplicationThrottleSettings: Kafka's replication throttles (KIP-73)
// are accepted with Kafka's types, defaults and validation: the rates are
// dynamic cluster-wide broker settings (Long.MAX_VALUE: unbounded), the
// throttled-replica lists are topic settings in Kafka's
// ThrottledReplicaListValidator format.
func TestReplicationThrottleSettings(t *testing.T) {
	for _, name := range []string{"leader.replication.throttled.rate", "follower.replication.throttled.rate"} {
		b := DefaultBroker()
		if got := b.Int64(name); got != 1<<63-1 {
			t.Fatalf("%s default %d", name, got)
		}
		if err := b.Set(name, "1048576"); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := b.Set(name, "-1"); err == nil {
			t.Fatalf("%s=-1 accepted", name)
		}
		if Mode(name) != ClusterWide {
			t.Fatalf("%s mode %s", name, Mode(name))
		}
		if err := ValidateDynamic(map[string]string{name: "1000"}, false); err != nil {
			t.Fatalf("%s at the cluster default: %v", name, err)
		}
	}
	for _, name := range []string{"leader.replication.throttled.replicas", "follower.replication.throttled.replicas"} {
		for _, ok := range []string{"", "*", " * ", "0:1", "0:1,1:2", "0:1, 1:2", "0:1,,1:2"} {
			if err := ValidateTopicConfig(name, ok); err != nil {
				t.Errorf("%s=%q refused: %v", name, ok, err)
			}
		}
		for _, bad := range []string{"0", "a:1", "0:1,*", "**", "0:-1", "0:1:2"} {
			err := ValidateTopicConfig(name, bad)
			if err == nil || !strings.Contains(err.Error(), "[partitionId]:[brokerId]") {
				t.Errorf("%s=%q: %v", name, bad, err)
			}
		}
	}
}
