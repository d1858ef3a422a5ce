package replica

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetcher is one replica fetcher: it fetches, for the partitions this
// broker follows whose leader is one source broker, with Kafka's Fetch as
// a follower (replica id, current leader epoch, last fetched epoch;
// Kafka's ReplicaFetcherThread / AbstractFetcherThread). A source broker
// has num.replica.fetchers of them.
type fetcher struct {
	m   *Manager
	key fetcherKey

	mu    sync.Mutex
	parts map[*Replica]struct{}
	wake  chan struct{}

	ctx    context.Context
	cancel context.CancelFunc
}

func newFetcher(m *Manager, key fetcherKey) *fetcher {
	ctx, cancel := context.WithCancel(m.ctx)
	return &fetcher{m: m, key: key, parts: map[*Replica]struct{}{}, wake: make(chan struct{}, 1), ctx: ctx, cancel: cancel}
}

func (f *fetcher) start() {
	f.m.wg.Add(1)
	go f.run()
}

// stop ends the fetcher's goroutine (the Manager's WaitGroup waits for it).
func (f *fetcher) stop() { f.cancel() }

func (f *fetcher) add(r *Replica) {
	f.mu.Lock()
	f.parts[r] = struct{}{}
	f.mu.Unlock()
	f.wakeup()
}

// remove drops r and returns how many partitions are left.
func (f *fetcher) remove(r *Replica) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.parts, r)
	return len(f.parts)
}

func (f *fetcher) wakeup() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// position is what one partition asks for in a fetch.
type position struct {
	r     *Replica
	epoch int32 // current leader epoch sent
	part  kmsg.FetchRequestTopicPartition
	// noWait: an fsync of this partition is outstanding (PlanFetch).
	noWait bool
}

func (f *fetcher) run() {
	defer f.m.wg.Done()
	log := f.m.logger.With("source", f.key.source, "fetcher", f.key.index)
	var conn Conn
	// syncWait bounds how long the next fetch waits for partitions whose
	// own fsync is outstanding (zero: not waiting yet).
	var syncWait time.Time
	for f.ctx.Err() == nil {
		req, pos, next, syncing := f.build()
		if len(pos) == 0 {
			f.sleep(next)
			continue
		}
		if syncing {
			// Some partitions wait for their own fsync (under
			// strata.durable.acks a follower reports only what it
			// fsynced). A fetch sent now would leave them out and
			// long-poll up to replica.fetch.wait.max.ms on the others,
			// holding back their report, the leader's high watermark
			// and every acks=all produce waiting on it. Kafka's follower
			// fetches again as soon as it appended, with its new log end
			// (AbstractFetcherThread: the next doWork right after
			// processFetchRequest); Strata's as soon as the fsync is done
			// (the log's hook wakes this fetcher: Manager.durableHook).
			// A slower fsync than replica.fetch.wait.max.ms does not hold
			// the other partitions back longer.
			now := time.Now()
			if syncWait.IsZero() {
				syncWait = now.Add(f.m.cfg.FetchWaitMax)
			}
			if now.Before(syncWait) {
				f.sleep(syncWait)
				continue
			}
		}
		syncWait = time.Time{}
		if conn == nil {
			c, err := f.m.cfg.Dialer.Dial(f.ctx, f.key.source, f.key.index)
			if err != nil {
				log.Warn("cannot reach the leader", "err", err)
				f.sleep(time.Now().Add(f.m.cfg.FetchBackoff))
				continue
			}
			conn = c
		}
		ctx, cancel := context.WithTimeout(f.ctx, f.m.cfg.FetchWaitMax+30*time.Second)
		resp, err := conn.Request(ctx, req)
		cancel()
		if err != nil {
			if f.ctx.Err() != nil {
				return
			}
			log.Warn("fetch failed", "err", err)
			for _, p := range pos {
				p.r.unpipeline()
			}
			f.m.cfg.Dialer.Forget(f.key.source, f.key.index)
			conn = nil
			f.sleep(time.Now().Add(f.m.cfg.FetchBackoff))
			continue
		}
		f.handle(conn, pos, resp.(*kmsg.FetchResponse))
	}
}

