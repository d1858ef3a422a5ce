package broker

import (
	"fmt"
	"path/filepath"
	"sort"
	"sync/atomic"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/strata-io/strata/internal/replica"
	"github.com/strata-io/strata/internal/storage"
	"github.com/twmb/franz-go/pkg/kerr"
)

// maxTopicNameLen is Kafka's topic name length limit.
const maxTopicNameLen = 249

// Topic is a snapshot of one topic. It is immutable once published: config
// and partition changes publish a new Topic (Partitions are shared).
type Topic struct {
	Name     string
	ID       uuid.UUID
	Internal bool
	// Configs are the topic's overrides (names to values).
	Configs    map[string]string
	Partitions []*Partition
}

// Partition is one partition this node leads.
type Partition struct {
	Topic       string
	Index       int32
	Leader      int32
	LeaderEpoch int32
	Replicas    []int32
	ISR         []int32
	// Log is the partition's storage.
	Log *storage.Log

	baseDir   string
	broker    *Broker
	repl      atomic.Pointer[replica.Replica] // nil: one replica
	settings  atomic.Pointer[topicSettings]
	lastFlush atomic.Int64 // unix ms of the last flush.ms flush
}

// Dir is the partition directory.
func (p *Partition) Dir() string {
	return filepath.Join(p.baseDir, partitionDirName(p.Topic, p.Index))
}

// BaseDir is the log dir holding the partition.
func (p *Partition) BaseDir() string { return p.baseDir }

