package replica

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/strata-io/strata/internal/meta"
)

// MetaCommitter commits ISR changes in the cluster metadata: each is
// AlterPartition on the partition's state as cached, written by an etcd
// transaction that compares the partition key's mod revision and the
// create revisions (broker epochs) of the leader's and every added
// replica's registrations (docs/cluster.md, "Interfaces for replication").
type MetaCommitter struct {
	Store *meta.Store
	Cache *meta.Cache
}

// AlterPartitions implements Committer. Changes go in one transaction
// when they all compare equal, one by one otherwise.
func (c *MetaCommitter) AlterPartitions(ctx context.Context, leader int32, props []Proposal) []error {
	errs := make([]error, len(props))
	v := c.Cache.View()
	keys := c.Store.Keys()
	type prepared struct {
		i       int
		changes []meta.Change
		key     string
		rev     int64
	}
	var ready []prepared
	for i, p := range props {
		t, part, ok := v.Partition(p.TP.Topic, p.TP.Partition)
		if !ok {
			errs[i] = fmt.Errorf("%s is not in the metadata: %w", p.TP, ErrStale)
			continue
		}
		ns, err := AlterPartition(part.State, leader, p.Change, p.MinISR)
		if err != nil {
			if errors.Is(err, kerr.FencedLeaderEpoch) || errors.Is(err, kerr.InvalidUpdateVersion) {
				err = fmt.Errorf("%w: %v", ErrStale, err)
			}
			errs[i] = err
			continue
		}
		tp := meta.TopicPartition{TopicID: t.ID, Partition: p.TP.Partition}
		ch := []meta.Change{c.Store.PartitionChange(tp, ns, part.ModRevision)}
		if p.Change.LeaderBrokerEpoch > 0 {
			ch = append(ch, meta.Change{Key: keys.Broker(leader), CheckCreate: p.Change.LeaderBrokerEpoch})
		}
		for id, e := range p.Change.AddedEpochs {
			if e > 0 {
				ch = append(ch, meta.Change{Key: keys.Broker(id), CheckCreate: e})
			}
		}
		ready = append(ready, prepared{i: i, changes: ch, key: keys.Partition(tp), rev: part.ModRevision})
	}
	var all []meta.Change
	for _, p := range ready {
		all = append(all, p.changes...)
	}
	if len(ready) > 1 && len(all) <= c.Store.MaxOps() {
		if _, err := c.Store.Txn(ctx, all); err == nil {
			return errs
		} else if !errors.Is(err, meta.ErrConflict) {
			for _, p := range ready {
				errs[p.i] = err
			}
			return errs
		}
	}
	for _, p := range ready {
		_, err := c.Store.Txn(ctx, p.changes)
		if errors.Is(err, meta.ErrConflict) {
			err = c.explainConflict(ctx, p.key, p.rev)
		}
		errs[p.i] = err
	}
	return errs
}

// explainConflict tells a partition that changed (ErrStale) from a broker
// registration that did (ErrIneligible).
func (c *MetaCommitter) explainConflict(ctx context.Context, key string, rev int64) error {
	resp, err := c.Store.Client().Get(ctx, key, clientv3.WithKeysOnly())
	if err != nil {
		return meta.Retriable(err)
	}
	if len(resp.Kvs) == 1 && resp.Kvs[0].ModRevision == rev {
		return ErrIneligible
	}
	return ErrStale
}
