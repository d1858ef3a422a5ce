package broker

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"sync"

	"github.com/google/uuid"
	"github.com/strata-io/strata/internal/config"
	"github.com/strata-io/strata/internal/parallel"
	"github.com/strata-io/strata/internal/storage"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Leadership is what this node knows of a partition's replication: its
// leader, leader epoch, replicas and in-sync replicas. On a single node it
// is this node, alone; in a cluster it comes from the metadata
// (docs/cluster.md) through setLeaderships.
type Leadership struct {
	Leader      int32
	LeaderEpoch int32
	Replicas    []int32
	ISR         []int32
}

// alone is the leadership of a partition of a single-node broker.
func (b *Broker) alone(epoch int32) *Leadership {
	return &Leadership{Leader: b.nodeID, LeaderEpoch: epoch, Replicas: []int32{b.nodeID}, ISR: []int32{b.nodeID}}
}

// Leadership returns the partition's current leadership (do not modify
// its slices).
func (p *Partition) Leadership() Leadership { return *p.lead.Load() }

// Leads reports whether this node leads the partition now.
func (p *Partition) Leads() bool {
	if r := p.repl.Load(); r != nil {
		_, ok := r.Leading()
		return ok
	}
	return p.lead.Load().Leader == p.broker.nodeID
}

// SetLeadership records the partition's leadership from the cluster
// metadata (setLeaderships for one partition).
func (p *Partition) SetLeadership(l Leadership) {
	p.broker.setLeaderships([]*Partition{p}, []Leadership{l})
}

// setLeaderships records the leadership ls[i] of each partition ps[i]
// from the cluster metadata. When this node becomes leader at a newer
// epoch of a partition without a replica state machine (one replica), the
// epoch is assigned at the log end at once (Kafka's Partition.makeLeader),
// so OffsetForLeaderEpoch answers for it before the first append. The new
// epochs are assigned in one batch per log dir (storage.AssignEpochs: two SyncFS
// per dir instead of two fsyncs per partition), and each leadership is
// published only after its epoch is durable, so no record of the new
// epoch is accepted before the checkpoint that names it survives a power
// cut (Kafka's makeLeader records the epoch before the partition takes
// appends at it).
func (b *Broker) setLeaderships(ps []*Partition, ls []Leadership) {
	var logs []*storage.Log
	var epochs []int32
	var which []*Partition
	for i, p := range ps {
		l := ls[i]
		if p.repl.Load() == nil && l.Leader == b.nodeID && l.LeaderEpoch > p.Log.LatestEpoch() {
			logs = append(logs, p.Log)
			epochs = append(epochs, l.LeaderEpoch)
			which = append(which, p)
		}
	}
	for i, err := range storage.AssignEpochs(logs, epochs) {
		if err != nil {
			p := which[i]
			b.logger.Warn("assign leader epoch", "topic", p.Topic, "partition", p.Index, "epoch", epochs[i], "err", err)
		}
	}
	for i, p := range ps {
		l := ls[i]
		l.Replicas, l.ISR = slices.Clone(l.Replicas), slices.Clone(l.ISR)
		old := p.lead.Swap(&l)
		if old != nil && (old.Leader != l.Leader || old.LeaderEpoch != l.LeaderEpoch) {
			p.Log.WakeWaiters() // long polls answer the change at once
		}
	}
}

// notLeader is the error of a leader-only operation on a partition this
// node does not lead.
func (p *Partition) notLeader(l Leadership) error {
	return fmt.Errorf("%s-%d is led by broker %d at epoch %d, not by this broker (%d): %w",
		p.Topic, p.Index, l.Leader, l.LeaderEpoch, p.broker.nodeID, kerr.NotLeaderForPartition)
}

// TopicSpec is a topic as the cluster metadata has it, reduced to what
// this node hosts: ApplyTopics makes the local replicas match it.
type TopicSpec struct {
	Name     string
	ID       uuid.UUID
	Internal bool
	Configs  map[string]string
	// Partitions are the indexes this node holds a replica of, and their
	// leadership.
	Partitions map[int32]Leadership
}

// ClusterManaged reports whether the topics of this broker's log
// directories follow the cluster metadata (set once adopted by
// MarkClusterManaged; a directory written by the single-node release is
// not, and its topics are adopted into the metadata on first start).
func (b *Broker) ClusterManaged() bool {
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	return b.managed
}

// MarkClusterManaged records durably that the local topics follow the
// cluster metadata from now on (after their adoption).
func (b *Broker) MarkClusterManaged() error {
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	if b.managed {
		return nil
	}
	b.managed = true
	if err := b.persistLocked(); err != nil {
		b.managed = false
		return fmt.Errorf("persist topic metadata: %w", err)
	}
	return nil
}

