package cleaner

import "time"

// PartitionStatus is the admin view of one compacted partition.
type PartitionStatus struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Current state, computed from the log now.
	FirstDirtyOffset    int64   `json:"first_dirty_offset"`
	FirstUncleanable    int64   `json:"first_uncleanable_offset"`
	LogStartOffset      int64   `json:"log_start_offset"`
	LogEndOffset        int64   `json:"log_end_offset"`
	DirtyRatio          float64 `json:"dirty_ratio"`
	MinCleanableRatio   float64 `json:"min_cleanable_dirty_ratio"`
	DirtyBytes          int64   `json:"dirty_bytes"`
	CleanBytes          int64   `json:"clean_bytes"`
	OldestDirtyAgeMs    int64   `json:"oldest_dirty_age_ms"` // -1 when no dirty record has a timestamp
	MaxCompactionLagDue bool    `json:"max_compaction_lag_due"`
	Eligible            bool    `json:"eligible"`
	InProgress          bool    `json:"in_progress"`
	// Internal marks an internal topic (__consumer_offsets, ...).
	Internal bool `json:"internal"`
	// ActiveSegmentBaseOffset is the first offset of the active segment,
	// which is never cleaned; SegmentMs and SegmentBytes say when it rolls,
	// MinCompactionLagMs how long records stay uncleanable. They explain
	// why a round had nothing to clean.
	ActiveSegmentBaseOffset int64 `json:"active_segment_base_offset"`
	SegmentMs               int64 `json:"segment_ms"`
	SegmentBytes            int64 `json:"segment_bytes"`
	MinCompactionLagMs      int64 `json:"min_compaction_lag_ms"`
	// Last successful round.
	LastCleanTime         *time.Time `json:"last_clean_time,omitempty"`
	LastCleanDurationMs   int64      `json:"last_clean_duration_ms"`
	LastBytesRead         int64      `json:"last_bytes_read"`
	LastBytesWritten      int64      `json:"last_bytes_written"`
	LastRecordsRemoved    int64      `json:"last_records_removed"`
	LastTombstonesRemoved int64      `json:"last_tombstones_removed"`
	// LastAbortedRemoved counts records of aborted transactions (also in
	// LastRecordsRemoved); LastMarkersRemoved transaction markers.
	LastAbortedRemoved int64 `json:"last_aborted_records_removed"`
	LastMarkersRemoved int64 `json:"last_markers_removed"`
	// LastTombstonesRetained counts the tombstones the last round kept
	// because their delete horizon (delete.retention.ms after the round
	// that first kept them, KIP-534) had not passed; NextTombstoneHorizon
	// is the earliest of those horizons.
	LastTombstonesRetained int64      `json:"last_tombstones_retained"`
	NextTombstoneHorizon   *time.Time `json:"next_tombstone_horizon,omitempty"`
	LastMapUtilization     float64    `json:"last_map_utilization"`
	LastMapFull            bool       `json:"last_map_full"`
	// Totals since start.
	Rounds                 int64 `json:"rounds"`
	TotalBytesRead         int64 `json:"total_bytes_read"`
	TotalBytesWritten      int64 `json:"total_bytes_written"`
	TotalRecordsRemoved    int64 `json:"total_records_removed"`
	TotalTombstonesRemoved int64 `json:"total_tombstones_removed"`
	TotalAbortedRemoved    int64 `json:"total_aborted_records_removed"`
	TotalMarkersRemoved    int64 `json:"total_markers_removed"`
	// Failure state: a failing partition is retried with exponential
	// backoff (Kafka would park it as uncleanable until restart).
	Uncleanable       bool       `json:"uncleanable"`
	UncleanableReason string     `json:"uncleanable_reason,omitempty"`
	Failures          int        `json:"failures"`
	NextRetry         *time.Time `json:"next_retry,omitempty"`
}

