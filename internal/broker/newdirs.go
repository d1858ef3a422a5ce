package broker

import (
	"sync"

	"github.com/strata-io/strata/internal/storage"
)

// newDirSync makes the directories of new partitions durable in the
// background, one SyncFS per log dir for the logs queued meanwhile
// (storage.SyncNewDirs), so that a partition's first acknowledged records
// pay their own bytes' fsync only. One goroutine at most, started when
// logs are queued and ending when the queue is empty; Shutdown stops
// taking logs and waits for it before closing them.
type newDirSync struct {
	mu      sync.Mutex
	queue   []*storage.Log
	running bool
	closed  bool
	done    sync.WaitGroup
}

// readyNewPartitions runs after new partitions were opened (CreateTopics,
// CreatePartitions, ApplyTopics). Each one this node leads alone gets its
// leader epoch assigned at its log end now, as Kafka's Partition.makeLeader
// does when a partition becomes leader (for an empty log this is in
// memory only: the file is written before the first record), and its
// directory is queued for newDirSync. A partition whose epoch could not
// be assigned here gets it at its first append, as before.
func (b *Broker) readyNewPartitions(ps []*Partition) {
	var logs []*storage.Log
	var epochs []int32
	for _, p := range ps {
		if p.Log == nil || p.repl.Load() != nil {
			continue
		}
		l := p.Leadership()
		if l.Leader != b.nodeID || len(l.Replicas) != 1 || l.LeaderEpoch <= p.Log.LatestEpoch() {
			continue
		}
		logs = append(logs, p.Log)
		epochs = append(epochs, l.LeaderEpoch)
	}
	if len(logs) == 0 {
		return
	}
	for i, err := range storage.AssignEpochs(logs, epochs) {
		if err != nil {
			b.logger.Debug("assign leader epoch of a new partition", "dir", logs[i].Dir(), "err", err)
		}
	}
	b.newDirs.add(logs)
}

// add queues logs and starts the goroutine when none runs.
func (s *newDirSync) add(logs []*storage.Log) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.queue = append(s.queue, logs...)
	if s.running {
		return
	}
	s.running = true
	s.done.Add(1)
	go s.run() // owner: the broker; Shutdown waits for it (stop)
}

func (s *newDirSync) run() {
	defer s.done.Done()
	for {
		s.mu.Lock()
		logs := s.queue
		s.queue = nil
		if len(logs) == 0 || s.closed {
			s.running = false
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		storage.SyncNewDirs(logs)
	}
}

// stop takes no more logs and waits for the goroutine.
func (s *newDirSync) stop() {
	s.mu.Lock()
	s.closed = true
	s.queue = nil
	s.mu.Unlock()
	s.done.Wait()
}
