package group

// scheduleExpiry arms the next offsets.retention.check.interval.ms round.
func (c *Coordinator) scheduleExpiry() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return
	}
	c.expiryTimer = c.env.clock.AfterFunc(c.cfg.OffsetsRetentionCheckInterval, func() {
		c.expireOffsets()
		c.scheduleExpiry()
	})
}

// expireOffsets removes offsets past offsets.retention.minutes and groups
// left Empty without offsets, writing their tombstones first.
func (c *Coordinator) expireOffsets() {
	if c.closed.Load() {
		return
	}
	now := c.env.clock.Now()
	for _, g := range c.snapshot() {
		g.mu.Lock()
		if g.state == stateDead {
			g.mu.Unlock()
			continue
		}
		ks := g.expiredOffsets(now, c.cfg.OffsetsRetention)
		dropGroup := g.state == stateEmpty && g.isEmpty() && len(ks) == len(g.offsets) && len(g.txn) == 0
		if len(ks) > 0 || dropGroup {
			if err := c.appendRecordsWait(g, g.tombstones(ks, dropGroup)); err != nil {
				c.logger.Warn("store offset expiry", "group", g.id, "err", err)
				g.mu.Unlock()
				continue
			}
			for _, k := range ks {
				delete(g.offsets, k)
			}
			if dropGroup {
				c.removeGroup(g)
			}
			c.logger.Info("expired offsets", "group", g.id, "offsets", len(ks), "group_removed", dropGroup)
		}
		g.mu.Unlock()
	}
}