// sleep waits for a wake-up, the time next (zero: none) or the end.
func (f *fetcher) sleep(next time.Time) {
	var tc <-chan time.Time
	if !next.IsZero() {
		t := time.NewTimer(max(time.Until(next), 0))
		defer t.Stop()
		tc = t.C
	}
	select {
	case <-f.wake:
	case <-tc:
	case <-f.ctx.Done():
	}
}

// build makes the Fetch for every partition ready to fetch; next is the
// earliest time a backed-off partition becomes ready; syncing reports
// partitions left out until their own fsync completes.
func (f *fetcher) build() (req *kmsg.FetchRequest, pos []position, next time.Time, syncing bool) {
	f.mu.Lock()
	rs := make([]*Replica, 0, len(f.parts))
	for r := range f.parts {
		rs = append(rs, r)
	}
	f.mu.Unlock()
	sort.Slice(rs, func(i, j int) bool {
		if rs[i].tp.Topic != rs[j].tp.Topic {
			return rs[i].tp.Topic < rs[j].tp.Topic
		}
		return rs[i].tp.Partition < rs[j].tp.Partition
	})
	now := time.Now()
	noWait := false
	for _, r := range rs {
		p, st, at := r.fetchPosition(f, now)
		switch st {
		case fetchReady:
			pos = append(pos, p)
			noWait = noWait || p.noWait
		case fetchSyncing:
			syncing = true
		case fetchBackoff, fetchThrottled:
			if next.IsZero() || at.Before(next) {
				next = at
			}
		}
	}
	// The version is negotiated by the connection (kgo): up to v12 the
	// top-level replica id and topic names are sent, from v13 topic ids
	// (KIP-516), from v15 ReplicaState with this broker's epoch (KIP-903),
	// which the leader checks against the registration it knows.
	req = kmsg.NewPtrFetchRequest()
	req.ReplicaID = f.m.cfg.Local
	req.ReplicaState.ID = f.m.cfg.Local
	req.ReplicaState.Epoch = f.m.cfg.BrokerEpoch()
	req.MaxWaitMillis = int32(f.m.cfg.FetchWaitMax.Milliseconds())
	if noWait {
		req.MaxWaitMillis = 0 // PlanFetch: an fsync to report is outstanding
	}
	req.MinBytes = f.m.cfg.FetchMinBytes
	req.MaxBytes = f.m.cfg.FetchResponseMaxBytes
	req.SessionID, req.SessionEpoch = 0, -1 // sessionless full fetches
	for _, p := range pos {
		if n := len(req.Topics); n == 0 || req.Topics[n-1].Topic != p.r.tp.Topic {
			t := kmsg.NewFetchRequestTopic()
			t.Topic = p.r.tp.Topic
			t.TopicID = p.r.log.TopicID()
			req.Topics = append(req.Topics, t)
		}
		t := &req.Topics[len(req.Topics)-1]
		t.Partitions = append(t.Partitions, p.part)
	}
	return req, pos, next, syncing
}

// fetchState says whether a partition is in the next fetch.
type fetchState int

const (
	fetchReady     fetchState = iota
	fetchNot                  // not following this source, or fenced
	fetchBackoff              // backing off until a time
	fetchSyncing              // waiting for its own fsync
	fetchThrottled            // follower.replication.throttled.rate exceeded
)

