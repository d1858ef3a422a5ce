package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"

	"github.com/strata-io/strata/internal/meta"
)

// Kafka error codes of topic administration.
const (
	codeTopicAlreadyExists int16 = 36
	codeUnknownTopic       int16 = 3
)

// TopicRequest is a CreateTopics entry after defaults are resolved.
type TopicRequest struct {
	Name       string
	ID         string // a new random topic id (UUID text)
	Partitions int
	RF         int
	// Assignment, when non-empty, is the explicit replica_assignment.
	Assignment map[int32][]int32
	Configs    map[string]string
	Internal   bool
}

// collisionName is Kafka's rule that topics differing only in '.' versus
// '_' collide (their metric names would be the same).
func collisionName(name string) string { return strings.ReplaceAll(name, ".", "_") }

// CreateTopic decides a new topic's partitions.
func (s *State) CreateTopic(req TopicRequest) ([]Decision, error) {
	if _, ok := s.Topics[req.Name]; ok {
		return nil, &PlacementError{codeTopicAlreadyExists, fmt.Sprintf("Topic '%s' already exists.", req.Name)}
	}
	for name := range s.Topics {
		if collisionName(name) == collisionName(req.Name) {
			return nil, &PlacementError{codeInvalidTopic, fmt.Sprintf("Topic '%s' collides with existing topic: %s", req.Name, name)}
		}
	}
	var reps [][]int32
	var err error
	if len(req.Assignment) > 0 {
		reps, err = s.ValidateAssignment(0, req.Assignment)
	} else {
		reps, err = s.Place(req.Partitions, req.RF)
	}
	if err != nil {
		return nil, err
	}
	return s.stampAll(NewPartitions(req.Name, req.ID, 0, reps)), nil
}

const codeInvalidTopic int16 = 17

// AddPartitions decides the partitions CreatePartitions adds to a topic
// to reach total, placed with the topic's replication factor or the
// explicit assignment of the new ones.
func (s *State) AddPartitions(name string, total int, assignment [][]int32) ([]Decision, error) {
	t, ok := s.Topics[name]
	if !ok || t.Deleting {
		return nil, &PlacementError{codeUnknownTopic, "This server does not host this topic-partition."}
	}
	cur := len(t.Parts)
	if total <= cur {
		return nil, &PlacementError{codeInvalidPartitions, fmt.Sprintf("Topic currently has %d partitions, %d would not be an increase.", cur, total)}
	}
	rf := 1
	if cur > 0 {
		rf = len(t.Parts[0].State.Replicas)
	}
	var reps [][]int32
	var err error
	if len(assignment) > 0 {
		if len(assignment) != total-cur {
			return nil, &PlacementError{codeInvalidReplicaAssignment, fmt.Sprintf(
				"Attempted to add %d additional partition(s), but only %d assignment(s) were specified.", total-cur, len(assignment))}
		}
		m := map[int32][]int32{}
		for i, a := range assignment {
			m[int32(cur+i)] = a
		}
		reps, err = s.ValidateAssignment(int32(cur), m)
		if err == nil && len(reps[0]) != rf {
			err = &PlacementError{codeInvalidReplicaAssignment, fmt.Sprintf(
				"The manual partition assignment includes a partition with %d replica(s), but this is not consistent with previous partitions, which have %d replica(s).", len(reps[0]), rf)}
		}
	} else {
		reps, err = s.Place(total-cur, rf)
	}
	if err != nil {
		return nil, err
	}
	return s.stampAll(NewPartitions(name, t.ID, int32(cur), reps)), nil
}

// Admin commits topic administration to the metadata store. Any broker
// may run it: every write is create-only or compares the revision it read,
// so concurrent administrators cannot both succeed on the same topic.
type Admin struct {
	Store *meta.Store
	Cache *meta.Cache
	// Policy as in Driver.
	Policy func(*meta.Topic) Policy
	// MaxReplicationFactor refuses larger replication factors with
	// INVALID_REPLICATION_FACTOR (1 until partitions are replicated;
	// 0: no limit).
	MaxReplicationFactor int
	// MaxReplicationReason, when set, is the message of that refusal.
	MaxReplicationReason string

	// beforeWrite, when set (tests), runs between CreatePartitions'
	// decision and its write.
	beforeWrite func()
}

