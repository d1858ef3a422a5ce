package config

import (
	"strings"
	"testing"
)

// TestReplicationThrottlesRefused: Kafka's replication throttle rates are
// refused with a reason (INVALID_CONFIG on the wire, a startup error in a file), never accepted and ignored.
func TestReplicationThrottlesRefused(t *testing.T) {
	for _, name := range []string{"leader.replication.throttled.rate", "follower.replication.throttled.rate"} {
		err := DefaultBroker().Set(name, "1048576")
		if err == nil || !strings.Contains(err.Error(), "does not throttle replication") {
			t.Fatalf("%s: %v", name, err)
		}
	}
}
