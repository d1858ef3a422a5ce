package broker

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// producerIDBlock is how many producer ids are reserved per metadata write.
const producerIDBlock = 1000

// InitProducerID hands out a new idempotent producer id (epoch 0). Ids are
// reserved in blocks persisted in the metadata store, so an id is never
// reused after a restart (storage keeps each id's sequence state).
func (b *Broker) InitProducerID() (int64, int16, error) {
	if alloc := b.pidAlloc.Load(); alloc != nil {
		return b.clusterProducerID(*alloc)
	}
	b.pidMu.Lock()
	if b.nextPID < b.pidLimit {
		id := b.nextPID
		b.nextPID++
		b.pidMu.Unlock()
		return id, 0, nil
	}
	b.pidMu.Unlock()

	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	b.pidMu.Lock()
	need := b.nextPID >= b.pidLimit
	b.pidMu.Unlock()
	if need {
		b.pidMu.Lock()
		prev := b.pidPersist
		b.pidPersist = b.pidLimit + producerIDBlock
		b.pidMu.Unlock()
		if err := b.persistLocked(); err != nil {
			b.pidMu.Lock()
			b.pidPersist = prev
			b.pidMu.Unlock()
			return -1, -1, fmt.Errorf("persist producer id block: %v: %w", err, kerr.KafkaStorageError)
		}
		b.pidMu.Lock()
		b.pidLimit = b.pidPersist
		b.pidMu.Unlock()
	}
	b.pidMu.Lock()
	defer b.pidMu.Unlock()
	id := b.nextPID
	b.nextPID++
	return id, 0, nil
}

// ProducerIDAllocator reserves a block of producer ids in the cluster and
// returns its first id (meta.Store.AllocateProducerIDs).
type ProducerIDAllocator func(n int64) (first int64, err error)

// SetProducerIDAllocator makes InitProducerID hand out ids from blocks the
// cluster allocates (Kafka's AllocateProducerIds), never from the local
// metadata file: two brokers never hand out the same id.
func (b *Broker) SetProducerIDAllocator(a ProducerIDAllocator) {
	b.pidMu.Lock()
	b.nextPID, b.pidLimit = 0, 0
	b.pidMu.Unlock()
	b.pidAlloc.Store(&a)
}

// clusterProducerID hands out the next id of the current block, taking a
// new block from the cluster when it is used up.
func (b *Broker) clusterProducerID(alloc ProducerIDAllocator) (int64, int16, error) {
	b.pidMu.Lock()
	defer b.pidMu.Unlock()
	if b.nextPID >= b.pidLimit {
		first, err := alloc(producerIDBlock)
		if err != nil {
			return -1, -1, fmt.Errorf("allocate a producer id block: %v: %w", err, kerr.CoordinatorLoadInProgress)
		}
		b.nextPID, b.pidLimit = first, first+producerIDBlock
	}
	id := b.nextPID
	b.nextPID++
	return id, 0, nil
}