// Topics returns all topics sorted by name.
func (b *Broker) Topics() []*Topic {
	b.mu.RLock()
	out := make([]*Topic, 0, len(b.topics))
	for _, t := range b.topics {
		out = append(out, t)
	}
	b.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Topic returns the named topic or nil.
func (b *Broker) Topic(name string) *Topic {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.topics[name]
}

// TopicByID returns the topic with the given id or nil.
func (b *Broker) TopicByID(id uuid.UUID) *Topic {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.byID[id]
}

// Partition returns a partition or an error wrapping
// kerr.UnknownTopicOrPartition.
func (b *Broker) Partition(topic string, partition int32) (*Partition, error) {
	t := b.Topic(topic)
	if t == nil || partition < 0 || int(partition) >= len(t.Partitions) {
		return nil, fmt.Errorf("partition %s-%d: %w", topic, partition, kerr.UnknownTopicOrPartition)
	}
	return t.Partitions[partition], nil
}

// PartitionExists reports whether the topic partition exists.
func (b *Broker) PartitionExists(topic string, partition int32) bool {
	_, err := b.Partition(topic, partition)
	return err == nil
}

// ValidateTopicName checks Kafka's topic naming rules.
func ValidateTopicName(name string) error {
	if name == "" || name == "." || name == ".." {
		return fmt.Errorf("topic name %q is illegal: %w", name, kerr.InvalidTopicException)
	}
	if len(name) > maxTopicNameLen {
		return fmt.Errorf("topic name %q is longer than %d characters: %w", name, maxTopicNameLen, kerr.InvalidTopicException)
	}
	if !utf8.ValidString(name) {
		return fmt.Errorf("topic name is not valid UTF-8: %w", kerr.InvalidTopicException)
	}
	for _, c := range name {
		ok := c == '.' || c == '_' || c == '-' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
		if !ok {
			return fmt.Errorf("topic name %q contains characters other than ASCII alphanumerics, '.', '_' and '-': %w", name, kerr.InvalidTopicException)
		}
	}
	return nil
}

// CreateTopicRequest describes a topic to create.
type CreateTopicRequest struct {
	Name              string
	NumPartitions     int32 // -1 = num.partitions
	ReplicationFactor int16 // -1 = default.replication.factor
	Configs           map[string]*string
	Internal          bool
	ValidateOnly      bool
}

// CreateTopic validates and (unless ValidateOnly) creates a topic. Errors
// wrap the Kafka error: InvalidTopicException, TopicAlreadyExists,
// InvalidPartitions, InvalidReplicationFactor, InvalidConfig. Nothing is
// created when any check fails.
func (b *Broker) CreateTopic(req CreateTopicRequest) (*Topic, error) {
	if err := ValidateTopicName(req.Name); err != nil {
		return nil, err
	}
	if req.NumPartitions == -1 {
		req.NumPartitions = int32(b.cfg.Int64("num.partitions"))
	}
	if req.ReplicationFactor == -1 {
		req.ReplicationFactor = int16(b.cfg.Int64("default.replication.factor"))
	}
	if req.NumPartitions <= 0 {
		return nil, fmt.Errorf("number of partitions must be larger than 0, got %d: %w", req.NumPartitions, kerr.InvalidPartitions)
	}
	if req.ReplicationFactor <= 0 {
		return nil, fmt.Errorf("replication factor must be larger than 0, got %d: %w", req.ReplicationFactor, kerr.InvalidReplicationFactor)
	}
	if req.ReplicationFactor > 1 {
		return nil, fmt.Errorf("replication factor %d is larger than the number of brokers (1): %w", req.ReplicationFactor, kerr.InvalidReplicationFactor)
	}
	if err := b.cfg.ValidateTopicConfigs(req.Configs); err != nil {
		return nil, fmt.Errorf("%v: %w", err, kerr.InvalidConfig)
	}
	overrides := map[string]string{}
	for k, v := range req.Configs {
		overrides[k] = *v
	}
	if _, _, err := resolveConfig(b.cfg, overrides, b.durableAcks); err != nil {
		return nil, fmt.Errorf("%v: %w", err, kerr.InvalidConfig)
	}
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	if b.closed {
		return nil, fmt.Errorf("broker is shutting down: %w", kerr.BrokerNotAvailable)
	}
	if b.Topic(req.Name) != nil {
		return nil, fmt.Errorf("topic %q already exists: %w", req.Name, kerr.TopicAlreadyExists)
	}
	if err := b.checkCollision(req.Name); err != nil {
		return nil, err
	}
	if req.ValidateOnly {
		return &Topic{Name: req.Name, Configs: overrides, Partitions: make([]*Partition, req.NumPartitions)}, nil
	}
	t := &Topic{Name: req.Name, ID: uuid.New(), Internal: req.Internal, Configs: overrides}
	if err := b.addPartitions(t, req.NumPartitions); err != nil {
		return nil, err
	}
	b.publish(t)
	if err := b.commitLocked(func() { b.unpublish(t) }); err != nil {
		b.deleteLogs(t.Partitions)
		return nil, fmt.Errorf("persist topic %s: %v: %w", t.Name, err, kerr.KafkaStorageError)
	}
	b.logger.Info("topic created", "topic", t.Name, "id", t.ID, "partitions", len(t.Partitions), "configs", overrides)
	b.warnMinISR(t)
	return t, nil
}

// warnMinISR logs when a topic's min.insync.replicas exceeds its
// replication factor. Kafka accepts such a topic (acks=all produce then
// fails with NOT_ENOUGH_REPLICAS), and so does Strata, but says so.
func (b *Broker) warnMinISR(t *Topic) {
	if len(t.Partitions) == 0 || t.Partitions[0] == nil {
		return
	}
	p := t.Partitions[0]
	if ts := p.settings.Load(); ts != nil && ts.minISR > len(p.Replicas) {
		b.logger.Warn("min.insync.replicas exceeds the replication factor: acks=all produce to this topic fails with NOT_ENOUGH_REPLICAS",
			"topic", t.Name, "min.insync.replicas", ts.minISR, "replication_factor", len(p.Replicas))
	}
}

// checkCollision rejects names that differ only in '.' vs '_' from an
// existing topic (Kafka metric-name collision rule).
func (b *Broker) checkCollision(name string) error {
	norm := func(s string) string {
		out := []byte(s)
		for i, c := range out {
			if c == '.' {
				out[i] = '_'
			}
		}
		return string(out)
	}
	n := norm(name)
	for _, t := range b.Topics() {
		if t.Name != name && norm(t.Name) == n {
			return fmt.Errorf("topic %q collides with existing topic %q: %w", name, t.Name, kerr.InvalidTopicException)
		}
	}
	return nil
}

// addPartitions opens new partition logs so that t has total partitions;
// on error every log opened here is deleted again.
func (b *Broker) addPartitions(t *Topic, total int32) error {
	var added []*Partition
	for i := int32(len(t.Partitions)); i < total; i++ {
		p := &Partition{
			Topic: t.Name, Index: i, Leader: b.nodeID, LeaderEpoch: 0,
			Replicas: []int32{b.nodeID}, ISR: []int32{b.nodeID}, baseDir: b.pickDirExcluding(added), broker: b,
		}
		err := b.removeStale(p.Dir())
		if err == nil {
			err = b.openPartition(t, p, true)
		}
		if err != nil {
			b.deleteLogs(added)
			return fmt.Errorf("create partition %s-%d: %v: %w", t.Name, i, err, kerr.KafkaStorageError)
		}
		added = append(added, p)
	}
	t.Partitions = append(t.Partitions, added...)
	return nil
}

// pickDirExcluding picks a dir counting partitions being added too.
func (b *Broker) pickDirExcluding(pending []*Partition) string {
	if len(b.dirs) == 1 {
		return b.dirs[0].path
	}
	counts := map[string]int{}
	for _, t := range b.Topics() {
		for _, p := range t.Partitions {
			counts[p.baseDir]++
		}
	}
	for _, p := range pending {
		counts[p.baseDir]++
	}
	best := b.dirs[0].path
	for _, d := range b.dirs[1:] {
		if counts[d.path] < counts[best] {
			best = d.path
		}
	}
	return best
}

func (b *Broker) publish(t *Topic) {
	b.mu.Lock()
	b.topics[t.Name] = t
	b.byID[t.ID] = t
	b.mu.Unlock()
}

func (b *Broker) unpublish(t *Topic) {
	b.mu.Lock()
	if b.topics[t.Name] == t {
		delete(b.topics, t.Name)
		delete(b.byID, t.ID)
	}
	b.mu.Unlock()
}

// deleteLogs deletes partition logs (directories included).
func (b *Broker) deleteLogs(ps []*Partition) {
	for _, p := range ps {
		if p.Log == nil {
			continue
		}
		if err := p.Log.Delete(); err != nil {
			b.logger.Warn("delete partition log", "topic", p.Topic, "partition", p.Index, "err", err)
		}
	}
}

// DeleteTopic removes a topic and its data. Errors wrap
// UnknownTopicOrPartition, TopicDeletionDisabled or InvalidTopicException
// (internal topics).
func (b *Broker) DeleteTopic(name string) error {
	if !b.cfg.Bool("delete.topic.enable") {
		return fmt.Errorf("topic deletion is disabled (delete.topic.enable=false): %w", kerr.TopicDeletionDisabled)
	}
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	t := b.Topic(name)
	if t == nil {
		return fmt.Errorf("topic %q: %w", name, kerr.UnknownTopicOrPartition)
	}
	if t.Internal {
		return fmt.Errorf("topic %q is internal and cannot be deleted: %w", name, kerr.InvalidTopicException)
	}
	b.unpublish(t)
	if err := b.commitLocked(func() { b.publish(t) }); err != nil {
		return fmt.Errorf("persist deletion of %s: %v: %w", name, err, kerr.KafkaStorageError)
	}
	b.hooksMu.Lock()
	hooks := append([]func(string, int32){}, b.onDelete...)
	b.hooksMu.Unlock()
	for _, p := range t.Partitions {
		for _, h := range hooks {
			h(t.Name, p.Index)
		}
	}
	b.deleteLogs(t.Partitions)
	b.logger.Info("topic deleted", "topic", name, "id", t.ID)
	return nil
}

// CreatePartitions grows a topic to total partitions. Errors wrap
// UnknownTopicOrPartition, InvalidPartitions, InvalidReplicaAssignment.
func (b *Broker) CreatePartitions(name string, total int32, validateOnly bool) error {
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	t := b.Topic(name)
	if t == nil {
		return fmt.Errorf("topic %q: %w", name, kerr.UnknownTopicOrPartition)
	}
	if int(total) <= len(t.Partitions) {
		if int(total) == len(t.Partitions) {
			return fmt.Errorf("topic %s already has %d partitions: %w", name, total, kerr.InvalidPartitions)
		}
		return fmt.Errorf("topic %s currently has %d partitions, %d would not be an increase: %w", name, len(t.Partitions), total, kerr.InvalidPartitions)
	}
	if validateOnly {
		return nil
	}
	nt := *t
	nt.Partitions = append([]*Partition(nil), t.Partitions...)
	if err := b.addPartitions(&nt, total); err != nil {
		return err
	}
	b.publish(&nt)
	if err := b.commitLocked(func() { b.publish(t) }); err != nil {
		b.deleteLogs(nt.Partitions[len(t.Partitions):])
		return fmt.Errorf("persist partitions of %s: %v: %w", name, err, kerr.KafkaStorageError)
	}
	b.logger.Info("partitions added", "topic", name, "partitions", total)
	return nil
}

// DescribeConfigs lists every topic config of a topic.
func (b *Broker) DescribeConfigs(name string) ([]ConfigEntry, error) {
	t := b.Topic(name)
	if t == nil {
		return nil, fmt.Errorf("topic %q: %w", name, kerr.UnknownTopicOrPartition)
	}
	return describeTopicConfig(b.cfg, t.Configs), nil
}

// SetTopicConfigs replaces a topic's overrides with overrides (configs not
// named revert to their defaults), validating first; nothing changes on
// error (InvalidConfig, UnknownTopicOrPartition).
func (b *Broker) SetTopicConfigs(name string, overrides map[string]string, validateOnly bool) error {
	ptrs := make(map[string]*string, len(overrides))
	for k, v := range overrides {
		v := v
		ptrs[k] = &v
	}
	if err := b.cfg.ValidateTopicConfigs(ptrs); err != nil {
		return fmt.Errorf("%v: %w", err, kerr.InvalidConfig)
	}
	cfg, ts, err := resolveConfig(b.cfg, overrides, b.durableAcks)
	if err != nil {
		return fmt.Errorf("%v: %w", err, kerr.InvalidConfig)
	}
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	t := b.Topic(name)
	if t == nil {
		return fmt.Errorf("topic %q: %w", name, kerr.UnknownTopicOrPartition)
	}
	if t.Internal {
		if _, ok := overrides["cleanup.policy"]; ok && overrides["cleanup.policy"] != "compact" {
			return fmt.Errorf("cleanup.policy of internal topic %s must stay compact: %w", name, kerr.InvalidConfig)
		}
	}
	if validateOnly {
		return nil
	}
	nt := *t
	nt.Configs = overrides
	b.publish(&nt)
	if err := b.commitLocked(func() { b.publish(t) }); err != nil {
		return fmt.Errorf("persist configs of %s: %v: %w", name, err, kerr.KafkaStorageError)
	}
	for _, p := range nt.Partitions {
		p.Log.UpdateConfig(cfg)
		ts := ts
		p.settings.Store(&ts)
	}
	b.logger.Info("topic configs changed", "topic", name, "configs", overrides)
	b.warnMinISR(&nt)
	return nil
}
