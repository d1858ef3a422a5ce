package server

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/strata-io/strata/internal/broker"
	"github.com/strata-io/strata/internal/group"
	"github.com/strata-io/strata/internal/storage"
	"github.com/strata-io/strata/internal/txn"
)

// offsetsTopic is Kafka's internal topic of group state.
const offsetsTopic = "__consumer_offsets"

// ensureOffsetsTopic creates __consumer_offsets (compacted, internal) on
// first start.
func (s *Server) ensureOffsetsTopic() error {
	if s.broker.Topic(offsetsTopic) != nil {
		return nil
	}
	compact, segBytes := "compact", "104857600"
	_, err := s.broker.CreateTopic(broker.CreateTopicRequest{
		Name:              offsetsTopic,
		NumPartitions:     int32(s.cfg.Int64("offsets.topic.num.partitions")),
		ReplicationFactor: 1,
		Configs:           map[string]*string{"cleanup.policy": &compact, "segment.bytes": &segBytes},
		Internal:          true,
	})
	if err != nil {
		return fmt.Errorf("create %s: %w", offsetsTopic, err)
	}
	return nil
}

// offsetsStore implements group.Storage over __consumer_offsets.
type offsetsStore struct{ b *broker.Broker }

// Append appends one batch to a __consumer_offsets partition and returns
// the wait for its fsync, which happens whatever strata.durable.acks says.
func (o offsetsStore) Append(partition int32, batch []byte) (func(context.Context) error, error) {
	p, err := o.b.Partition(offsetsTopic, partition)
	if err != nil {
		return nil, err
	}
	res, err := p.AppendNoWait(batch, -1)
	if err != nil {
		return nil, err
	}
	return o.synced(p, res), nil
}

// AppendTxn appends a transactional offset-commit batch (producer id and
// epoch set, base sequence -1) written by the coordinator itself and
// returns the wait for its fsync.
func (o offsetsStore) AppendTxn(partition int32, batch []byte) (func(context.Context) error, error) {
	p, err := o.b.Partition(offsetsTopic, partition)
	if err != nil {
		return nil, err
	}
	res, err := p.AppendCoordinator(batch)
	if err != nil {
		return nil, fmt.Errorf("transactional offsets to %s-%d: %w", offsetsTopic, partition, err)
	}
	return o.synced(p, res), nil
}

// synced is the wait for res to be fsynced.
func (o offsetsStore) synced(p *broker.Partition, res storage.AppendResult) func(context.Context) error {
	return func(ctx context.Context) error {
		if err := p.WaitSynced(ctx, res); err != nil {
			return fmt.Errorf("wait for fsync of %s-%d: %w", offsetsTopic, p.Index, err)
		}
		return nil
	}
}

// verifyTxnOffsets checks that a TxnOffsetCommit's __consumer_offsets
// partition was added to the producer's transaction (AddOffsetsToTxn),
// with the transaction's coordinator here or on another broker.
func (s *Server) verifyTxnOffsets(id string, pid int64, epoch int16, partition int32) error {
	return s.verifyTransaction(context.Background(), id, pid, epoch, []txn.TopicPartition{{Topic: offsetsTopic, Partition: partition}})[0]
}

// Log returns a __consumer_offsets partition's log.
func (o offsetsStore) Log(partition int32) *storage.Log {
	p, err := o.b.Partition(offsetsTopic, partition)
	if err != nil {
		return nil
	}
	return p.Log
}

