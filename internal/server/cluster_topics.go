package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/internal/broker"
	"github.com/strata-io/strata/internal/controller"
	"github.com/strata-io/strata/internal/meta"
	"github.com/strata-io/strata/internal/protocol"
)

// This file is the broker side of the cluster metadata (docs/cluster.md
// "The broker side"): the local replicas follow the metadata (a reconciler
// driven by the cache), and topic administration arriving at this broker
// goes to the metadata store through controller.Admin.

// policy is a topic's election policy from its configs over the broker
// defaults.
func (s *Server) policy(t *meta.Topic) controller.Policy {
	vals := s.currentConfig().TopicConfig(t.Configs)
	minISR, err := strconv.Atoi(vals["min.insync.replicas"])
	if err != nil || minISR < 1 {
		minISR = 1
	}
	return controller.Policy{MinISR: minISR, Unclean: vals["unclean.leader.election.enable"] == "true"}
}

// applyView makes the local replicas match the view: every partition whose
// replicas include this broker exists here with its leadership, every
// other local replica is deleted (strays: topics deleted, also while this
// broker was down), and the deletion of topics being deleted is
// acknowledged once their replicas are gone.
func (s *Server) applyView(ctx context.Context, c *cluster, v *meta.View) error {
	// The dynamic broker configs first: the topic defaults the replicas
	// below are resolved over.
	if err := s.applyDynamicConfig(v); err != nil {
		s.logger.Warn("dynamic broker configs: some topics keep their previous configuration", "err", err)
	}
	me := s.broker.NodeID()
	var specs []broker.TopicSpec
	var deleting []*meta.Topic
	for _, name := range v.TopicNames() {
		t := v.Topics[name]
		if t.Deleting {
			deleting = append(deleting, t)
			continue
		}
		id, err := uuid.Parse(t.ID)
		if err != nil {
			s.logger.Warn("topic with a malformed id in the cluster metadata", "topic", name, "id", t.ID)
			continue
		}
		var parts map[int32]broker.Leadership
		for i, p := range v.Parts[t.ID] {
			if p.ModRevision == 0 || !slices.Contains(p.State.Replicas, me) {
				continue
			}
			if parts == nil {
				parts = map[int32]broker.Leadership{}
			}
			parts[int32(i)] = broker.Leadership{Leader: p.State.Leader, LeaderEpoch: p.State.LeaderEpoch,
				Replicas: p.State.Replicas, ISR: p.State.ISR}
		}
		if parts != nil {
			specs = append(specs, broker.TopicSpec{Name: name, ID: id, Internal: t.Internal, Configs: t.Configs, Partitions: parts})
		}
	}
	err := s.broker.ApplyTopics(specs)
	// Replicated partitions: the replica Manager applies their states,
	// after the local logs exist.
	s.syncReplicas(c, v)
	for _, t := range deleting {
		if v.Acked(t.ID, me) || !holdsReplica(v, t, me) {
			continue
		}
		if id, _ := uuid.Parse(t.ID); s.broker.TopicByID(id) != nil {
			continue // not deleted (ApplyTopics reported why)
		}
		if aerr := c.store.AckDeletion(ctx, t.ID, me, c.session().Lease()); aerr != nil {
			err = errors.Join(err, aerr)
		}
	}
	return err
}

// holdsReplica reports whether broker id is among the topic's replicas.
func holdsReplica(v *meta.View, t *meta.Topic, id int32) bool {
	for _, p := range v.Parts[t.ID] {
		if slices.Contains(p.State.Replicas, id) {
			return true
		}
	}
	return false
}

// reconcile applies every new view until ctx ends, retrying a failed
// application after a pause.
func (s *Server) reconcile(ctx context.Context, c *cluster) {
	defer close(c.rdone)
	for {
		ch := c.cache.Changed()
		v := c.cache.View()
		if v.Rev > c.applied.Load() {
			if err := s.applyView(ctx, c, v); err != nil {
				s.logger.Warn("applying the cluster metadata to the local replicas failed; retrying", "rev", v.Rev, "err", err)
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Second):
				}
				continue
			}
			c.setApplied(v.Rev)
		}
		select {
		case <-ctx.Done():
			return
		case <-ch:
		}
	}
}

