package broker

// waitNewDirs waits until the background pass of readyNewPartitions has
// made the queued directories durable (tests: no log is queued meanwhile).
func waitNewDirs(b *Broker) { b.newDirs.done.Wait() }
