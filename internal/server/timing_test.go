package server

import (
	"testing"

	"github.com/strata-io/strata/internal/etcdnode"
)

// The store's Raft timing follows broker.session.timeout.ms: etcd's
// default at Kafka's default session, proportionally shorter below it.
func TestStoreTimingFor(t *testing.T) {
	for _, c := range []struct {
		sessionMs int64
		want      etcdnode.Timing
	}{
		{9000, etcdnode.DefaultTiming},
		{30000, etcdnode.DefaultTiming},
		{4000, etcdnode.Timing{TickMs: 44, ElectionMs: 440}},
		{1000, etcdnode.Timing{TickMs: 11, ElectionMs: 110}},
		{100, etcdnode.Timing{TickMs: 10, ElectionMs: 100}},
	} {
		if got := storeTimingFor(c.sessionMs); got != c.want {
			t.Errorf("session %d ms: %+v, want %+v", c.sessionMs, got, c.want)
		}
	}
}