// fetchPosition returns what r asks for, or why not now: not following
// this fetcher's source, fenced, backing off (ready again at at), or
// waiting for its own fsync (strata.durable.acks: a follower reports only
// what it fsynced; PlanFetch says how far it may fetch ahead of it).
func (r *Replica) fetchPosition(f *fetcher, now time.Time) (position, fetchState, time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fetcher != f || r.leader != nil || r.fenced || r.st.Leader != f.key.source {
		return position{}, fetchNot, time.Time{}
	}
	if now.Before(r.backoff) {
		return position{}, fetchBackoff, r.backoff
	}
	// Replication throttle, follower side (KIP-73; Kafka's
	// RemoteLeaderEndPoint.shouldFollowerThrottle): a partition named by
	// follower.replication.throttled.replicas for this broker is left out
	// of the fetch while follower.replication.throttled.rate is exceeded,
	// unless this replica is caught up with the leader's high watermark
	// (PartitionFetchState.isReplicaInSync). With nothing to fetch the
	// fetcher waits replica.fetch.backoff.ms (AbstractFetcherThread).
	if q := r.m.cfg.FollowerQuota; !r.caughtUp && q.IsThrottled(r.tp.Topic, r.tp.Partition) && q.Exceeded() {
		q.Skipped()
		return position{}, fetchThrottled, now.Add(r.m.cfg.FetchBackoff)
	}
	local := r.local()
	if min(local.Durable, local.End) > r.sentDurable {
		// An fsync completed since the last report: report it now, even
		// while later appends are still unsynced (the leader's high
		// watermark, and acks=all produces, wait for it).
		r.drained = false
	}
	plan := PlanFetch(local, r.m.cfg.Durable, r.pipelined, r.drained)
	if !plan.Ready {
		return position{}, fetchSyncing, time.Time{}
	}
	r.sentDurable = plan.Durable
	p := kmsg.NewFetchRequestTopicPartition()
	p.Partition = r.tp.Partition
	p.CurrentLeaderEpoch = r.st.LeaderEpoch
	p.FetchOffset = plan.Offset
	p.LastFetchedEpoch = r.log.LatestEpoch()
	p.LogStartOffset = local.Start
	p.PartitionMaxBytes = r.m.cfg.FetchMaxBytes
	if plan.Durable >= 0 {
		p.UnknownTags.Set(DurableEndTag, DurableEndValue(plan.Durable))
	}
	return position{r: r, epoch: r.st.LeaderEpoch, part: p, noWait: plan.NoWait}, fetchReady, time.Time{}
}

// handle applies a Fetch response.
func (f *fetcher) handle(conn Conn, pos []position, resp *kmsg.FetchResponse) {
	if resp.ErrorCode != 0 {
		f.m.logger.Warn("fetch refused", "source", f.key.source, "err", kerr.ErrorForCode(resp.ErrorCode))
		for _, p := range pos {
			p.r.backOff()
		}
		return
	}
	byTP := make(map[TP]*kmsg.FetchResponseTopicPartition, len(pos))
	names := map[[16]byte]string{} // v13+ answers name topics by id
	for _, p := range pos {
		names[p.r.log.TopicID()] = p.r.tp.Topic
	}
	for i := range resp.Topics {
		t := &resp.Topics[i]
		name := t.Topic
		if name == "" {
			name = names[t.TopicID]
		}
		for j := range t.Partitions {
			byTP[TP{Topic: name, Partition: t.Partitions[j].Partition}] = &t.Partitions[j]
		}
	}
	for _, p := range pos {
		rp := byTP[p.r.tp]
		if rp == nil {
			continue // not answered: asked again next round
		}
		if out := p.r.fetched(f, p, rp); out {
			f.resetOutOfRange(conn, p)
		}
	}
}

// unpipeline returns r to fetching from its fsynced end until the leader
// echoes DurableEndTag again (a new connection may reach another broker).
func (r *Replica) unpipeline() {
	r.mu.Lock()
	r.pipelined, r.drained, r.sentDurable = false, false, NoOffset
	r.mu.Unlock()
}

// backOff delays r's next fetch by replica.fetch.backoff.ms.
func (r *Replica) backOff() {
	r.mu.Lock()
	r.backoff = time.Now().Add(r.m.cfg.FetchBackoff)
	r.mu.Unlock()
}

// leaderBehindBackoff is the pause before a follower's retry number n
// (from 0) of a fetch its leader refused for not having applied the
// leader epoch the follower sent: replica.fetch.backoff.ms / 32, doubled
// at every retry up to replica.fetch.backoff.ms (31 ms, 62 ms, ... 1 s at
// the default), as a client's retry.backoff.ms grows to
// retry.backoff.max.ms (KIP-580).
func leaderBehindBackoff(backoff time.Duration, n int) time.Duration {
	const steps = 5
	if n >= steps {
		return backoff
	}
	return backoff >> (steps - n)
}