// NextProducerID is the first producer id the single-node release had not
// handed out (adoption starts the cluster's producer ids above it).
func (b *Broker) NextProducerID() int64 {
	b.pidMu.Lock()
	defer b.pidMu.Unlock()
	return max(b.pidPersist, b.nextPID)
}

// ApplyTopics makes the local replicas match the cluster metadata: every
// topic of specs exists here with its id, configs and exactly the
// partitions listed (new ones created empty, ones no longer assigned here
// deleted), and every other local topic is deleted (Kafka's stray
// replicas: a topic id no longer in the metadata, including one deleted
// while this broker was down). A local topic whose name is in specs under
// another id is a stray too (the name was deleted and created again).
// The local topic metadata is written once at the end. Errors are
// joined; what succeeded stays applied.
func (b *Broker) ApplyTopics(specs []TopicSpec) error {
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	if b.closed {
		return errors.New("broker is closed")
	}
	want := make(map[string]*TopicSpec, len(specs))
	for i := range specs {
		want[specs[i].Name] = &specs[i]
	}
	var errs []error
	changed := false
	for _, t := range b.Topics() {
		if s := want[t.Name]; s == nil || s.ID != t.ID {
			b.removeTopicLocked(t, "no longer in the cluster metadata (stray replica)")
			changed = true
		}
	}
	type job struct {
		t *Topic
		p *Partition
	}
	var jobs []job
	counts := b.dirCounts(nil)
	var next []*Topic
	for i := range specs {
		s := &specs[i]
		old := b.Topic(s.Name)
		nt := &Topic{Name: s.Name, ID: s.ID, Internal: s.Internal, Configs: maps.Clone(s.Configs)}
		if nt.Configs == nil {
			nt.Configs = map[string]string{}
		}
		if old != nil && !maps.Equal(old.Configs, s.Configs) {
			if err := b.updateConfigsLocked(old, s.Configs); err != nil {
				errs = append(errs, err)
				nt.Configs = old.Configs
			}
		}
		idx := make([]int32, 0, len(s.Partitions))
		for i := range s.Partitions {
			idx = append(idx, i)
		}
		slices.Sort(idx)
		for _, i := range idx {
			l := s.Partitions[i]
			if p := old.Partition(i); p != nil {
				nt.Partitions = append(nt.Partitions, p)
				continue
			}
			p := &Partition{Topic: s.Name, Index: i, baseDir: b.pickDir(counts), broker: b}
			p.lead.Store(&Leadership{Leader: l.Leader, LeaderEpoch: l.LeaderEpoch, Replicas: slices.Clone(l.Replicas), ISR: slices.Clone(l.ISR)})
			jobs = append(jobs, job{nt, p})
			nt.Partitions = append(nt.Partitions, p)
		}
		if old != nil {
			var gone []*Partition
			for _, p := range old.Partitions {
				if _, ok := s.Partitions[p.Index]; !ok {
					gone = append(gone, p)
				}
			}
			if len(gone) > 0 {
				b.forgetPartitions(gone)
				b.logger.Info("replicas removed: no longer assigned to this broker", "topic", s.Name, "partitions", len(gone))
				changed = true
			}
		}
		if old == nil || len(jobs) > 0 || len(nt.Partitions) != len(old.Partitions) || !maps.Equal(nt.Configs, old.Configs) {
			next = append(next, nt)
		}
	}
	// New partitions open in parallel (a large topic has thousands).
	var failMu sync.Mutex
	failed := map[*Partition]bool{}
	if err := parallel.Each(jobs, b.ioThreads(), func(j job) error {
		err := b.removeStale(j.p.Dir())
		if err == nil {
			err = b.openPartition(j.t, j.p, true, false)
		}
		if err != nil {
			failMu.Lock()
			failed[j.p] = true
			failMu.Unlock()
			return fmt.Errorf("create replica %s-%d: %w", j.p.Topic, j.p.Index, err)
		}
		return nil
	}); err != nil {
		errs = append(errs, err)
	}
	for _, nt := range next {
		if len(failed) > 0 {
			nt.Partitions = slices.DeleteFunc(nt.Partitions, func(p *Partition) bool { return failed[p] })
		}
		if b.Topic(nt.Name) == nil {
			b.logger.Info("replicas created", "topic", nt.Name, "id", FormatTopicID(nt.ID), "partitions", len(nt.Partitions), "configs", nt.Configs)
		}
		b.publish(nt)
		changed = true
	}
	// Leadership of every hosted partition (new ones got theirs above).
	// A restart elects every partition at once: the new leader epochs'
	// checkpoints are written as one batch per log dir (setLeaderships).
	type lead struct {
		p *Partition
		l Leadership
	}
	var leads []lead
	for i := range specs {
		t := b.Topic(specs[i].Name)
		for _, p := range t.Partitions {
			if l, ok := specs[i].Partitions[p.Index]; ok && p.Log != nil {
				if len(l.Replicas) == 1 && p.repl.Load() == nil && p.Log.Replicated() {
					// Replicated when it last ran (its log dir's
					// replication-offset-checkpoint lists it), alone now:
					// its own fsynced end is committed again, or its high
					// watermark would stay at the checkpoint.
					p.Log.UnsetReplicated()
				}
				if cur := p.Leadership(); cur.Leader != l.Leader || cur.LeaderEpoch != l.LeaderEpoch ||
					!slices.Equal(cur.Replicas, l.Replicas) || !slices.Equal(cur.ISR, l.ISR) {
					leads = append(leads, lead{p, l})
				}
			}
		}
	}
	ps := make([]*Partition, len(leads))
	ls := make([]Leadership, len(leads))
	for i, x := range leads {
		ps[i], ls[i] = x.p, x.l
	}
	b.setLeaderships(ps, ls)
	if changed {
		if err := b.persistLocked(); err != nil {
			errs = append(errs, fmt.Errorf("persist topic metadata: %w", err))
		}
	}
	return errors.Join(errs...)
}

