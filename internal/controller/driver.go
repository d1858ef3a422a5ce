package controller

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/strata-io/strata/internal/meta"
	"github.com/strata-io/strata/internal/parallel"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Driver is the I/O shell around the pure decisions: it campaigns for the
// active controller role (etcd election, so that one node does the work),
// and while active it reconciles partitions with the live brokers after
// every metadata change, committing each decision as a compare-and-set on
// the partition's key. Holding the election is only about who works:
// a decision computed by a deposed controller on stale metadata fails its
// compare and changes nothing.
type Driver struct {
	NodeID int32
	Store  *meta.Store
	Cache  *meta.Cache
	// Policy gives a topic's election policy (min.insync.replicas,
	// unclean.leader.election.enable from its configs and the defaults).
	Policy func(*meta.Topic) Policy
	// SessionTTL is the election lease's TTL (broker.session.timeout.ms).
	SessionTTL time.Duration
	Logger     *slog.Logger
	// OnActive, if set, is called with true when this node becomes the
	// active controller and false when it stops being it.
	OnActive func(bool)
	// Rebalance is the automatic preferred-leader election (leaders.go).
	Rebalance RebalanceConfig
}

// Run campaigns and, while active, reconciles, until ctx ends. Losing the
// etcd session (lease expired, quorum lost) returns to campaigning.
func (d *Driver) Run(ctx context.Context) {
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	ttl := int(max(d.SessionTTL/time.Second, 1))
	for ctx.Err() == nil {
		sess, err := concurrency.NewSession(d.Store.Client(), concurrency.WithTTL(ttl), concurrency.WithContext(ctx))
		if err != nil {
			d.sleep(ctx, time.Second)
			continue
		}
		d.dropStaleCandidacy(ctx, sess)
		el := concurrency.NewElection(sess, d.Store.Keys().Controller())
		if err := d.campaign(ctx, el); err != nil {
			sess.Close()
			d.sleep(ctx, 200*time.Millisecond)
			continue
		}
		d.Logger.Info("this node is the active controller", "node", d.NodeID)
		if d.OnActive != nil {
			d.OnActive(true)
		}
		d.lead(ctx, sess)
		if d.OnActive != nil {
			d.OnActive(false)
		}
		d.Logger.Info("this node is no longer the active controller", "node", d.NodeID)
		rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = el.Resign(rctx)
		cancel()
		sess.Close()
	}
}

// campaignGiveUp bounds how long Run waits, once ctx has ended, for an
// interrupted campaign to withdraw its candidacy.
const campaignGiveUp = 2 * time.Second

// campaign runs etcd's Election.Campaign until it wins or ctx ends. When
// ctx ends during the wait for the earlier candidates, etcd's Campaign
// withdraws the candidacy with the store client's own context (not ctx):
// without a quorum (the other controllers stopped first, as the last
// controller of a cluster stopped node by node) that call would block until
// the client closes, and the client closes only after Run returned (the
// node's shutdown waited forever, then exited at --shutdown-timeout without
// its clean-shutdown marker). So Run waits for the withdrawal at most
// campaignGiveUp; the campaign's goroutine ends when the withdrawal does
// or, at the latest, when the store client closes (cluster.close, right
// after Run). The candidacy key is on the session's lease: it lapses with
// it, and a restart deletes it (dropStaleCandidacy).
func (d *Driver) campaign(ctx context.Context, el *concurrency.Election) error {
	won := make(chan error, 1)
	go func() { won <- el.Campaign(ctx, strconv.Itoa(int(d.NodeID))) }() // owner: campaign; ends as above
	select {
	case err := <-won:
		return err
	case <-ctx.Done():
	}
	select {
	case err := <-won:
		return err
	case <-time.After(campaignGiveUp):
		return ctx.Err()
	}
}

// dropStaleCandidacy deletes this node's candidacies left by an earlier
// run (a crash leaves its lease to expire, and etcd renews leases when a
// member restarts), so a restarted node does not wait a session timeout
// behind its own ghost. Safe because nothing relies on the election for
// correctness; only keys naming this node id are touched.
func (d *Driver) dropStaleCandidacy(ctx context.Context, sess *concurrency.Session) {
	cli := d.Store.Client()
	resp, err := cli.Get(ctx, d.Store.Keys().Controller(), clientv3.WithPrefix())
	if err != nil {
		return
	}
	me := strconv.Itoa(int(d.NodeID))
	for _, kv := range resp.Kvs {
		if string(kv.Value) == me && clientv3.LeaseID(kv.Lease) != sess.Lease() {
			_, _ = cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(string(kv.Key)), "=", kv.ModRevision)).
				Then(clientv3.OpDelete(string(kv.Key))).Commit()
		}
	}
}

func (d *Driver) sleep(ctx context.Context, t time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(t):
	}
}

// lead reconciles after every change until the session ends.
func (d *Driver) lead(ctx context.Context, sess *concurrency.Session) {
	rebalance, stop := d.rebalanceTicker()
	defer stop()
	for {
		changed := d.Cache.Changed()
		if err := d.ReconcileOnce(ctx); err != nil && !errors.Is(err, meta.ErrConflict) {
			d.Logger.Warn("controller reconcile failed; retrying", "err", err)
			select {
			case <-ctx.Done():
				return
			case <-sess.Done():
				return
			case <-time.After(500 * time.Millisecond):
			}
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-sess.Done():
			return
		case <-changed:
		case <-rebalance:
			if err := d.RebalanceOnce(ctx); err != nil {
				d.Logger.Warn("preferred leader rebalance failed", "err", err)
			}
		}
	}
}

