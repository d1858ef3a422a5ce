package group

import (
	"testing"
	"time"
)

// Kafka's first initial-rebalance window is group.initial.rebalance.delay.ms
// even when the members' rebalance timeout is shorter (InitialDelayedJoin /
// tryCompleteInitialRebalanceElseSchedule: delay = initial delay, remaining =
// max(rebalanceTimeout - initialDelay, 0)).
func TestInitialRebalanceDelayLongerThanRebalanceTimeout(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.InitialRebalanceDelay = 3 * time.Second })
	r := joinReq("g", "", nil, "t")
	r.Version = 2 // no KIP-394, like kafka-go
	r.RebalanceTimeoutMillis = 2000
	ch := h.joinAsync(r)
	h.waitParked("g", 1)
	h.clk.Advance(2500 * time.Millisecond)
	notReady(t, ch)
	h.clk.Advance(500 * time.Millisecond)
	if j := recv(t, ch); j.ErrorCode != 0 || j.Generation != 1 {
		t.Fatalf("join after the 3s initial delay: %+v", j)
	}
}
