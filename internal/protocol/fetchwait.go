package protocol

import (
	"context"
	"reflect"
	"time"
)

// waitAny blocks until one channel is closed (true), or d passes or ctx
// ends (false). Replica fetches wait on their partitions' log-end signals
// with it; consumer fetches use one broker.Waiter instead (no cost per
// partition per wake-up).
func waitAny(ctx context.Context, chans []<-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	if len(chans) == 1 {
		select {
		case <-chans[0]:
			return true
		case <-t.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
	cases := make([]reflect.SelectCase, 0, len(chans)+2)
	cases = append(cases,
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(t.C)},
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())})
	for _, c := range chans {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(c)})
	}
	i, _, _ := reflect.Select(cases)
	return i >= 2
}