// setApplied records that the local replicas reflect revision rev.
func (c *cluster) setApplied(rev int64) {
	c.appliedMu.Lock()
	c.applied.Store(rev)
	close(c.appliedCh)
	c.appliedCh = make(chan struct{})
	c.appliedMu.Unlock()
}

// waitApplied waits until the local replicas reflect the cache's current
// view (after an administrative change this broker committed).
func (c *cluster) waitApplied(ctx context.Context) error {
	return meta.Retriable(c.waitAppliedRev(ctx, c.cache.View().Rev))
}

// clusterAPI implements protocol.Cluster over the node's cluster membership.
type clusterAPI struct {
	s *Server
	c *cluster
}

var _ protocol.Cluster = clusterAPI{}

func (a clusterAPI) View() *meta.View { return a.c.cache.View() }

// SyncView is View synced with the store (meta.Cache.Sync).
func (a clusterAPI) SyncView(ctx context.Context) (*meta.View, error) {
	v, err := a.c.cache.Sync(ctx)
	if err != nil {
		return nil, adminError(err)
	}
	return v, nil
}

// adminError maps a topic administration error to the Kafka error the
// client gets: a placement refusal carries its code and message, an
// unavailable metadata store is REQUEST_TIMED_OUT (retriable).
func adminError(err error) error {
	var pe *controller.PlacementError
	var re *meta.RetriableError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &pe):
		return fmt.Errorf("%s: %w", pe.Message, kerr.ErrorForCode(pe.Code))
	case errors.As(err, &re), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return fmt.Errorf("%v: %w", err, kerr.RequestTimedOut)
	}
	return err
}

// CreateTopic validates a topic as a single broker does (name, partition
// count, replication factor, configs; errors are Kafka's) and creates it in
// the cluster metadata, placed by the controller's rules. It returns once
// this broker's replicas of it exist.
func (a clusterAPI) CreateTopic(ctx context.Context, req broker.CreateTopicRequest, assignment map[int32][]int32) (protocol.CreatedTopic, error) {
	ts, errs := a.CreateTopics(ctx, []broker.CreateTopicRequest{req}, []map[int32][]int32{assignment})
	return ts[0], errs[0]
}

// CreateTopics is CreateTopic for the topics of one request: validated
// one by one, placed and written together (controller.Admin.CreateTopics),
// and answered once this broker's replicas of all of them exist.
func (a clusterAPI) CreateTopics(ctx context.Context, reqs []broker.CreateTopicRequest, assignments []map[int32][]int32) ([]protocol.CreatedTopic, []error) {
	out := make([]protocol.CreatedTopic, len(reqs))
	errs := make([]error, len(reqs))
	var trs []controller.TopicRequest
	var which []int
	validateOnly := false
	for i := range reqs {
		tr, created, err := a.topicRequest(reqs[i], assignments[i])
		if err != nil {
			errs[i] = err
			continue
		}
		out[i] = created
		validateOnly = validateOnly || reqs[i].ValidateOnly
		trs = append(trs, tr)
		which = append(which, i)
	}
	if len(trs) == 0 {
		return out, errs
	}
	cerrs := a.c.admin.CreateTopics(ctx, trs, validateOnly)
	created := false
	for k, i := range which {
		if cerrs[k] != nil {
			errs[i] = adminError(cerrs[k])
			continue
		}
		if validateOnly {
			continue
		}
		id, _ := uuid.Parse(trs[k].ID)
		out[i].ID = id
		created = true
		a.s.logger.Info("topic created", "topic", trs[k].Name, "id", broker.FormatTopicID(id), "partitions", out[i].Partitions,
			"replication_factor", out[i].ReplicationFactor, "configs", out[i].Configs)
	}
	if created {
		if err := adminError(a.c.waitApplied(ctx)); err != nil {
			for k, i := range which {
				if cerrs[k] == nil {
					errs[i] = err
				}
			}
		}
	}
	return out, errs
}