// Status returns the state of every compacted partition of topic ("" =
// all topics), in topic/partition order.
func (c *Cleaner) Status(topic string) []PartitionStatus {
	now := c.now()
	out := []PartitionStatus{}
	for _, p := range c.compacted(topic) {
		l := p.Log
		k := tp{p.Topic, p.Partition}
		cfg := l.Config()
		ls, leo := l.LogStartOffset(), l.LogEndOffset()
		ck, _ := c.checkpointOf(p) // a bad file shows as no checkpoint; rounds report the error
		cl := computeCleanable(l.Segments(), ls, leo, l.LastStableOffset(), ck, cfg, now.UnixMilli())
		s := PartitionStatus{
			Topic: p.Topic, Partition: p.Partition,
			FirstDirtyOffset: cl.FirstDirty, FirstUncleanable: cl.FirstUncleanable,
			LogStartOffset: ls, LogEndOffset: leo,
			DirtyRatio: cl.Ratio, MinCleanableRatio: cfg.MinCleanableDirtyRatio,
			DirtyBytes: cl.DirtyBytes, CleanBytes: cl.CleanBytes,
			OldestDirtyAgeMs: -1, MaxCompactionLagDue: cl.MaxLagDue,
			Eligible: cl.eligible(cfg.MinCleanableDirtyRatio),
			Internal: p.Internal, ActiveSegmentBaseOffset: leo,
			SegmentMs: cfg.SegmentMs.Milliseconds(), SegmentBytes: cfg.SegmentBytes, MinCompactionLagMs: cfg.MinCompactionLagMs,
		}
		for _, seg := range l.Segments() {
			if seg.Active {
				s.ActiveSegmentBaseOffset = seg.BaseOffset
			}
		}
		if cl.OldestDirtyTs > 0 {
			s.OldestDirtyAgeMs = now.UnixMilli() - cl.OldestDirtyTs
		}
		c.mu.Lock()
		if st := c.parts[k]; st != nil {
			s.InProgress = st.inProgress
			if r := st.last; r != nil {
				t := r.Start
				s.LastCleanTime = &t
				s.LastCleanDurationMs = r.Duration.Milliseconds()
				s.LastBytesRead = r.Stats.BytesRead
				s.LastBytesWritten = r.Stats.BytesWritten
				s.LastRecordsRemoved = r.Stats.RecordsRemoved
				s.LastTombstonesRemoved = r.Stats.TombstonesRemoved
				s.LastAbortedRemoved = r.Stats.AbortedRemoved
				s.LastMarkersRemoved = r.Stats.MarkersRemoved
				s.LastTombstonesRetained = r.Stats.TombstonesRetained
				if h := r.Stats.NextHorizonMs; h > 0 {
					t := time.UnixMilli(h)
					s.NextTombstoneHorizon = &t
				}
				s.LastMapUtilization = r.MapUtil
				s.LastMapFull = r.MapFull
			}
			s.Rounds = st.rounds
			s.TotalBytesRead = st.totals.BytesRead
			s.TotalBytesWritten = st.totals.BytesWritten
			s.TotalRecordsRemoved = st.totals.RecordsRemoved
			s.TotalTombstonesRemoved = st.totals.TombstonesRemoved
			s.TotalAbortedRemoved = st.totals.AbortedRemoved
			s.TotalMarkersRemoved = st.totals.MarkersRemoved
			if st.failures > 0 {
				s.Uncleanable = true
				s.UncleanableReason = st.lastErr
				s.Failures = st.failures
				t := st.nextAttempt
				s.NextRetry = &t
			}
		}
		c.mu.Unlock()
		out = append(out, s)
	}
	return out
}

// Lookup reports whether the broker has topic, and whether it is compacted.
func (c *Cleaner) Lookup(topic string) (exists, compacted bool) {
	for p := range c.src {
		if p.Topic == topic {
			exists = true
			compacted = compacted || (p.Log != nil && p.Log.Config().Compact)
		}
	}
	return exists, compacted
}
