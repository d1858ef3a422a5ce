package group

import "github.com/strata-io/strata/internal/clock"

// Clock is the coordinator's time source (clock.Real in production, a
// clock.Manual in tests, so session and rebalance timeouts fire without
// sleeping).
type Clock = clock.Clock

// Timer is a pending Clock.AfterFunc call.
type Timer = clock.Timer

func stopTimer(t Timer) {
	if t != nil {
		t.Stop()
	}
}