// topicRequest validates one CreateTopics entry as a single broker does
// and resolves its defaults into the controller's request.
func (a clusterAPI) topicRequest(req broker.CreateTopicRequest, assignment map[int32][]int32) (controller.TopicRequest, protocol.CreatedTopic, error) {
	s := a.s
	if err := broker.ValidateTopicName(req.Name); err != nil {
		return controller.TopicRequest{}, protocol.CreatedTopic{}, err
	}
	if req.NumPartitions == -1 {
		req.NumPartitions = int32(s.cfg.Int64("num.partitions"))
	}
	if req.ReplicationFactor == -1 {
		req.ReplicationFactor = int16(s.cfg.Int64("default.replication.factor"))
	}
	if len(assignment) > 0 {
		req.NumPartitions = int32(len(assignment))
		for _, r := range assignment {
			req.ReplicationFactor = int16(len(r))
			break
		}
	}
	if req.NumPartitions <= 0 {
		return controller.TopicRequest{}, protocol.CreatedTopic{}, fmt.Errorf("number of partitions must be larger than 0, got %d: %w", req.NumPartitions, kerr.InvalidPartitions)
	}
	if req.ReplicationFactor <= 0 {
		return controller.TopicRequest{}, protocol.CreatedTopic{}, fmt.Errorf("replication factor must be larger than 0, got %d: %w", req.ReplicationFactor, kerr.InvalidReplicationFactor)
	}
	if err := s.cfg.ValidateTopicConfigs(req.Configs); err != nil {
		return controller.TopicRequest{}, protocol.CreatedTopic{}, fmt.Errorf("%v: %w", err, kerr.InvalidConfig)
	}
	overrides := make(map[string]string, len(req.Configs))
	for k, v := range req.Configs {
		overrides[k] = *v
	}
	if err := broker.ValidateTopicOverrides(s.cfg, req.Name, req.Internal, overrides); err != nil {
		return controller.TopicRequest{}, protocol.CreatedTopic{}, err
	}
	tr := controller.TopicRequest{Name: req.Name, ID: uuid.New().String(), Partitions: int(req.NumPartitions),
		RF: int(req.ReplicationFactor), Assignment: assignment, Configs: overrides, Internal: req.Internal}
	return tr, protocol.CreatedTopic{Partitions: req.NumPartitions, ReplicationFactor: req.ReplicationFactor, Configs: overrides}, nil
}

// CreatePartitions grows a topic through the cluster metadata.
func (a clusterAPI) CreatePartitions(ctx context.Context, topic string, total int32, assignment [][]int32, validateOnly bool) error {
	if err := a.c.admin.CreatePartitions(ctx, topic, int(total), assignment, validateOnly); err != nil {
		return adminError(err)
	}
	if validateOnly {
		return nil
	}
	a.s.logger.Info("partitions added", "topic", topic, "partitions", total)
	return adminError(a.c.waitApplied(ctx))
}

// DeleteTopic deletes a topic through the cluster metadata, with a single
// broker's refusals (delete.topic.enable, internal topics).
func (a clusterAPI) DeleteTopic(ctx context.Context, topic string) error {
	if !a.s.cfg.Bool("delete.topic.enable") {
		return fmt.Errorf("topic deletion is disabled (delete.topic.enable=false): %w", kerr.TopicDeletionDisabled)
	}
	if t := a.View().Topics[topic]; t != nil && t.Internal {
		return fmt.Errorf("topic %q is internal and cannot be deleted: %w", topic, kerr.InvalidTopicException)
	}
	if err := a.c.admin.DeleteTopic(ctx, topic); err != nil {
		return adminError(err)
	}
	a.s.logger.Info("topic deleted", "topic", topic)
	return nil
}

// AlterTopicConfigs changes a topic's configs in the cluster metadata;
// every broker applies them to its replicas without a restart.
func (a clusterAPI) AlterTopicConfigs(ctx context.Context, topic string, edit func(map[string]string) (map[string]string, error), validateOnly bool) error {
	if err := a.c.admin.AlterTopicConfigs(ctx, topic, edit, validateOnly); err != nil {
		var ke *kerr.Error
		if errors.As(err, &ke) {
			return err // the edit's own refusal
		}
		return adminError(err)
	}
	if validateOnly {
		return nil
	}
	return adminError(a.c.waitApplied(ctx))
}