func (a *Admin) state() *State { return FromView(a.Cache.View(), a.Policy) }

func (a *Admin) checkRF(rf int) error {
	if a.MaxReplicationFactor > 0 && rf > a.MaxReplicationFactor {
		if a.MaxReplicationReason != "" {
			return &PlacementError{codeInvalidReplicationFactor, a.MaxReplicationReason}
		}
		return &PlacementError{codeInvalidReplicationFactor, fmt.Sprintf(
			"Replication factor %d is not supported yet: this Strata release stores each partition on one broker (replication.factor 1); replicated partitions come with the replication release.", rf)}
	}
	return nil
}

// CreateTopic creates a topic. validateOnly decides without writing.
func (a *Admin) CreateTopic(ctx context.Context, req TopicRequest, validateOnly bool) error {
	return a.CreateTopics(ctx, []TopicRequest{req}, validateOnly)[0]
}

// CreateTopics creates the topics of one CreateTopics request and returns
// one error per request (nil: created). They are placed one after the
// other on one State, so each placement counts the partitions placed
// before it (balanced leaders across the request, as Kafka's controller
// places a request's topics in turn), and written together: as many
// whole topics per transaction as max-txn-ops allows, every key
// create-only. A transaction that loses a compare (a topic created
// meanwhile by another broker) is retried one topic per transaction, so
// only the topics that exist fail, with TOPIC_ALREADY_EXISTS. One request
// of 1,000 topics is then a couple of transactions instead of 1,000.
func (a *Admin) CreateTopics(ctx context.Context, reqs []TopicRequest, validateOnly bool) []error {
	errs := make([]error, len(reqs))
	// Placed on a view synced with the store: every broker registered and
	// every topic created before the request counts (Kafka's controller
	// places on its committed state), not only what this node's watch
	// delivered so far.
	v, err := a.Cache.Sync(ctx)
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	st := FromView(v, a.Policy)
	type write struct {
		i     int
		parts []meta.Change
		topic meta.Change
	}
	var writes []write
	for i, req := range reqs {
		rf := req.RF
		for _, r := range req.Assignment {
			rf = len(r)
			break
		}
		if errs[i] = a.checkRF(rf); errs[i] != nil {
			continue
		}
		ds, err := st.CreateTopic(req)
		if errs[i] = err; err != nil {
			continue
		}
		// The next placements see this topic.
		ti := &TopicInfo{Name: req.Name, ID: req.ID, Parts: make([]meta.Partition, len(ds))}
		for j, d := range ds {
			ti.Parts[j] = meta.Partition{TopicPartition: d.TP, State: d.New}
		}
		st.Topics[req.Name] = ti
		if validateOnly {
			continue
		}
		topic := meta.Topic{Name: req.Name, ID: req.ID, Partitions: int32(len(ds)), Configs: req.Configs, Internal: req.Internal}
		tc, err := meta.PutJSON(a.Store.Keys().Topic(req.Name), topic, 0)
		if errs[i] = err; err != nil {
			continue
		}
		w := write{i: i, topic: tc, parts: make([]meta.Change, len(ds))}
		for j, d := range ds {
			w.parts[j] = a.Store.PartitionChange(d.TP, d.New, 0)
		}
		writes = append(writes, w)
	}
	if validateOnly || len(writes) == 0 {
		return errs
	}
	var last int64
	one := func(w write) {
		rev, err := a.writeTopic(ctx, w.parts, w.topic)
		if err != nil {
			errs[w.i] = a.explainCreateConflict(err, reqs[w.i].Name)
			return
		}
		last = max(last, rev)
	}
	// Whole topics packed into transactions of up to max-txn-ops changes.
	maxOps := a.Store.MaxOps()
	for len(writes) > 0 {
		n, ops := 0, 0
		for n < len(writes) && ops+len(writes[n].parts)+1 <= maxOps {
			ops += len(writes[n].parts) + 1
			n++
		}
		if n <= 1 {
			one(writes[0]) // a single topic, or one larger than a transaction
			writes = writes[1:]
			continue
		}
		var changes []meta.Change
		for _, w := range writes[:n] {
			changes = append(append(changes, w.parts...), w.topic)
		}
		rev, err := a.Store.Txn(ctx, changes)
		switch {
		case err == meta.ErrConflict:
			for _, w := range writes[:n] {
				one(w)
			}
		case err != nil:
			for _, w := range writes[:n] {
				errs[w.i] = err
			}
		default:
			last = max(last, rev)
		}
		writes = writes[n:]
	}
	if last > 0 {
		if _, err := a.Cache.WaitRev(ctx, last); err != nil {
			for i := range errs {
				if errs[i] == nil {
					errs[i] = err
				}
			}
		}
	}
	return errs
}

