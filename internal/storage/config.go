package storage

import (
	"math"
	"time"
)

// DefaultConfig returns Kafka's topic defaults (with Strata's durable
// acknowledgements on).
func DefaultConfig() Config {
	return Config{
		SegmentBytes:           1 << 30,
		SegmentMs:              7 * 24 * time.Hour,
		SegmentIndexBytes:      10 << 20,
		IndexIntervalBytes:     4096,
		RetentionMs:            7 * 24 * 3600 * 1000,
		RetentionBytes:         -1,
		FileDeleteDelay:        time.Minute,
		FlushMessages:          math.MaxInt64,
		FlushMs:                math.MaxInt64,
		MaxMessageBytes:        1048588,
		Preallocate:            false,
		Delete:                 true,
		MaxCompactionLagMs:     math.MaxInt64,
		TimestampBeforeMaxMs:   math.MaxInt64,
		TimestampAfterMaxMs:    math.MaxInt64,
		MinCleanableDirtyRatio: 0.5,
		DeleteRetentionMs:      86400000,
		MinCompactionLagMs:     0,
		Durable:                true,
	}
}

// normalized fills fields whose zero value cannot be meant (a Config built
// field by field) with Kafka's defaults.
func (c Config) normalized() Config {
	d := DefaultConfig()
	if c.SegmentBytes <= 0 {
		c.SegmentBytes = d.SegmentBytes
	}
	if c.SegmentMs <= 0 {
		c.SegmentMs = d.SegmentMs
	}
	if c.SegmentIndexBytes < offsetEntrySize*4 {
		c.SegmentIndexBytes = d.SegmentIndexBytes
	}
	if c.IndexIntervalBytes < 0 {
		c.IndexIntervalBytes = d.IndexIntervalBytes
	}
	if c.FlushMessages <= 0 {
		c.FlushMessages = d.FlushMessages
	}
	if c.FlushMs <= 0 {
		c.FlushMs = d.FlushMs
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = d.MaxMessageBytes
	}
	if c.MaxCompactionLagMs <= 0 {
		c.MaxCompactionLagMs = d.MaxCompactionLagMs
	}
	if c.TimestampBeforeMaxMs <= 0 {
		c.TimestampBeforeMaxMs = d.TimestampBeforeMaxMs
	}
	if c.TimestampAfterMaxMs <= 0 {
		c.TimestampAfterMaxMs = d.TimestampAfterMaxMs
	}
	return c
}

// maxSegmentMs is segment.ms, capped by max.compaction.lag.ms for
// compacted logs.
func (c Config) maxSegmentMs() int64 {
	ms := c.SegmentMs.Milliseconds()
	if c.Compact && c.MaxCompactionLagMs < ms {
		ms = c.MaxCompactionLagMs
	}
	return ms
}