// EnsureInternalTopic starts creating __consumer_offsets or
// __transaction_state in the background unless it exists or is being
// created (Kafka creates them at the first FindCoordinator, so that they
// spread over the brokers registered by then).
func (a clusterAPI) EnsureInternalTopic(name string) {
	if _, busy := a.c.ensuring.LoadOrStore(name, true); busy {
		return
	}
	a.c.bg.Add(1)
	go func() {
		defer a.c.bg.Done()
		defer a.c.ensuring.Delete(name)
		ctx, cancel := context.WithTimeout(a.c.bgCtx, 30*time.Second)
		defer cancel()
		if err := a.s.createInternalTopic(ctx, a, name); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			a.s.logger.Warn("create internal topic", "topic", name, "err", err)
		}
	}()
}

// createInternalTopic creates an internal topic with its settings
// (offsets.topic.num.partitions / transaction.state.log.num.partitions,
// compacted, replication factor 1 in this release).
func (s *Server) createInternalTopic(ctx context.Context, a clusterAPI, name string) error {
	if a.View().Topics[name] != nil {
		return nil
	}
	compact := "compact"
	var n int32
	var segBytes string
	switch name {
	case offsetsTopic:
		n, segBytes = int32(s.cfg.Int64("offsets.topic.num.partitions")), s.cfg.Get("offsets.topic.segment.bytes")
	case transactionTopic:
		n, segBytes = int32(s.cfg.Int64("transaction.state.log.num.partitions")), s.cfg.Get("transaction.state.log.segment.bytes")
	default:
		return fmt.Errorf("%s is not an internal topic", name)
	}
	if segBytes == "" {
		segBytes = "104857600"
	}
	configs := map[string]*string{"cleanup.policy": &compact, "segment.bytes": &segBytes}
	rf := s.internalReplicationFactor(a, name)
	if name == transactionTopic {
		// Kafka sets __transaction_state's min.insync.replicas to
		// transaction.state.log.min.isr (TransactionLog), capped here by
		// the replication factor the topic gets.
		minISR := strconv.FormatInt(min(settingOr(s, "transaction.state.log.min.isr", 2), int64(rf)), 10)
		configs["min.insync.replicas"] = &minISR
	}
	_, err := a.CreateTopic(ctx, broker.CreateTopicRequest{Name: name, NumPartitions: n, ReplicationFactor: rf, Internal: true,
		Configs: configs}, nil)
	return err
}

// internalReplicationFactor is the replication factor an internal topic is
// created with: offsets.topic.replication.factor /
// transaction.state.log.replication.factor (Kafka's default 3), capped by
// the brokers registered now and by the largest replication factor this
// cluster accepts, with a log line saying so (Kafka refuses to create the
// topic until enough brokers are up; a cluster smaller than the setting
// would then have no coordinator at all).
func (s *Server) internalReplicationFactor(a clusterAPI, name string) int16 {
	setting := "offsets.topic.replication.factor"
	if name == transactionTopic {
		setting = "transaction.state.log.replication.factor"
	}
	want := settingOr(s, setting, 3)
	rf := want
	if live := int64(len(a.View().Brokers)); rf > live {
		rf = max(live, 1)
	}
	if m := int64(a.c.admin.MaxReplicationFactor); m > 0 && rf > m {
		rf = m
	}
	if rf != want {
		s.logger.Warn("internal topic created with fewer replicas than its setting", "topic", name, "setting", setting,
			"wanted", want, "replication_factor", rf, "registered_brokers", len(a.View().Brokers))
	}
	return int16(rf)
}

// settingOr is an integer setting, def when it is not set.
func settingOr(s *Server, name string, def int64) int64 {
	if v := s.cfg.Get(name); v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			return n
		}
	}
	return def
}
