package cleaner

import (
	"math"

	"github.com/strata-io/strata/internal/storage"
)

// cleanable is the cleanable range of one log at one instant, computed like
// Kafka's LogCleanerManager.cleanableOffsets / calculateCleanableBytes.
type cleanable struct {
	FirstDirty       int64 // first offset not yet cleaned (checkpoint)
	FirstUncleanable int64 // segment-aligned end of the range that may be cleaned
	CleanBytes       int64 // bytes of segments overlapping [logStart, firstDirty)
	DirtyBytes       int64 // bytes of segments overlapping [firstDirty, firstUncleanable)
	Ratio            float64
	// OldestDirtyTs is the smallest first-batch timestamp (> 0) of the
	// segments holding dirty offsets (active one included), -1 if none.
	OldestDirtyTs int64
	MaxLagDue     bool // max.compaction.lag.ms has passed for a cleanable record
	// OldestCleanableTs is the smallest first-batch timestamp (> 0) of the
	// cleanable segments, -1 if none.
	OldestCleanableTs int64
}

// computeCleanable works out what a round may clean. ckpt < 0 means no
// checkpoint. lso bounds the range (the high watermark until transactions
// exist). nowMs is the wall clock in ms.
func computeCleanable(segs []storage.SegmentInfo, logStart, leo, lso, ckpt int64, cfg storage.Config, nowMs int64) cleanable {
	c := cleanable{OldestDirtyTs: -1}
	c.FirstDirty = ckpt
	if ckpt < logStart || ckpt > leo {
		c.FirstDirty = logStart
	}
	fu := lso
	for _, s := range segs {
		if s.Active && s.BaseOffset < fu {
			fu = s.BaseOffset
		}
	}
	if cfg.MinCompactionLagMs > 0 {
		for _, s := range segs {
			if s.Active || s.NextOffset <= c.FirstDirty || s.BaseOffset >= fu {
				continue
			}
			if s.LargestTimestamp > nowMs-cfg.MinCompactionLagMs {
				fu = min(fu, s.BaseOffset)
				break
			}
		}
	}
	// Round down to the base of the segment holding fu: cleaning is
	// segment-granular.
	aligned := int64(-1)
	for _, s := range segs {
		if s.BaseOffset <= fu {
			aligned = s.BaseOffset
		}
	}
	if aligned < 0 {
		aligned = c.FirstDirty
	}
	c.FirstUncleanable = aligned
	earliestCleanable := int64(math.MaxInt64)
	for _, s := range segs {
		if s.BaseOffset < c.FirstDirty && s.NextOffset > logStart {
			c.CleanBytes += s.Size
		}
		if s.NextOffset > c.FirstDirty {
			if s.FirstTimestamp > 0 && (c.OldestDirtyTs < 0 || s.FirstTimestamp < c.OldestDirtyTs) {
				c.OldestDirtyTs = s.FirstTimestamp
			}
			if s.BaseOffset < c.FirstUncleanable {
				c.DirtyBytes += s.Size
				if s.FirstTimestamp > 0 && s.FirstTimestamp < earliestCleanable {
					earliestCleanable = s.FirstTimestamp
				}
			}
		}
	}
	c.OldestCleanableTs = -1
	if earliestCleanable != math.MaxInt64 {
		c.OldestCleanableTs = earliestCleanable
	}
	if total := c.CleanBytes + c.DirtyBytes; total > 0 {
		c.Ratio = float64(c.DirtyBytes) / float64(total)
	}
	if lag := cfg.MaxCompactionLagMs; c.DirtyBytes > 0 && lag > 0 && lag < math.MaxInt64 &&
		earliestCleanable != math.MaxInt64 && earliestCleanable < nowMs-lag {
		c.MaxLagDue = true
	}
	return c
}

// eligible reports whether the background loop should clean the log:
// dirty ratio strictly above min.cleanable.dirty.ratio, or a cleanable
// record older than max.compaction.lag.ms.
func (c cleanable) eligible(minRatio float64) bool {
	if c.FirstUncleanable <= c.FirstDirty || c.DirtyBytes == 0 {
		return false
	}
	return c.Ratio > minRatio || c.MaxLagDue
}