// fetched applies one partition of a Fetch response (Kafka's
// AbstractFetcherThread.processFetchRequest). It reports OFFSET_OUT_OF_RANGE
// for the caller to resolve with the leader's offsets.
func (r *Replica) fetched(f *fetcher, p position, rp *kmsg.FetchResponseTopicPartition) (outOfRange bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fetcher != f || r.leader != nil || r.st.LeaderEpoch != p.epoch || r.st.Leader != f.key.source {
		return false // the partition moved meanwhile
	}
	err := kerr.ErrorForCode(rp.ErrorCode)
	if err == nil {
		// A leader that echoes DurableEndTag counts the fsynced end this
		// follower reports apart from its fetch offset (PlanFetch).
		_, r.pipelined = DurableEndOf(&rp.UnknownTags)
		// A no-wait fetch answered without records: wait for the fsync,
		// then report it with a normal fetch.
		r.drained = p.noWait && len(rp.RecordBatches) == 0
	}
	switch {
	case err == nil:
	case errors.Is(err, kerr.OffsetOutOfRange):
		return true
	case errors.Is(err, kerr.FencedLeaderEpoch):
		// This broker's metadata is older than the leader's: wait for it
		// (AbstractFetcherThread.onPartitionFenced).
		r.m.logger.Info("fetch fenced: waiting for newer metadata", "partition", r.tp, "epoch", p.epoch)
		r.fenced = true
		return false
	case errors.Is(err, kerr.UnknownLeaderEpoch), errors.Is(err, kerr.NotLeaderForPartition):
		// The broker this replica's metadata names leader at p.epoch has
		// not applied that leadership yet (UNKNOWN_LEADER_EPOCH: it knows
		// an older epoch; NOT_LEADER_OR_FOLLOWER: it does not lead yet),
		// or it moved on and this broker's metadata will follow. Kafka's
		// AbstractFetcherThread delays such a partition by
		// replica.fetch.backoff.ms; after a leader change both brokers
		// learn the election from the same metadata within milliseconds,
		// and a whole backoff here held every acks=all produce of the
		// partition for a second after a controlled shutdown (the new
		// leader's ISR waits for this follower). So the retries start
		// short and double up to replica.fetch.backoff.ms
		// (leaderBehindBackoff); a success or a new state starts over.
		r.m.logger.Debug("fetch error", "partition", r.tp, "err", err, "retry", r.leaderBehind)
		r.backoff = time.Now().Add(leaderBehindBackoff(r.m.cfg.FetchBackoff, r.leaderBehind))
		r.leaderBehind++
		return false
	default:
		// Storage errors and the rest: retry after a backoff.
		r.m.logger.Debug("fetch error", "partition", r.tp, "err", err)
		r.backoff = time.Now().Add(r.m.cfg.FetchBackoff)
		return false
	}
	r.leaderBehind = 0
	if rp.DivergingEpoch.EndOffset >= 0 || rp.DivergingEpoch.Epoch >= 0 {
		// KIP-101/KIP-279 through the fetch (Fetch v12+): cut where the
		// histories diverge; the next fetch carries the new last epoch.
		tr := Truncate(EpochEnd{Epoch: rp.DivergingEpoch.Epoch, EndOffset: rp.DivergingEpoch.EndOffset}, r.log.LogEndOffset(), r.log.EndOffsetForEpoch)
		r.m.logger.Info("truncating at the diverging epoch", "partition", r.tp, "leader_epoch", rp.DivergingEpoch.Epoch,
			"leader_end", rp.DivergingEpoch.EndOffset, "to", tr.Offset, "complete", tr.Complete)
		r.noteTruncation(tr.Offset)
		if _, err := r.log.TruncateTo(tr.Offset); err != nil {
			r.m.logger.Error("truncate", "partition", r.tp, "offset", tr.Offset, "err", err)
			r.backoff = time.Now().Add(r.m.cfg.FetchBackoff)
		}
		return false
	}
	if len(rp.RecordBatches) > 0 {
		// Every throttled partition's bytes count, in sync or not
		// (ReplicaFetcherThread.processPartitionData).
		if q := r.m.cfg.FollowerQuota; q.IsThrottled(r.tp.Topic, r.tp.Partition) {
			q.Record(int64(len(rp.RecordBatches)))
		}
		if _, err := r.log.AppendAsFollower(rp.RecordBatches); err != nil {
			r.m.logger.Warn("append fetched batches", "partition", r.tp, "offset", p.part.FetchOffset, "err", err)
			r.backoff = time.Now().Add(r.m.cfg.FetchBackoff)
			return false
		}
	}
	r.leaderHW = rp.HighWatermark
	local := r.local()
	r.caughtUp = local.End >= r.leaderHW
	hw := FollowerHighWatermark(r.leaderHW, local, r.m.cfg.Durable)
	// The leader's log start offset (retention, DeleteRecords) moves this
	// replica's, never past what this replica knows committed.
	if ls := min(rp.LogStartOffset, hw); ls > local.Start {
		if _, err := r.log.DeleteRecords(ls); err != nil {
			r.m.logger.Warn("follow the leader's log start", "partition", r.tp, "offset", ls, "err", err)
		}
	}
	r.log.SetHighWatermark(hw, nil)
	return false
}

