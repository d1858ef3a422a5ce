package workload

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/strata-io/strata/internal/checker"
)

// Drain reads every partition from its log start to its end at
// READ_COMMITTED, as one more session ("drain"), after Stop and after the
// cluster healed. It first waits (bounded by ctx) for the last stable offset
// to reach the high watermark, so transactions left open by killed clients
// are resolved (aborted by their timeout) before it reads. A partition is
// done when the session has read at or past its last stable offset, or
// nothing more arrived for quiet (the tail may be control markers or aborted
// records, which a READ_COMMITTED reader never returns).
func (r *Runner) Drain(ctx context.Context) error {
	const quiet = 3 * time.Second
	r.Stop()
	cl, err := r.client()
	if err != nil {
		return fmt.Errorf("drain: client: %w", err)
	}
	adm := kadm.NewClient(cl)
	var stable map[checker.TP]int64
	for {
		hwm, err1 := r.listAll(ctx, adm.ListEndOffsets)
		lso, err2 := r.listAll(ctx, adm.ListCommittedOffsets)
		if err1 == nil && err2 == nil && len(hwm) == len(r.topics())*int(r.cfg.Partitions) && equalOffsets(hwm, lso) {
			stable = lso
			break
		}
		select {
		case <-ctx.Done():
			cl.Close()
			return fmt.Errorf("drain: last stable offsets never reached the high watermarks (hwm %v, lso %v, errors %v, %v): %w",
				hwm, lso, err1, err2, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
	starts, err := r.startOffsets(ctx, r.topics()...)
	cl.Close()
	if err != nil {
		return fmt.Errorf("drain: %w", err)
	}
	cons, err := r.assignAt("drain", starts)
	if err != nil {
		return fmt.Errorf("drain: client: %w", err)
	}
	defer cons.Close()
	next := map[checker.TP]int64{}
	for tp, o := range starts {
		next[tp] = o
	}
	lastRecord := time.Now()
	for {
		done := true
		for tp, end := range stable {
			if next[tp] < end {
				done = false
			}
		}
		if done || time.Since(lastRecord) > quiet {
			break
		}
		if ctx.Err() != nil {
			return fmt.Errorf("drain: %w (read up to %v of %v)", ctx.Err(), next, stable)
		}
		for _, rec := range r.pollOnce(ctx, cons, "drain", time.Second) {
			lastRecord = time.Now()
			if rec.Offset+1 > next[rec.TP] {
				next[rec.TP] = rec.Offset + 1
			}
		}
	}
	r.drained = true
	r.cfg.Logf("drain: read to %v (last stable offsets %v)", next, stable)
	return nil
}

// listAll lists offsets of every partition of every workload topic.
func (r *Runner) listAll(ctx context.Context, fn func(context.Context, ...string) (kadm.ListedOffsets, error)) (map[checker.TP]int64, error) {
	out := map[checker.TP]int64{}
	for _, topic := range r.topics() {
		offs, err := listed(ctx, fn, topic)
		if err != nil {
			return out, fmt.Errorf("%s: %w", topic, err)
		}
		for p, o := range offs {
			out[checker.TP{Topic: topic, Partition: p}] = o
		}
	}
	return out, nil
}

func listed(ctx context.Context, fn func(context.Context, ...string) (kadm.ListedOffsets, error), topic string) (map[int32]int64, error) {
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	l, err := fn(lctx, topic)
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	var perr error
	l.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			perr = o.Err
			return
		}
		out[o.Partition] = o.Offset
	})
	return out, perr
}

func equalOffsets(a, b map[checker.TP]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for p, o := range a {
		if b[p] != o {
			return false
		}
	}
	return true
}
