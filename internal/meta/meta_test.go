package meta

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/etcdnode/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// startEtcd starts a one-member etcd with test timing and returns a
// client of it.
func startEtcd(t *testing.T) *clientv3.Client { return etcdtest.Start(t) }

func waitView(t *testing.T, c *Cache, cond func(*View) bool) *View {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		ch := c.Changed()
		if v := c.View(); cond(v) {
			return v
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("view never matched; last rev %d", c.View().Rev)
		}
	}
}

func TestStoreAndCache(t *testing.T) {
	cli := startEtcd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st := NewStore(cli, DefaultKeys, 4)
	cache, err := StartCache(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()

	id, err := st.EnsureClusterID(ctx, "c1")
	if err != nil || id != "c1" {
		t.Fatalf("cluster id %q %v", id, err)
	}
	if id, _ := st.EnsureClusterID(ctx, "c2"); id != "c1" {
		t.Fatalf("second cluster id %q", id)
	}

	// Registration: epoch = create revision, new at each start.
	sess, err := NewSession(ctx, cli, 3*time.Second, 500*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := Broker{ID: 1, Incarnation: "i1", DirectoryID: "d1", Rack: "r1", Listeners: []Endpoint{{Name: "PLAINTEXT", Host: "h", Port: 1, Protocol: "PLAINTEXT"}}}
	e1, err := st.Register(ctx, b, sess.Lease())
	if err != nil {
		t.Fatal(err)
	}
	b.Incarnation = "i2"
	e2, err := st.Register(ctx, b, sess.Lease())
	if err != nil || e2 <= e1 {
		t.Fatalf("re-register of the same directory: epoch %d after %d, %v", e2, e1, err)
	}
	dup := b
	dup.DirectoryID = "d2"
	var de *DuplicateBrokerError
	if _, err := st.Register(ctx, dup, sess.Lease()); !errors.As(err, &de) {
		t.Fatalf("duplicate node.id: %v", err)
	}
	v := waitView(t, cache, func(v *View) bool { return v.Live(1) && v.Brokers[1].Epoch == e2 })
	if v.ClusterID != "c1" || v.Brokers[1].Rack != "r1" || sess.Fenced() {
		t.Fatalf("view %+v fenced=%v", v, sess.Fenced())
	}

	// A topic with 6 partitions in two batches of at most 4 changes.
	topic := Topic{Name: "t", ID: "tid", Partitions: 6}
	tc, _ := PutJSON(st.Keys().Topic("t"), topic, 0)
	var changes []Change
	for p := range int32(6) {
		changes = append(changes, st.PartitionChange(TopicPartition{"tid", p}, PartitionState{Replicas: []int32{1}, ISR: []int32{1}, Leader: 1}, 0))
	}
	changes = append(changes, tc)
	if _, err := st.Txn(ctx, changes); err == nil {
		t.Fatal("a transaction above max-txn-ops was sent")
	}
	n, rev, err := st.Batches(ctx, changes)
	if err != nil || n != 7 {
		t.Fatalf("batches: %d %v", n, err)
	}
	v, err = cache.WaitRev(ctx, rev)
	if err != nil {
		t.Fatal(err)
	}
	_, p3, ok := v.Partition("t", 3)
	if !ok || p3.State.Leader != 1 || v.PartitionCount() != 6 || v.OfflinePartitions() != 0 {
		t.Fatalf("partition 3 %+v ok=%v count=%d", p3, ok, v.PartitionCount())
	}

	// Compare-and-set: a change made on a stale revision loses.
	ns := p3.State.Clone()
	ns.Leader, ns.LeaderEpoch, ns.PartitionEpoch = NoLeader, 1, 1
	rev, err = st.Txn(ctx, []Change{st.PartitionChange(p3.TopicPartition, ns, p3.ModRevision)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Txn(ctx, []Change{st.PartitionChange(p3.TopicPartition, p3.State, p3.ModRevision)}); !errors.Is(err, ErrConflict) {
		t.Fatalf("stale compare-and-set: %v", err)
	}
	if _, err := st.Txn(ctx, []Change{st.PartitionChange(p3.TopicPartition, p3.State, 0)}); !errors.Is(err, ErrConflict) {
		t.Fatalf("create over an existing key: %v", err)
	}
	v, _ = cache.WaitRev(ctx, rev)
	if _, p, _ := v.Partition("t", 3); !p.State.Equal(ns) || v.OfflinePartitions() != 1 {
		t.Fatalf("after CAS: %v offline=%d", p.State, v.OfflinePartitions())
	}

	// Controller election: the candidate with the lowest create revision.
	es, err := concurrency.NewSession(cli, concurrency.WithTTL(2))
	if err != nil {
		t.Fatal(err)
	}
	el := concurrency.NewElection(es, st.Keys().Controller())
	if err := el.Campaign(ctx, "7"); err != nil {
		t.Fatal(err)
	}
	waitView(t, cache, func(v *View) bool { return v.Controller == 7 })
	es.Close()
	waitView(t, cache, func(v *View) bool { return v.Controller == -1 })

	// A clean shutdown revokes the lease: the registration goes at once.
	if err := sess.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if !sess.Fenced() {
		t.Error("closed session not fenced")
	}
	waitView(t, cache, func(v *View) bool { return !v.Live(1) })

	// A fresh load equals the watched view.
	loaded, err := st.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cur := cache.View()
	if loaded.PartitionCount() != cur.PartitionCount() || len(loaded.Topics) != len(cur.Topics) || loaded.ClusterID != cur.ClusterID {
		t.Errorf("load %+v != watched %+v", loaded, cur)
	}
}

// TestSessionExpiry: a lease that is not renewed expires and the
// registration disappears; the broker saw itself fenced before that.
func TestSessionExpiry(t *testing.T) {
	cli := startEtcd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st := NewStore(cli, DefaultKeys, 128)
	cache, err := StartCache(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	sess, err := NewSession(ctx, cli, 2*time.Second, time.Hour, nil) // never renewed
	if err != nil {
		t.Fatal(err)
	}
	defer sess.cancel()
	if _, err := st.Register(ctx, Broker{ID: 2, DirectoryID: "d"}, sess.Lease()); err != nil {
		t.Fatal(err)
	}
	waitView(t, cache, func(v *View) bool { return v.Live(2) })
	waitView(t, cache, func(v *View) bool {
		if !v.Live(2) && !sess.Fenced() {
			t.Fatal("registration expired while the broker still thought itself unfenced")
		}
		return !v.Live(2)
	})
}

// TestCheckCreate: a compare-only change holds a transaction to a key's
// create revision (a broker registration's epoch) and writes nothing.
func TestCheckCreate(t *testing.T) {
	cli := startEtcd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st := NewStore(cli, DefaultKeys, 8)
	reg, err := cli.Put(ctx, "/x/reg", "a")
	if err != nil {
		t.Fatal(err)
	}
	epoch := reg.Header.Revision
	write := func(check int64) error {
		_, err := st.Txn(ctx, []Change{{Key: "/x/reg", CheckCreate: check}, {Key: "/x/val", Value: []byte("v"), Expect: AnyRevision}})
		return err
	}
	if err := write(epoch + 100); !errors.Is(err, ErrConflict) {
		t.Fatalf("wrong epoch: %v", err)
	}
	if err := write(epoch); err != nil {
		t.Fatal(err)
	}
	got, err := cli.Get(ctx, "/x/reg")
	if err != nil || len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "a" || got.Kvs[0].CreateRevision != epoch {
		t.Fatalf("registration changed: %v %v", got, err)
	}
}

// TestCacheSync: Sync returns a view holding every write committed before
// the call, the registration of a broker by another client included, even
// when the store's latest revision is a write outside the metadata prefix
// (no event for the watch: the view catches up by a progress
// notification, not by waiting for the next metadata write).
func TestCacheSync(t *testing.T) {
	cli := startEtcd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st := NewStore(cli, DefaultKeys, 4)
	cache, err := StartCache(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	sess, err := NewSession(ctx, cli, 3*time.Second, 500*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close(ctx)
	for i := int32(1); i <= 20; i++ {
		// A registration then a write outside the prefix: the store's
		// revision is past the registration's.
		b := Broker{ID: i, Incarnation: "i", DirectoryID: "d", Listeners: []Endpoint{{Name: "PLAINTEXT", Host: "h", Port: 1, Protocol: "PLAINTEXT"}}}
		if _, err := st.Register(ctx, b, sess.Lease()); err != nil {
			t.Fatal(err)
		}
		put, err := cli.Put(ctx, "/elsewhere/x", "y")
		if err != nil {
			t.Fatal(err)
		}
		v, err := cache.Sync(ctx)
		if err != nil {
			t.Fatalf("sync after registering broker %d: %v", i, err)
		}
		if v.Brokers[i].ID != i || v.Rev < put.Header.Revision {
			t.Fatalf("sync after registering broker %d: view at %d (store at %d) lists brokers %v", i, v.Rev, put.Header.Revision, v.Brokers)
		}
	}
	// The view's progress revision is a valid watch start: later writes
	// still arrive.
	b := Broker{ID: 99, Incarnation: "i", DirectoryID: "d", Listeners: []Endpoint{{Name: "PLAINTEXT", Host: "h", Port: 1, Protocol: "PLAINTEXT"}}}
	if _, err := st.Register(ctx, b, sess.Lease()); err != nil {
		t.Fatal(err)
	}
	waitView(t, cache, func(v *View) bool { _, ok := v.Brokers[99]; return ok })
}
