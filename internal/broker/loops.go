package broker

import (
	"context"
	"time"
)

// StartLoops starts the background loops: retention, idle segment roll,
// time-based flush (flush.ms) and checkpoint writes. StopLoops (or Close)
// stops them.
func (b *Broker) StartLoops() {
	ctx, cancel := context.WithCancel(context.Background())
	b.stop = cancel
	b.every(ctx, time.Duration(b.Config().Int64("log.retention.check.interval.ms"))*time.Millisecond, b.retentionPass)
	b.every(ctx, time.Duration(b.Config().Int64("strata.idle.roll.check.interval.ms"))*time.Millisecond, b.rollPass)
	b.every(ctx, time.Second, b.flushPass)
	b.every(ctx, time.Second, b.reservePass)
	// Kafka's ReplicaManager.startHighWatermarkCheckPointThread: the high
	// watermarks of replicated partitions, read back at the next start.
	b.every(ctx, time.Duration(b.Config().Int64("replica.high.watermark.checkpoint.interval.ms"))*time.Millisecond, func(time.Time) {
		for _, s := range b.syncers {
			if err := s.WriteHighWatermarks(); err != nil {
				b.logger.Warn("write high watermark checkpoint", "err", err)
			}
		}
	})
	if iv := b.Config().Int64("log.flush.offset.checkpoint.interval.ms"); iv > 0 {
		b.every(ctx, time.Duration(iv)*time.Millisecond, func(time.Time) {
			if err := b.writeCheckpoints(); err != nil {
				b.logger.Warn("write checkpoints", "err", err)
			}
		})
	}
}

// StopLoops stops the background loops and waits for them.
func (b *Broker) StopLoops() {
	if b.stop != nil {
		b.stop()
	}
	b.loops.Wait()
}

// every runs fn every interval until ctx ends.
func (b *Broker) every(ctx context.Context, interval time.Duration, fn func(now time.Time)) {
	if interval <= 0 {
		return
	}
	b.loops.Add(1)
	go func() {
		defer b.loops.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				fn(now)
			}
		}
	}()
}

// retentionPass applies retention to every log (storage deletes by
// time/size only when the log's policy includes delete, and always below
// the log start offset).
func (b *Broker) retentionPass(now time.Time) {
	for _, t := range b.Topics() {
		for _, p := range t.Partitions {
			if n, err := p.Log.ApplyRetention(now); err != nil {
				b.logger.Warn("retention", "topic", t.Name, "partition", p.Index, "err", err)
			} else if n > 0 {
				b.logger.Info("retention deleted segments", "topic", t.Name, "partition", p.Index, "segments", n)
			}
		}
	}
}

// rollPass rolls idle active segments older than segment.ms.
func (b *Broker) rollPass(now time.Time) {
	for _, t := range b.Topics() {
		for _, p := range t.Partitions {
			if _, err := p.Log.MaybeRoll(now); err != nil {
				b.logger.Warn("idle roll", "topic", t.Name, "partition", p.Index, "err", err)
			}
		}
	}
}

// flushPass flushes logs whose flush.ms has elapsed since the last flush.
func (b *Broker) flushPass(now time.Time) {
	for _, t := range b.Topics() {
		for _, p := range t.Partitions {
			cfg := p.Log.Config()
			if cfg.FlushMs <= 0 || cfg.FlushMs >= 1<<62 {
				if cfg.FlushMs != 0 {
					continue
				}
			}
			last := p.lastFlush.Load()
			if now.UnixMilli()-last < cfg.FlushMs {
				continue
			}
			if p.Log.RecoveryPoint() >= p.Log.LogEndOffset() {
				p.lastFlush.Store(now.UnixMilli())
				continue
			}
			if err := p.Log.Flush(); err != nil {
				b.logger.Warn("flush", "topic", t.Name, "partition", p.Index, "err", err)
				continue
			}
			p.lastFlush.Store(now.UnixMilli())
		}
	}
}

// reservePass measures each log dir's free space against its reserve
// (strata.log.min.free.bytes): one statfs per log dir per second, so space
// taken by others (the metadata store) or freed (retention, an operator)
// is seen without a system call per append.
func (b *Broker) reservePass(time.Time) {
	for dir, r := range b.reserves {
		if err := r.Measure(); err != nil {
			b.logger.Warn("measure free space", "dir", dir, "err", err)
		}
	}
}