// ReconcileOnce computes the decisions for the current view and commits
// them in batches of max-txn-ops. A lost compare (ErrConflict) means the
// view was stale: the next change of the cache triggers a new attempt.
func (d *Driver) ReconcileOnce(ctx context.Context) error {
	v := d.Cache.View()
	if err := d.finishDeletions(ctx, v); err != nil {
		return err
	}
	ds := FromView(v, d.Policy).Reconcile()
	if len(ds) == 0 {
		return nil
	}
	changes := make([]meta.Change, len(ds))
	reasons := map[string]int{}
	for i, dc := range ds {
		changes[i] = d.Store.PartitionChange(dc.TP, dc.New, dc.Expect)
		d.logChange(dc)
		reasons[dc.Reason]++
	}
	d.Logger.Info("partition changes", "count", len(ds), "reasons", reasons)
	applied, rev, err := d.commit(ctx, changes)
	if applied > 0 {
		// Read our own writes before deciding again.
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, _ = d.Cache.WaitRev(wctx, rev)
		cancel()
	}
	return err
}

// logChange logs one decision of a reconcile round: a reassignment's step
// at info, any other change at debug, as Kafka's controller logs the
// partition change records it replays (ReplicationControlManager.replay:
// "Replayed partition assignment change" at info, other changes at
// debug). A restarted broker's round elects each of its partitions again,
// and 10,000 info lines written before the round's first transaction
// held its /readyz back by 0.04-0.5 s (issue 18); the round's summary is
// one info line (ReconcileOnce).
func (d *Driver) logChange(dc Decision) {
	level := slog.LevelDebug
	if strings.HasPrefix(dc.Reason, "reassignment") {
		level = slog.LevelInfo
	}
	d.Logger.Log(context.Background(), level, "partition change", "topic", dc.Topic, "partition", dc.TP.Partition, "state", dc.New.String(), "reason", dc.Reason)
}

// commitWriters bounds the transactions of one reconcile round in flight
// at once.
const commitWriters = 4

// commit writes a round's decisions in transactions of max-txn-ops, up to
// commitWriters at once: the store orders concurrent proposals into one
// Raft round and one WAL fsync where it can, where one transaction after
// the other paid a round trip and an fsync each (issue 18: the elections
// of a restarted broker's 10,100 partitions were ten transactions in a
// row, 70-390 ms each on a loaded machine, between registering and
// /readyz). Each decision compares its own partition's revision and no
// decision depends on another (one per partition), so the order of the
// transactions does not matter, and a failed one (a lost compare) leaves
// the others valid, as Kafka's controller appends a partition change
// record per partition. It returns how many changes were applied, the
// highest revision written and the errors joined.
func (d *Driver) commit(ctx context.Context, changes []meta.Change) (applied int, rev int64, err error) {
	return d.commitWith(ctx, changes, commitWriters)
}

// commitWith is commit with at most writers transactions in flight.
func (d *Driver) commitWith(ctx context.Context, changes []meta.Change, writers int) (applied int, rev int64, err error) {
	per := d.Store.MaxOps()
	n := (len(changes) + per - 1) / per
	var mu sync.Mutex
	err = parallel.ForEach(n, writers, func(i int) error {
		batch := changes[i*per : min((i+1)*per, len(changes))]
		r, err := d.Store.Txn(ctx, batch)
		if err != nil {
			return err
		}
		mu.Lock()
		applied += len(batch)
		rev = max(rev, r)
		mu.Unlock()
		return nil
	})
	return applied, rev, err
}

// finishDeletions removes the keys of every topic marked Deleting whose
// replicas are gone from every live broker holding one (each acknowledged,
// meta deletions.go): the topic key (compared on its revision), its
// partitions and the acknowledgements, in one transaction. A broker that
// is down deletes its replicas as strays when it returns.
func (d *Driver) finishDeletions(ctx context.Context, v *meta.View) error {
	k := d.Store.Keys()
	for _, name := range v.TopicNames() {
		t := v.Topics[name]
		if !t.Deleting || !DeletionDone(v, t) {
			continue
		}
		resp, err := d.Store.Client().Get(ctx, k.Topic(name))
		if err != nil {
			return meta.Retriable(err)
		}
		if len(resp.Kvs) == 0 {
			continue
		}
		_, err = d.Store.Txn(ctx, []meta.Change{
			{Key: k.Topic(name), Delete: true, Expect: resp.Kvs[0].ModRevision},
			{Key: k.TopicPartitions(t.ID), Delete: true, Prefix: true},
			{Key: k.TopicDeletions(t.ID), Delete: true, Prefix: true},
		})
		if err != nil && !errors.Is(err, meta.ErrConflict) {
			return err
		}
		if err == nil {
			d.Logger.Info("topic deleted", "topic", name, "id", t.ID)
		}
	}
	return nil
}

// DeletionDone reports whether every live broker holding a replica of the
// topic has acknowledged deleting it.
func DeletionDone(v *meta.View, t *meta.Topic) bool {
	for _, p := range v.Parts[t.ID] {
		for _, r := range p.State.Replicas {
			if v.Live(r) && !v.Acked(t.ID, r) {
				return false
			}
		}
	}
	return true
}