// updateConfigsLocked applies new topic overrides to t's open logs.
func (b *Broker) updateConfigsLocked(t *Topic, overrides map[string]string) error {
	if err := b.resolveLocked(t, overrides); err != nil {
		return err
	}
	b.logger.Info("topic configs changed", "topic", t.Name, "configs", overrides)
	return nil
}

// resolveLocked resolves a topic's overrides over the current broker
// defaults and applies the result to its open logs.
func (b *Broker) resolveLocked(t *Topic, overrides map[string]string) error {
	cfg, ts, err := resolveConfig(b.Config(), overrides, b.durableAcks)
	if err != nil {
		return fmt.Errorf("topic %s configs: %w", t.Name, err)
	}
	for _, p := range t.Partitions {
		if p.Log == nil {
			continue
		}
		p.Log.UpdateConfig(cfg)
		ts := ts
		p.settings.Store(&ts)
	}
	return nil
}

// removeTopicLocked unpublishes t and deletes its local replicas.
func (b *Broker) removeTopicLocked(t *Topic, why string) {
	b.unpublish(t)
	b.forgetPartitions(t.Partitions)
	b.logger.Info("replicas deleted", "topic", t.Name, "id", FormatTopicID(t.ID), "partitions", len(t.Partitions), "reason", why)
}

// forgetPartitions runs the delete hooks for ps and deletes their logs.
func (b *Broker) forgetPartitions(ps []*Partition) {
	b.hooksMu.Lock()
	hooks := append([]func(string, int32){}, b.onDelete...)
	b.hooksMu.Unlock()
	for _, p := range ps {
		for _, h := range hooks {
			h(p.Topic, p.Index)
		}
	}
	b.deleteLogs(ps)
}

// AdoptClusterID replaces the cluster id of log directories this start
// created (no topic was ever written to them) with the cluster's: a new
// node joins the cluster it finds. A directory with data keeps its id,
// and the caller refuses a mismatch.
func (b *Broker) AdoptClusterID(id string) error {
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	if id == b.clusterID {
		return nil
	}
	if !b.freshDirs || len(b.topics) > 0 {
		return fmt.Errorf("the log directories belong to cluster %s", b.clusterID)
	}
	for _, d := range b.dirs {
		if err := writeMetaProperties(b.fs, d.path, id, b.nodeID); err != nil {
			return err
		}
	}
	b.clusterID = id
	return nil
}

// DiscardFreshClusterID removes the meta.properties this start wrote into
// new log directories (no topic in them) when the node failed to join its
// cluster: kept, the cluster id generated for them would refuse the next
// start ("the log directories belong to cluster X"), and a node whose
// first start failed (say, a controller on a replaced disk, before
// `strata controller remove` and `add`) could never join.
func (b *Broker) DiscardFreshClusterID() error {
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	if !b.freshDirs || len(b.topics) > 0 {
		return nil
	}
	for _, d := range b.dirs {
		if err := b.fs.Remove(filepath.Join(d.path, metaPropertiesName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove the cluster id of new log dir %s: %w", d.path, err)
		}
	}
	return nil
}

// SetConfig makes cfg the broker's configuration (the static settings with
// the dynamic broker configs laid over them, config.Broker.WithDynamic) and
// applies the topic defaults it changes to every open log (Kafka's
// DynamicLogConfig.reconfigure: every log's configuration is resolved
// again, its own overrides kept). A topic whose configuration no longer
// resolves keeps its old one; the errors are joined.
func (b *Broker) SetConfig(cfg *config.Broker) error {
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	if b.closed {
		return errors.New("broker is closed")
	}
	b.cfg.Store(cfg)
	var errs []error
	for _, t := range b.Topics() {
		if err := b.resolveLocked(t, t.Configs); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
