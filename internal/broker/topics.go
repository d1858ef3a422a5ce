package broker

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/strata-io/strata/internal/config"
	"github.com/strata-io/strata/internal/parallel"
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

// Partition is one partition this node holds a replica of.
type Partition struct {
	Topic string
	Index int32
	// Log is the partition's storage.
	Log *storage.Log

	baseDir   string
	broker    *Broker
	lead      atomic.Pointer[Leadership]
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

// Partition returns a partition hosted here or an error wrapping
// kerr.UnknownTopicOrPartition.
func (b *Broker) Partition(topic string, partition int32) (*Partition, error) {
	if p := b.Topic(topic).Partition(partition); p != nil {
		return p, nil
	}
	return nil, fmt.Errorf("partition %s-%d: %w", topic, partition, kerr.UnknownTopicOrPartition)
}

// Partition returns the topic's partition index i if this node hosts it
// (nil otherwise, and on a nil Topic). Partitions is sorted by index and,
// on a single node, dense.
func (t *Topic) Partition(i int32) *Partition {
	if t == nil || i < 0 {
		return nil
	}
	ps := t.Partitions
	if int(i) < len(ps) && ps[i].Index == i {
		return ps[i]
	}
	j := sort.Search(len(ps), func(k int) bool { return ps[k].Index >= i })
	if j < len(ps) && ps[j].Index == i {
		return ps[j]
	}
	return nil
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
	ts, errs := b.CreateTopics([]CreateTopicRequest{req})
	return ts[0], errs[0]
}

// CreateTopics creates the topics of one CreateTopics request. Each topic
// is checked on its own and succeeds or fails as a whole (CreateTopic's
// errors); the partition logs of every valid topic are created together,
// in parallel (createLogs), and the metadata is written once for the
// request. ts[i] and errs[i] answer reqs[i].
//
// The slow part, creating the partition logs, runs under the topics' own
// locks only (topicLocks; adminMu is held just to check and to publish),
// so other topics' admin requests and producer id allocation go on.
func (b *Broker) CreateTopics(reqs []CreateTopicRequest) (ts []*Topic, errs []error) {
	ts, errs = make([]*Topic, len(reqs)), make([]error, len(reqs))
	overrides := make([]map[string]string, len(reqs))
	names := make([]string, 0, len(reqs))
	for i := range reqs {
		overrides[i], errs[i] = b.checkCreate(&reqs[i])
		if errs[i] == nil {
			names = append(names, reqs[i].Name)
		}
	}
	defer b.topicLocks.lockAll(names)()
	b.adminMu.Lock()
	defer b.adminMu.Unlock() // released around createLogs below, held again at return
	var created []*Topic
	var idx []int
	taken := map[string]bool{}
	for i, req := range reqs {
		if errs[i] != nil {
			continue
		}
		if b.closed {
			errs[i] = fmt.Errorf("broker is shutting down: %w", kerr.BrokerNotAvailable)
			continue
		}
		if b.Topic(req.Name) != nil || taken[req.Name] {
			errs[i] = fmt.Errorf("topic %q already exists: %w", req.Name, kerr.TopicAlreadyExists)
			continue
		}
		if errs[i] = b.checkCollision(req.Name, taken); errs[i] != nil {
			continue
		}
		taken[req.Name] = true
		if req.ValidateOnly {
			ts[i] = &Topic{Name: req.Name, Configs: overrides[i], Partitions: make([]*Partition, req.NumPartitions)}
			continue
		}
		t := &Topic{Name: req.Name, ID: uuid.New(), Internal: req.Internal, Configs: overrides[i]}
		t.Partitions = b.newPartitions(t, 0, req.NumPartitions, created)
		created = append(created, t)
		idx = append(idx, i)
	}
	if len(created) == 0 {
		return ts, errs
	}
	b.adminOps.Add(1)
	defer b.adminOps.Done()
	b.adminMu.Unlock()
	var parts []*Partition
	for _, t := range created {
		parts = append(parts, t.Partitions...)
	}
	failed := b.createLogs(created, parts)
	b.adminMu.Lock()
	if b.closed { // shut down meanwhile: leave nothing behind
		for k, t := range created {
			if failed[t] == nil {
				b.deleteLogs(t.Partitions)
				errs[idx[k]] = fmt.Errorf("broker is shutting down: %w", kerr.BrokerNotAvailable)
			}
		}
		return ts, errs
	}
	var ok []*Topic
	for k, t := range created {
		if err := failed[t]; err != nil {
			errs[idx[k]] = err
			continue
		}
		ok = append(ok, t)
	}
	for _, t := range ok {
		b.publish(t)
	}
	if err := b.commitLocked(func() {
		for _, t := range ok {
			b.unpublish(t)
		}
	}); err != nil {
		for k, t := range created {
			if failed[t] == nil {
				b.deleteLogs(t.Partitions)
				errs[idx[k]] = fmt.Errorf("persist topic %s: %v: %w", t.Name, err, kerr.KafkaStorageError)
			}
		}
		return ts, errs
	}
	for k, t := range created {
		if failed[t] == nil {
			ts[idx[k]] = t
			b.logger.Info("topic created", "topic", t.Name, "id", FormatTopicID(t.ID), "partitions", len(t.Partitions), "configs", t.Configs)
			b.warnMinISR(t)
		}
	}
	return ts, errs
}

// checkCreate validates a request on its own (defaults filled in) and
// returns its config overrides.
func (b *Broker) checkCreate(req *CreateTopicRequest) (map[string]string, error) {
	if err := ValidateTopicName(req.Name); err != nil {
		return nil, err
	}
	if req.NumPartitions == -1 {
		req.NumPartitions = int32(b.Config().Int64("num.partitions"))
	}
	if req.ReplicationFactor == -1 {
		req.ReplicationFactor = int16(b.Config().Int64("default.replication.factor"))
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
	if err := b.Config().ValidateTopicConfigs(req.Configs); err != nil {
		return nil, fmt.Errorf("%v: %w", err, kerr.InvalidConfig)
	}
	overrides := map[string]string{}
	for k, v := range req.Configs {
		overrides[k] = *v
	}
	if _, _, err := resolveConfig(b.Config(), overrides, b.durableAcks); err != nil {
		return nil, fmt.Errorf("%v: %w", err, kerr.InvalidConfig)
	}
	return overrides, nil
}

// warnMinISR logs when a topic's min.insync.replicas exceeds its
// replication factor. Kafka accepts such a topic (acks=all produce then
// fails with NOT_ENOUGH_REPLICAS), and so does Strata, but says so.
func (b *Broker) warnMinISR(t *Topic) {
	if len(t.Partitions) == 0 || t.Partitions[0] == nil {
		return
	}
	p := t.Partitions[0]
	if ts := p.settings.Load(); ts != nil && ts.minISR > len(p.Leadership().Replicas) {
		b.logger.Warn("min.insync.replicas exceeds the replication factor: acks=all produce to this topic fails with NOT_ENOUGH_REPLICAS",
			"topic", t.Name, "min.insync.replicas", ts.minISR, "replication_factor", len(p.Leadership().Replicas))
	}
}

// collisionKey is a topic name with '.' read as '_': names with the same
// key collide (Kafka's metric-name rule), so they share a topic lock.
func collisionKey(name string) string { return strings.ReplaceAll(name, ".", "_") }

// checkCollision rejects names that differ only in '.' vs '_' from an
// existing topic or one being created with it (Kafka metric-name
// collision rule).
func (b *Broker) checkCollision(name string, creating map[string]bool) error {
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
	for other := range creating {
		if other != name && norm(other) == n {
			return fmt.Errorf("topic %q collides with topic %q created in the same request: %w", name, other, kerr.InvalidTopicException)
		}
	}
	return nil
}

// newPartitions returns partitions from..to-1 of t, each in the log dir
// with the fewest partitions (counting those of pending topics too).
func (b *Broker) newPartitions(t *Topic, from, to int32, pending []*Topic) []*Partition {
	counts := b.dirCounts(pending)
	var out []*Partition
	for i := from; i < to; i++ {
		p := &Partition{Topic: t.Name, Index: i, baseDir: b.pickDir(counts), broker: b}
		p.lead.Store(b.alone(0))
		out = append(out, p)
	}
	return out
}

// dirCounts counts the partitions in each log dir, those of pending
// topics included (nil with a single log dir: nothing to choose).
func (b *Broker) dirCounts(pending []*Topic) map[string]int {
	counts := map[string]int{}
	if len(b.dirs) > 1 {
		for _, o := range append(b.Topics(), pending...) {
			for _, p := range o.Partitions {
				counts[p.baseDir]++
			}
		}
	}
	return counts
}

// pickDir returns the log dir with the fewest partitions in counts and
// counts the new one there.
func (b *Broker) pickDir(counts map[string]int) string {
	best := b.dirs[0].path
	for _, d := range b.dirs[1:] {
		if counts[d.path] < counts[best] {
			best = d.path
		}
	}
	counts[best]++
	return best
}

// createLogs creates the logs of new partitions (of the topics ts), as
// many at once as ioThreads allows. Nothing is fsynced per partition: an
// empty partition needs no durability until its first record is
// acknowledged, and the log's first sync makes its directory durable
// (storage.Open). It returns the topics whose partitions could not all
// be created, with the error; their logs are deleted again. The cluster
// metadata store reuses this for partitions assigned to this node.
func (b *Broker) createLogs(ts []*Topic, parts []*Partition) map[*Topic]error {
	topic := map[string]*Topic{}
	for _, t := range ts {
		topic[t.Name] = t
	}
	var mu sync.Mutex
	failed := map[*Topic]error{}
	parallel.Each(parts, b.ioThreads(), func(p *Partition) error {
		t := topic[p.Topic]
		err := b.removeStale(p.Dir())
		if err == nil {
			err = b.openPartition(t, p, true, false)
		}
		if err != nil {
			mu.Lock()
			if failed[t] == nil {
				failed[t] = fmt.Errorf("create partition %s-%d: %v: %w", t.Name, p.Index, err, kerr.KafkaStorageError)
			}
			mu.Unlock()
		}
		return nil
	})
	for t := range failed {
		b.deleteLogs(t.Partitions)
	}
	return failed
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

// deleteLogs deletes partition logs (directories included), as many at
// once as ioThreads allows, then fsyncs each log dir once.
func (b *Broker) deleteLogs(ps []*Partition) {
	var mu sync.Mutex
	dirs := map[string]bool{}
	parallel.Each(ps, b.ioThreads(), func(p *Partition) error {
		if p.Log == nil {
			return nil
		}
		if err := p.Log.DeleteDeferSync(); err != nil {
			b.logger.Warn("delete partition log", "topic", p.Topic, "partition", p.Index, "err", err)
		}
		mu.Lock()
		dirs[p.baseDir] = true
		mu.Unlock()
		return nil
	})
	for d := range dirs {
		if err := b.fs.SyncDir(d); err != nil {
			b.logger.Warn("fsync log dir after deleting partitions", "dir", d, "err", err)
		}
	}
}

// DeleteTopic removes a topic and its data. Errors wrap
// UnknownTopicOrPartition, TopicDeletionDisabled or InvalidTopicException
// (internal topics).
func (b *Broker) DeleteTopic(name string) error {
	return b.DeleteTopics([]string{name})[0]
}

// DeleteTopics removes the topics of one DeleteTopics request: each is
// checked on its own (DeleteTopic's errors), the metadata is written once
// for the request, then the partition logs of every deleted topic are
// removed together, in parallel. errs[i] answers names[i].
func (b *Broker) DeleteTopics(names []string) (errs []error) {
	errs = make([]error, len(names))
	if !b.Config().Bool("delete.topic.enable") {
		for i := range errs {
			errs[i] = fmt.Errorf("topic deletion is disabled (delete.topic.enable=false): %w", kerr.TopicDeletionDisabled)
		}
		return errs
	}
	defer b.topicLocks.lockAll(names)()
	b.adminMu.Lock()
	locked := true
	defer func() {
		if locked {
			b.adminMu.Unlock()
		}
	}()
	if b.closed {
		for i := range errs {
			errs[i] = fmt.Errorf("broker is shutting down: %w", kerr.BrokerNotAvailable)
		}
		return errs
	}
	var gone []*Topic
	var idx []int
	seen := map[string]bool{}
	for i, name := range names {
		t := b.Topic(name)
		switch {
		case t == nil || seen[name]:
			errs[i] = fmt.Errorf("topic %q: %w", name, kerr.UnknownTopicOrPartition)
		case t.Internal:
			errs[i] = fmt.Errorf("topic %q is internal and cannot be deleted: %w", name, kerr.InvalidTopicException)
		default:
			seen[name] = true
			gone = append(gone, t)
			idx = append(idx, i)
		}
	}
	if len(gone) == 0 {
		return errs
	}
	for _, t := range gone {
		b.unpublish(t)
	}
	if err := b.commitLocked(func() {
		for _, t := range gone {
			b.publish(t)
		}
	}); err != nil {
		for k, t := range gone {
			errs[idx[k]] = fmt.Errorf("persist deletion of %s: %v: %w", t.Name, err, kerr.KafkaStorageError)
		}
		return errs
	}
	// The topics are gone from the metadata; their logs are deleted under
	// the topics' locks only (a new topic of such a name waits for it).
	b.adminOps.Add(1)
	defer b.adminOps.Done()
	locked = false
	b.adminMu.Unlock()
	b.hooksMu.Lock()
	hooks := append([]func(string, int32){}, b.onDelete...)
	b.hooksMu.Unlock()
	var parts []*Partition
	for _, t := range gone {
		for _, p := range t.Partitions {
			for _, h := range hooks {
				h(t.Name, p.Index)
			}
		}
		parts = append(parts, t.Partitions...)
	}
	b.deleteLogs(parts)
	for _, t := range gone {
		b.logger.Info("topic deleted", "topic", t.Name, "id", FormatTopicID(t.ID))
	}
	return errs
}

// CreatePartitions grows a topic to total partitions. Errors wrap
// UnknownTopicOrPartition, InvalidPartitions, InvalidReplicaAssignment.
func (b *Broker) CreatePartitions(name string, total int32, validateOnly bool) error {
	defer b.topicLocks.lock(collisionKey(name))()
	b.adminMu.Lock()
	t := b.Topic(name)
	if t == nil {
		b.adminMu.Unlock()
		return fmt.Errorf("topic %q: %w", name, kerr.UnknownTopicOrPartition)
	}
	if int(total) <= len(t.Partitions) {
		b.adminMu.Unlock()
		if int(total) == len(t.Partitions) {
			return fmt.Errorf("topic %s already has %d partitions: %w", name, total, kerr.InvalidPartitions)
		}
		return fmt.Errorf("topic %s currently has %d partitions, %d would not be an increase: %w", name, len(t.Partitions), total, kerr.InvalidPartitions)
	}
	if validateOnly || b.closed {
		b.adminMu.Unlock()
		if b.closed {
			return fmt.Errorf("broker is shutting down: %w", kerr.BrokerNotAvailable)
		}
		return nil
	}
	nt := *t
	add := &Topic{Name: t.Name, ID: t.ID, Internal: t.Internal, Configs: t.Configs}
	add.Partitions = b.newPartitions(t, int32(len(t.Partitions)), total, nil)
	// The logs are created under the topic's lock only.
	b.adminOps.Add(1)
	defer b.adminOps.Done()
	b.adminMu.Unlock()
	if err := b.createLogs([]*Topic{add}, add.Partitions)[add]; err != nil {
		return err
	}
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	if b.closed {
		b.deleteLogs(add.Partitions)
		return fmt.Errorf("broker is shutting down: %w", kerr.BrokerNotAvailable)
	}
	nt.Partitions = append(append([]*Partition(nil), t.Partitions...), add.Partitions...)
	b.publish(&nt)
	if err := b.commitLocked(func() { b.publish(t) }); err != nil {
		b.deleteLogs(add.Partitions)
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
	return describeTopicConfig(b.Config(), t.Configs), nil
}

// SetTopicConfigs replaces a topic's overrides with overrides (configs not
// named revert to their defaults), validating first; nothing changes on
// error (InvalidConfig, UnknownTopicOrPartition).
func (b *Broker) SetTopicConfigs(name string, overrides map[string]string, validateOnly bool) error {
	cfg, ts, err := resolveOverrides(b.Config(), b.durableAcks, overrides)
	if err != nil {
		return err
	}
	defer b.topicLocks.lock(collisionKey(name))()
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	t := b.Topic(name)
	if t == nil {
		return fmt.Errorf("topic %q: %w", name, kerr.UnknownTopicOrPartition)
	}
	if err := ValidateTopicOverrides(b.Config(), name, t.Internal, overrides); err != nil {
		return err
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

// resolveOverrides validates a topic's overrides and resolves them over
// the broker defaults.
func resolveOverrides(bc *config.Broker, durable bool, overrides map[string]string) (storage.Config, topicSettings, error) {
	ptrs := make(map[string]*string, len(overrides))
	for k, v := range overrides {
		v := v
		ptrs[k] = &v
	}
	if err := bc.ValidateTopicConfigs(ptrs); err != nil {
		return storage.Config{}, topicSettings{}, fmt.Errorf("%v: %w", err, kerr.InvalidConfig)
	}
	cfg, ts, err := resolveConfig(bc, overrides, durable)
	if err != nil {
		return storage.Config{}, topicSettings{}, fmt.Errorf("%v: %w", err, kerr.InvalidConfig)
	}
	return cfg, ts, nil
}

// ValidateTopicOverrides checks a topic's complete set of overrides as
// AlterConfigs would apply them (errors wrap INVALID_CONFIG): every value
// valid, the whole resolvable, an internal topic kept compacted.
func ValidateTopicOverrides(cfg *config.Broker, name string, internal bool, overrides map[string]string) error {
	if _, _, err := resolveOverrides(cfg, cfg.Bool("strata.durable.acks"), overrides); err != nil {
		return err
	}
	if internal {
		if v, ok := overrides["cleanup.policy"]; ok && v != "compact" {
			return fmt.Errorf("cleanup.policy of internal topic %s must stay compact: %w", name, kerr.InvalidConfig)
		}
	}
	return nil
}

// topicLocks serialises the mutations of one topic (and of the names that
// collide with it) while they do slow disk work without adminMu.
type topicLocks struct {
	mu    sync.Mutex
	locks map[string]*topicLock
}

type topicLock struct {
	mu   sync.Mutex
	refs int
}

// lock locks key and returns its unlock function.
func (tl *topicLocks) lock(key string) func() {
	tl.mu.Lock()
	if tl.locks == nil {
		tl.locks = map[string]*topicLock{}
	}
	l := tl.locks[key]
	if l == nil {
		l = &topicLock{}
		tl.locks[key] = l
	}
	l.refs++
	tl.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		tl.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(tl.locks, key)
		}
		tl.mu.Unlock()
	}
}

// lockAll locks the collision keys of names, each once and in sorted
// order (so two requests naming the same topics cannot deadlock), and
// returns the function that unlocks them all.
func (tl *topicLocks) lockAll(names []string) func() {
	keys := make([]string, 0, len(names))
	seen := make(map[string]bool, len(names))
	for _, n := range names {
		if k := collisionKey(n); !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	unlocks := make([]func(), len(keys))
	for i, k := range keys {
		unlocks[i] = tl.lock(k)
	}
	return func() {
		for i := len(unlocks) - 1; i >= 0; i-- {
			unlocks[i]()
		}
	}
}