// writeTopic writes one topic's keys. Small topics are one transaction. A
// large one writes its partition keys first (invisible without the topic
// key, which names the topic id they are filed under) and the topic key
// last.
func (a *Admin) writeTopic(ctx context.Context, parts []meta.Change, topic meta.Change) (int64, error) {
	st := a.Store
	if len(parts)+1 <= st.MaxOps() {
		return st.Txn(ctx, append(parts, topic))
	}
	if _, _, err := st.Batches(ctx, parts); err != nil {
		return 0, err
	}
	return st.Txn(ctx, []meta.Change{topic})
}

func (a *Admin) explainCreateConflict(err error, name string) error {
	if err == meta.ErrConflict {
		return &PlacementError{codeTopicAlreadyExists, fmt.Sprintf("Topic '%s' already exists.", name)}
	}
	return err
}

// CreatePartitions grows a topic to total partitions. The topic key's
// value and the revision its write compares on come from one read of the
// store, and the placement from a view synced at least as far: a
// concurrent change to the topic (an alter of its configs, another
// CreatePartitions, a deletion) between that read and the write makes the
// write fail and the request decide again, so it is never undone. (The
// value once came from the view and the revision from a later read: an
// alter committed in between was overwritten with the view's configs.)
func (a *Admin) CreatePartitions(ctx context.Context, name string, total int, assignment [][]int32, validateOnly bool) error {
	for {
		err := a.createPartitions(ctx, name, total, assignment, validateOnly)
		if err != errTopicChanged {
			return err
		}
		if ctx.Err() != nil {
			return meta.Retriable(fmt.Errorf("topic %s kept changing: %w", name, ctx.Err()))
		}
	}
}

// errTopicChanged: the topic changed between CreatePartitions' read and
// its write; it decides again.
var errTopicChanged = errors.New("topic changed meanwhile")

func (a *Admin) createPartitions(ctx context.Context, name string, total int, assignment [][]int32, validateOnly bool) error {
	st := a.Store
	resp, err := st.Client().Get(ctx, st.Keys().Topic(name))
	if err != nil {
		return meta.Retriable(err)
	}
	v, err := a.Cache.Sync(ctx) // as CreateTopic; at or past resp's revision
	if err != nil {
		return err
	}
	ds, err := FromView(v, a.Policy).AddPartitions(name, total, assignment)
	if err != nil || validateOnly {
		return err
	}
	if len(resp.Kvs) == 0 {
		return errTopicChanged // created after the read: the view has it
	}
	var nt meta.Topic
	if err := json.Unmarshal(resp.Kvs[0].Value, &nt); err != nil {
		return fmt.Errorf("topic %s: %w", name, err)
	}
	if vt := v.Topics[name]; vt == nil || vt.ID != nt.ID {
		return errTopicChanged
	}
	nt.Partitions = int32(total)
	tc, err := meta.PutJSON(st.Keys().Topic(name), nt, resp.Kvs[0].ModRevision)
	if err != nil {
		return err
	}
	parts := make([]meta.Change, len(ds))
	for i, d := range ds {
		parts[i] = st.PartitionChange(d.TP, d.New, 0)
	}
	if a.beforeWrite != nil {
		a.beforeWrite()
	}
	var rev int64
	if len(parts)+1 <= st.MaxOps() {
		// One transaction: a lost compare leaves nothing behind, and the
		// request decides again.
		rev, err = st.Txn(ctx, append(parts, tc))
		if err == meta.ErrConflict {
			return errTopicChanged
		}
	} else {
		// Larger: the partition keys first (invisible until the topic key
		// counts them), then the topic key; a lost compare is answered.
		if _, _, err := st.Batches(ctx, parts); err != nil {
			return err
		}
		rev, err = st.Txn(ctx, []meta.Change{tc})
	}
	if err != nil {
		return err
	}
	_, err = a.Cache.WaitRev(ctx, rev)
	return err
}

