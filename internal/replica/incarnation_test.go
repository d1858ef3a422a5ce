package replica_test

import (
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/meta"
	"github.com/strata-io/strata/internal/replica"
	"github.com/strata-io/strata/internal/storage"
	"github.com/strata-io/strata/internal/vfs"
)

// TestNoLeadershipOfEarlierIncarnation: a broker restarted within its
// session (kill -9 and start again) registers with a new broker epoch
// while the metadata still names it leader under the election its
// previous incarnation got (ElectedBrokerEpoch). It must not lead until
// the controller's new election: its log may end past the high watermark
// with records the next leader does not have (TestGroupCoordinatorKillClients
// saw a committed offset read back from such a broker, then rolled back).
// Kafka's restarted broker never leads under its previous incarnation's
// election either. Once the controller elects it again (a new leader
// epoch, its current broker epoch recorded), it leads.
func TestNoLeadershipOfEarlierIncarnation(t *testing.T) {
	const local, oldEpoch, newEpoch = 1, 10, 42
	syncer := storage.NewSyncer(nil)
	l, err := storage.Open(filepath.Join(t.TempDir(), "rep-0"), [16]byte{3}, storage.DefaultConfig(), true,
		storage.Options{FS: vfs.Default(), Syncer: syncer})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	mgr := replica.NewManager(replica.ManagerConfig{
		Local: local, BrokerEpoch: func() int64 { return newEpoch }, Durable: true,
		LagTimeMax: time.Second, FetchWaitMax: 100 * time.Millisecond, FetchBackoff: 50 * time.Millisecond,
		Dialer: &replica.KgoDialer{Resolve: func(int32) (string, bool) { return "", false }},
		Logger: slog.New(slog.DiscardHandler),
	})
	mgr.Start()
	t.Cleanup(mgr.Close)
	view := func(st meta.PartitionState) *meta.View {
		return &meta.View{
			Brokers: map[int32]*meta.Broker{1: {ID: 1, Epoch: newEpoch}, 2: {ID: 2, Epoch: 20}, 3: {ID: 3, Epoch: 30}},
			Topics:  map[string]*meta.Topic{"rep": {Name: "rep", ID: "rep-id", Partitions: 1}},
			Parts:   map[string][]meta.Partition{"rep-id": {{State: st, ModRevision: 7}}},
		}
	}
	var attached *replica.Replica
	host := func(replica.TP) (replica.Hosted, bool) {
		return replica.Hosted{Log: l, MinISR: 2, Attach: func(r *replica.Replica) { attached = r }}, true
	}
	st := meta.PartitionState{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: local, LeaderEpoch: 3, PartitionEpoch: 5,
		ElectedBroker: local, ElectedBrokerEpoch: oldEpoch}
	if !st.LedByEarlierIncarnation(local, newEpoch) || st.LedByEarlierIncarnation(local, oldEpoch) || st.LedByEarlierIncarnation(2, 20) {
		t.Fatalf("LedByEarlierIncarnation wrong for %s", st)
	}
	mgr.Sync(view(st), host)
	if attached == nil {
		t.Fatal("the replica was not attached")
	}
	if e, ok := attached.Leading(); ok {
		t.Fatalf("leads at epoch %d under the election of its previous incarnation (broker epoch %d, now %d)", e, oldEpoch, newEpoch)
	}
	// An unknown elected epoch (a state written before the field) is
	// not refused.
	unknown := st.Clone()
	unknown.ElectedBroker, unknown.ElectedBrokerEpoch = 0, 0
	if unknown.LedByEarlierIncarnation(local, newEpoch) {
		t.Fatal("a state without an elected epoch counted as another incarnation's")
	}
	// The controller's new election of this incarnation.
	re := st.Clone()
	re.LeaderEpoch, re.PartitionEpoch, re.ElectedBrokerEpoch = 4, 6, newEpoch
	mgr.Sync(view(re), host)
	if e, ok := attached.Leading(); !ok || e != 4 {
		t.Fatalf("after its new election: leading %v at epoch %d, want epoch 4", ok, e)
	}
}
