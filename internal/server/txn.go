package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/broker"
	"github.com/strata-io/strata/internal/group"
	"github.com/strata-io/strata/internal/protocol"
	"github.com/strata-io/strata/internal/storage"
	"github.com/strata-io/strata/internal/txn"
)

// transactionTopic is Kafka's internal topic of transaction state.
const transactionTopic = "__transaction_state"

// ensureTransactionTopic creates __transaction_state (compacted, internal)
// on first start.
func (s *Server) ensureTransactionTopic() error {
	if s.broker.Topic(transactionTopic) != nil {
		return nil
	}
	compact := "compact"
	segBytes := s.cfg.Get("transaction.state.log.segment.bytes")
	_, err := s.broker.CreateTopic(broker.CreateTopicRequest{
		Name:              transactionTopic,
		NumPartitions:     int32(s.cfg.Int64("transaction.state.log.num.partitions")),
		ReplicationFactor: 1,
		Configs:           map[string]*string{"cleanup.policy": &compact, "segment.bytes": &segBytes},
		Internal:          true,
	})
	if err != nil {
		return fmt.Errorf("create %s: %w", transactionTopic, err)
	}
	return nil
}

// startTxn builds the transaction coordinator and replays its state. It
// runs after the group coordinator is loaded: finishing an interrupted
// commit writes markers to __consumer_offsets, which the group applies.
func (s *Server) startTxn() error {
	ms := func(name string) time.Duration { return time.Duration(s.cfg.Int64(name)) * time.Millisecond }
	c, err := txn.NewCoordinator(txn.Config{
		NodeID:                s.broker.NodeID(),
		NumPartitions:         s.internalPartitions(transactionTopic),
		MaxTimeout:            ms("transaction.max.timeout.ms"),
		IDExpiration:          ms("transactional.id.expiration.ms"),
		AbortTimedOutInterval: ms("transaction.abort.timed.out.transaction.cleanup.interval.ms"),
		RemoveExpiredInterval: ms("transaction.remove.expired.transaction.cleanup.interval.ms"),
		Partitioned:           s.cluster != nil,
		Leads:                 s.leadsFunc(transactionTopic),
	}, txnDeps{s}, s.logger.With("component", "txn"), s.reg)
	if err != nil {
		return fmt.Errorf("transaction coordinator: %w", err)
	}
	s.txnPartitions = s.internalPartitions(transactionTopic)
	if s.cluster == nil {
		// In a cluster: loaded per partition led (coordinators.go).
		if err := c.Load(context.Background()); err != nil {
			_ = c.Close()
			return fmt.Errorf("transaction coordinator: load %s: %w", transactionTopic, err)
		}
	}
	s.txn = c
	return nil
}

// txnHandler returns the transaction coordinator as a protocol handler.
func (s *Server) txnHandler() protocol.TxnHandler {
	if s.txn == nil {
		return nil
	}
	return txnProtocol{s.txn, s}
}

// txnMarkers serves WriteTxnMarkers from other brokers' coordinators (a
// node in a cluster only).
func (s *Server) txnMarkers() protocol.TxnMarkerWriter {
	if s.cluster == nil {
		return nil
	}
	return s
}

// txnProtocol adapts the coordinator to protocol.TxnHandler.
type txnProtocol struct {
	c *txn.Coordinator
	s *Server
}

func (t txnProtocol) Handle(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	return t.c.Handle(ctx, req)
}

func (t txnProtocol) APIVersions() map[int16][2]int16 { return t.c.APIVersions() }

// VerifyProduce verifies a transactional produce with the transaction's
// coordinator, here or on another broker (KIP-890 part 1).
func (t txnProtocol) VerifyProduce(id string, pid int64, epoch int16, parts []protocol.TxnPartition) []error {
	tps := make([]txn.TopicPartition, len(parts))
	for i, p := range parts {
		tps[i] = txn.TopicPartition{Topic: p.Topic, Partition: p.Partition}
	}
	errs := t.s.verifyTransaction(context.Background(), id, pid, epoch, tps)
	for i, err := range errs {
		errs[i] = verifyProduceError(err)
	}
	return errs
}

// verifyProduceError maps the coordinator's answer to what Kafka's
// verification gives the producer: a transition in flight or a coordinator
// not ready is the retriable NOT_ENOUGH_REPLICAS (ReplicaManager's
// mapping), everything else as is.
func verifyProduceError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, kerr.ConcurrentTransactions), errors.Is(err, kerr.CoordinatorLoadInProgress),
		errors.Is(err, kerr.CoordinatorNotAvailable), errors.Is(err, kerr.NotCoordinator):
		return fmt.Errorf("%v: %w", err, kerr.NotEnoughReplicas)
	}
	return err
}

// txnDeps implements txn.Deps over the broker and the group coordinator.
type txnDeps struct{ s *Server }

func (d txnDeps) NewProducerID() (int64, error) {
	id, _, err := d.s.broker.InitProducerID()
	return id, err
}

func (d txnDeps) PartitionExists(topic string, partition int32) bool {
	return d.s.partitionExists(topic, partition)
}

// WriteMarkers writes a transaction's markers. On a single node every
// marker is appended first and then waited for, so one group commit covers
// them all (writeLocalMarkers); in a cluster they go to each partition's
// leader (writeClusterMarkers). A partition deleted meanwhile is skipped;
// a marker refused because a newer producer epoch or coordinator epoch was
// seen is superseded and skipped too (Kafka's marker handler drops those).
// Markers on __consumer_offsets complete the group's pending
// transactional offsets once durable.
func (d txnDeps) WriteMarkers(ctx context.Context, pid int64, epoch int16, coordinatorEpoch int32, commit bool, parts []txn.TopicPartition) error {
	if d.s.cluster != nil {
		return d.s.writeClusterMarkers(ctx, pid, epoch, coordinatorEpoch, commit, parts)
	}
	var errs []error
	for i, err := range d.s.writeLocalMarkers(ctx, pid, epoch, coordinatorEpoch, commit, parts) {
		switch {
		case err == nil, errors.Is(err, kerr.UnknownTopicOrPartition):
		case markerSuperseded(err):
			d.s.logger.Info("transaction marker superseded", "topic", parts[i].Topic, "partition", parts[i].Partition,
				"producer_id", pid, "epoch", epoch, "err", err)
		default:
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (d txnDeps) StateAppend(ctx context.Context, partition int32, batch []byte) error {
	p, err := d.s.broker.Partition(transactionTopic, partition)
	if err != nil {
		return err
	}
	res, err := p.AppendNoWait(batch, -1)
	if err == nil {
		err = p.WaitSynced(ctx, res) // whatever strata.durable.acks says
	}
	if err != nil {
		return fmt.Errorf("append to %s-%d: %w", transactionTopic, partition, err)
	}
	return nil
}

func (d txnDeps) StateLog(partition int32) *storage.Log {
	p, err := d.s.broker.Partition(transactionTopic, partition)
	if err != nil {
		return nil
	}
	return p.Log
}

func (d txnDeps) GroupPartition(groupID string) int32 {
	return group.PartitionFor(groupID, d.s.internalPartitions(offsetsTopic))
}