// DeleteTopic deletes a topic (Kafka's DeleteTopics): it marks the topic
// Deleting (compared on the topic key's revision), upon which every broker
// stops serving it, deletes its replicas and acknowledges (meta
// deletions.go); the active controller then removes the topic's keys
// (Driver.finishDeletions). DeleteTopic returns once the topic key is gone,
// so the answer comes when no broker serves the topic, or with ctx's error
// (retriable) if that takes longer: the deletion completes all the same.
func (a *Admin) DeleteTopic(ctx context.Context, name string) error {
	st := a.Store
	resp, err := st.Client().Get(ctx, st.Keys().Topic(name))
	if err != nil {
		return meta.Retriable(err)
	}
	if len(resp.Kvs) == 0 {
		return &PlacementError{codeUnknownTopic, "This server does not host this topic-partition."}
	}
	var t meta.Topic
	if err := json.Unmarshal(resp.Kvs[0].Value, &t); err != nil {
		return fmt.Errorf("topic %s: %w", name, err)
	}
	rev := resp.Kvs[0].ModRevision
	if !t.Deleting {
		t.Deleting = true
		tc, err := meta.PutJSON(st.Keys().Topic(name), t, rev)
		if err != nil {
			return err
		}
		rev, err = st.Txn(ctx, []meta.Change{tc})
		if err == meta.ErrConflict {
			return a.DeleteTopic(ctx, name) // changed meanwhile: look again
		}
		if err != nil {
			return err
		}
	}
	for {
		ch := a.Cache.Changed()
		if v := a.Cache.View(); v.Rev >= rev {
			if cur := v.Topics[name]; cur == nil || cur.ID != t.ID {
				return nil
			}
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return meta.Retriable(fmt.Errorf("topic %s is marked for deletion; its replicas are still being deleted: %w", name, ctx.Err()))
		}
	}
}

// AlterTopicConfigs replaces a topic's dynamic configs with edit's result
// on the configs stored now, compared on the topic key's revision (a
// concurrent change makes it read and edit again). validate checks the
// result before it is written; validateOnly stops there.
func (a *Admin) AlterTopicConfigs(ctx context.Context, name string, edit func(cur map[string]string) (map[string]string, error), validateOnly bool) error {
	st := a.Store
	for {
		resp, err := st.Client().Get(ctx, st.Keys().Topic(name))
		if err != nil {
			return meta.Retriable(err)
		}
		var t meta.Topic
		if len(resp.Kvs) > 0 {
			if err := json.Unmarshal(resp.Kvs[0].Value, &t); err != nil {
				return fmt.Errorf("topic %s: %w", name, err)
			}
		}
		if len(resp.Kvs) == 0 || t.Deleting {
			return &PlacementError{codeUnknownTopic, "This server does not host this topic-partition."}
		}
		cur := maps.Clone(t.Configs)
		if cur == nil {
			cur = map[string]string{}
		}
		next, err := edit(cur)
		if err != nil || validateOnly {
			return err
		}
		t.Configs = next
		tc, err := meta.PutJSON(st.Keys().Topic(name), t, resp.Kvs[0].ModRevision)
		if err != nil {
			return err
		}
		rev, err := st.Txn(ctx, []meta.Change{tc})
		if err == meta.ErrConflict {
			continue
		}
		if err != nil {
			return err
		}
		_, err = a.Cache.WaitRev(ctx, rev)
		return err
	}
}

// stampAll records the leader's and the ISR members' broker epochs in new
// partition states (KIP-903; see stamp).
func (s *State) stampAll(ds []Decision) []Decision {
	for i := range ds {
		ds[i].New = s.stamp(ds[i].New)
	}
	return ds
}
