package broker

// ioThreads is how many partitions are opened (with recovery) at startup,
// created, deleted and closed (flushed) at shutdown at once
// (parallel.Each): Kafka's num.recovery.threads.per.data.dir, per log dir.
func (b *Broker) ioThreads() int {
	return max(b.Config().Int("num.recovery.threads.per.data.dir")*len(b.dirs), 1)
}