// startGroup builds the coordinator (it needs the advertised address) and
// replays the group state.
func (s *Server) startGroup(host string, port int32) error {
	ms := func(name string) time.Duration { return time.Duration(s.cfg.Int64(name)) * time.Millisecond }
	g, err := group.NewCoordinator(group.Config{
		NodeID:                        s.broker.NodeID(),
		Host:                          host,
		Port:                          port,
		NumPartitions:                 s.internalPartitions(offsetsTopic),
		CommitTimeout:                 ms("offsets.commit.timeout.ms"),
		MinSessionTimeout:             ms("group.min.session.timeout.ms"),
		MaxSessionTimeout:             ms("group.max.session.timeout.ms"),
		InitialRebalanceDelay:         ms("group.initial.rebalance.delay.ms"),
		OffsetsRetention:              time.Duration(s.cfg.Int64("offsets.retention.minutes")) * time.Minute,
		OffsetsRetentionCheckInterval: ms("offsets.retention.check.interval.ms"),
		TopicPartitionExists:          s.partitionExists,
		Topics:                        s.groupTopics,
		ConsumerSessionTimeout:        ms("group.consumer.session.timeout.ms"),
		ConsumerHeartbeatInterval:     ms("group.consumer.heartbeat.interval.ms"),
		MaxSize:                       int(s.cfg.Int64("group.max.size")),
		ConsumerMaxSize:               int(s.cfg.Int64("group.consumer.max.size")),
		Transactions:                  true,
		VerifyTxn:                     s.verifyTxnOffsets,
		HighWatermark:                 s.highWatermark,
		Partitioned:                   s.cluster != nil,
		Leads:                         s.leadsFunc(offsetsTopic),
	}, offsetsStore{s.broker}, s.logger.With("component", "group"), s.reg)
	if err != nil {
		return fmt.Errorf("group coordinator: %w", err)
	}
	s.groupPartitions = s.internalPartitions(offsetsTopic)
	if s.cluster == nil {
		// A single node coordinates every partition; in a cluster the
		// partitions this broker leads are loaded as it becomes their
		// leader (coordinators.go).
		if err := g.Load(context.Background()); err != nil {
			g.Close()
			return fmt.Errorf("load group state: %w", err)
		}
	}
	s.group = g
	return nil
}

// groupTopics lists the broker's topics for KIP-848 server-side assignment
// (setting group.Config.Topics serves ConsumerGroupHeartbeat and
// ConsumerGroupDescribe).
func (s *Server) groupTopics() []group.TopicInfo {
	if s.cluster != nil {
		v := s.cluster.cache.View()
		out := make([]group.TopicInfo, 0, len(v.Topics))
		for _, name := range v.TopicNames() {
			t := v.Topics[name]
			id, err := uuid.Parse(t.ID)
			if t.Deleting || err != nil {
				continue
			}
			out = append(out, group.TopicInfo{Name: name, ID: id, Partitions: t.Partitions})
		}
		return out
	}
	ts := s.broker.Topics()
	out := make([]group.TopicInfo, 0, len(ts))
	for _, t := range ts {
		out = append(out, group.TopicInfo{Name: t.Name, ID: t.ID, Partitions: int32(len(t.Partitions))})
	}
	return out
}

// highWatermark is a partition's high watermark, for the group lag metric.
func (s *Server) highWatermark(topic string, partition int32) (int64, bool) {
	p, err := s.broker.Partition(topic, partition)
	if err != nil || p.Log == nil {
		return 0, false
	}
	return p.Log.HighWatermark(), true
}

// internalPartitions is the partition count of an internal topic: the
// topic's own (in the cluster metadata, or local), else its setting
// (offsets.topic.num.partitions, transaction.state.log.num.partitions),
// with which it will be created.
func (s *Server) internalPartitions(topic string) int32 {
	if s.cluster != nil {
		if t := s.cluster.cache.View().Topics[topic]; t != nil && t.Partitions > 0 {
			return t.Partitions
		}
	} else if t := s.broker.Topic(topic); t != nil {
		return int32(len(t.Partitions))
	}
	if topic == transactionTopic {
		return int32(s.cfg.Int64("transaction.state.log.num.partitions"))
	}
	return int32(s.cfg.Int64("offsets.topic.num.partitions"))
}

// partitionExists reports whether a topic partition exists: in the
// cluster metadata, or on this single node.
func (s *Server) partitionExists(topic string, partition int32) bool {
	if s.cluster != nil {
		t, _, ok := s.cluster.cache.View().Partition(topic, partition)
		return ok && !t.Deleting
	}
	return s.broker.PartitionExists(topic, partition)
}