// resetOutOfRange resolves OFFSET_OUT_OF_RANGE with the leader's start and
// end offsets (AbstractFetcherThread.fetchOffsetAndTruncate).
func (f *fetcher) resetOutOfRange(conn Conn, p position) {
	r := p.r
	ctx, cancel := context.WithTimeout(f.ctx, 30*time.Second)
	defer cancel()
	start, end, err := listOffsets(ctx, conn, f.m.cfg.Local, r.tp, p.epoch)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		f.m.logger.Warn("offsets of the leader", "partition", r.tp, "err", err)
		r.backoff = time.Now().Add(f.m.cfg.FetchBackoff)
		return
	}
	if r.fetcher != f || r.leader != nil || r.st.LeaderEpoch != p.epoch {
		return
	}
	reset := OutOfRange(r.log.LogEndOffset(), start, end)
	f.m.logger.Warn("fetch offset out of range", "partition", r.tp, "offset", p.part.FetchOffset, "leader_start", start, "leader_end", end, "truncate_to", reset.TruncateTo, "start_at", reset.StartAt)
	switch {
	case reset.TruncateTo >= 0:
		r.noteTruncation(reset.TruncateTo)
		_, err = r.log.TruncateTo(reset.TruncateTo)
	case reset.StartAt >= 0:
		err = r.log.TruncateFullyAndStartAt(reset.StartAt)
	}
	if err != nil {
		f.m.logger.Error("reset after out of range", "partition", r.tp, "err", err)
		r.backoff = time.Now().Add(f.m.cfg.FetchBackoff)
	}
}

// listOffsets asks the leader for its log start and end offsets as a
// replica (ListOffsets with this broker's replica id: the latest offset is
// the log end, not the high watermark).
func listOffsets(ctx context.Context, conn Conn, local int32, tp TP, epoch int32) (start, end int64, err error) {
	ask := func(ts int64) (int64, error) {
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID = local
		t := kmsg.NewListOffsetsRequestTopic()
		t.Topic = tp.Topic
		p := kmsg.NewListOffsetsRequestTopicPartition()
		p.Partition, p.CurrentLeaderEpoch, p.Timestamp = tp.Partition, epoch, ts
		t.Partitions = append(t.Partitions, p)
		req.Topics = append(req.Topics, t)
		resp, err := conn.Request(ctx, req)
		if err != nil {
			return -1, err
		}
		lr := resp.(*kmsg.ListOffsetsResponse)
		if len(lr.Topics) != 1 || len(lr.Topics[0].Partitions) != 1 {
			return -1, fmt.Errorf("list offsets of %s: malformed answer", tp)
		}
		rp := lr.Topics[0].Partitions[0]
		if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
			return -1, fmt.Errorf("list offsets of %s: %w", tp, err)
		}
		return rp.Offset, nil
	}
	if start, err = ask(-2); err != nil {
		return
	}
	end, err = ask(-1)
	return
}
