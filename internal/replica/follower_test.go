package replica

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/internal/storage"
)

func history(end int64, ents ...storage.EpochEntry) EpochLookup {
	return func(epoch int32) (int32, int64) { return storage.EndOffsetFor(ents, epoch, end) }
}

func TestCheckLeaderEpoch(t *testing.T) {
	for _, tc := range []struct {
		req, cur int32
		want     error
	}{
		{-1, 5, nil}, {5, 5, nil}, {4, 5, kerr.FencedLeaderEpoch}, {6, 5, kerr.UnknownLeaderEpoch},
	} {
		err := CheckLeaderEpoch(tc.req, tc.cur)
		if (tc.want == nil) != (err == nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
			t.Errorf("CheckLeaderEpoch(%d, %d) = %v, want %v", tc.req, tc.cur, err, tc.want)
		}
	}
}

func TestDivergence(t *testing.T) {
	// Leader: epoch 1 from 0, epoch 3 from 10, log end 15, log start 2.
	leader := history(15, storage.EpochEntry{Epoch: 1, StartOffset: 0}, storage.EpochEntry{Epoch: 3, StartOffset: 10})
	for _, tc := range []struct {
		name      string
		lastEpoch int32
		offset    int64
		div       *EpochEnd
		err       error
	}{
		{"no epoch sent", -1, 7, nil, nil},
		{"same epoch, inside", 1, 8, nil, nil},
		{"same epoch, at its end", 1, 10, nil, nil},
		{"same epoch, past its end", 1, 12, &EpochEnd{1, 10}, nil},
		{"unknown smaller epoch", 2, 11, &EpochEnd{1, 10}, nil},
		{"latest epoch", 3, 15, nil, nil},
		{"epoch newer than the leader's", 4, 15, nil, kerr.OffsetOutOfRange},
		{"below log start", 1, 1, nil, kerr.OffsetOutOfRange},
	} {
		div, err := Divergence(tc.lastEpoch, tc.offset, 2, leader)
		if (tc.err == nil) != (err == nil) || (tc.err != nil && !errors.Is(err, tc.err)) {
			t.Errorf("%s: err %v, want %v", tc.name, err, tc.err)
		}
		if (div == nil) != (tc.div == nil) || (div != nil && *div != *tc.div) {
			t.Errorf("%s: divergence %v, want %v", tc.name, div, tc.div)
		}
	}
}

func TestTruncate(t *testing.T) {
	// Follower: epoch 1 from 0, epoch 2 from 5, epoch 4 from 9, end 12.
	local := history(12, storage.EpochEntry{Epoch: 1, StartOffset: 0}, storage.EpochEntry{Epoch: 2, StartOffset: 5}, storage.EpochEntry{Epoch: 4, StartOffset: 9})
	for _, tc := range []struct {
		name   string
		leader EpochEnd
		want   Truncation
	}{
		{"known epoch, leader's end lower", EpochEnd{2, 7}, Truncation{7, true}},
		{"known epoch, own end lower", EpochEnd{2, 20}, Truncation{9, true}},
		{"epoch unknown to the follower (KIP-279)", EpochEnd{3, 11}, Truncation{9, false}},
		// The follower wrote offsets 0-4 in epoch 1, the leader in epoch 0.
		{"older than every epoch known", EpochEnd{0, 3}, Truncation{0, true}},
		{"latest epoch, beyond own end", EpochEnd{4, 30}, Truncation{12, true}},
		{"leader cannot place it", EpochEnd{-1, -1}, Truncation{12, true}},
		{"offset without epoch", EpochEnd{-1, 4}, Truncation{4, true}},
	} {
		if got := Truncate(tc.leader, 12, local); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
	// A follower without any epoch history takes the leader's offset.
	if got := Truncate(EpochEnd{2, 6}, 12, history(12)); got != (Truncation{6, true}) {
		t.Errorf("no local history: %+v", got)
	}
}

func TestOutOfRange(t *testing.T) {
	for _, tc := range []struct {
		end, lStart, lEnd int64
		want              Reset
	}{
		{20, 0, 15, Reset{TruncateTo: 15, StartAt: -1, FetchOffset: 15}},
		{5, 10, 30, Reset{TruncateTo: -1, StartAt: 10, FetchOffset: 10}},
		{12, 10, 30, Reset{TruncateTo: -1, StartAt: -1, FetchOffset: 12}},
	} {
		if got := OutOfRange(tc.end, tc.lStart, tc.lEnd); got != tc.want {
			t.Errorf("OutOfRange(%d, %d, %d) = %+v, want %+v", tc.end, tc.lStart, tc.lEnd, got, tc.want)
		}
	}
}

func TestFollowerPositions(t *testing.T) {
	l := Local{End: 10, Durable: 7, Start: 2}
	if off, ok := FetchPosition(l, true); off != 7 || ok {
		t.Errorf("durable FetchPosition = %d %v", off, ok)
	}
	if off, ok := FetchPosition(l, false); off != 10 || !ok {
		t.Errorf("FetchPosition = %d %v", off, ok)
	}
	if hw := FollowerHighWatermark(9, l, true); hw != 7 {
		t.Errorf("durable follower hw %d", hw)
	}
	if hw := FollowerHighWatermark(9, l, false); hw != 9 {
		t.Errorf("follower hw %d", hw)
	}
	if hw := FollowerHighWatermark(0, l, false); hw != 2 {
		t.Errorf("follower hw below log start: %d", hw)
	}
}

func TestLeaderErrors(t *testing.T) {
	cfg := Config{Local: 1, MinISR: 2, LagTimeMaxMs: 1000, Durable: true}
	st := State{Leader: 1, LeaderEpoch: 3, PartitionEpoch: 7, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}}
	if _, err := NewLeader(Config{Local: 2}, st, nil, Local{}, 0, 0); !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Errorf("NewLeader on a non-leader: %v", err)
	}
	l, err := NewLeader(cfg, st, map[int32]Broker{2: {Epoch: 10}, 3: {Epoch: 11}}, Local{End: 5, Durable: 5}, 5, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.FollowerFetch(4, -1, 5, 0, Local{End: 5, Durable: 5}, 1); !errors.Is(err, kerr.UnknownLeaderEpoch) {
		t.Errorf("fetch from a non-replica: %v", err)
	}
	if _, err := l.FollowerFetch(2, 9, 5, 0, Local{End: 5, Durable: 5}, 1); !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Errorf("fetch with an old broker epoch: %v", err)
	}
	if _, _, err := l.Update(State{Leader: 2, LeaderEpoch: 4, PartitionEpoch: 8, Replicas: st.Replicas, ISR: st.ISR}, 2); !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Errorf("update to another leader: %v", err)
	}
	// An older partition epoch is ignored.
	if hw, ne, err := l.Update(State{Leader: 1, LeaderEpoch: 3, PartitionEpoch: 6, Replicas: st.Replicas, ISR: []int32{1}}, 2); hw || ne || err != nil || len(l.State().ISR) != 3 {
		t.Errorf("stale update applied: %v %v %v %v", hw, ne, err, l.State().ISR)
	}
}
