package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/broker"
	"github.com/strata-io/strata/internal/group"
	"github.com/strata-io/strata/internal/meta"
	"github.com/strata-io/strata/internal/replica"
	"github.com/strata-io/strata/internal/storage"
	"github.com/strata-io/strata/internal/txn"
)

// This file makes the group and transaction coordinators cluster
// citizens (docs/cluster.md "Coordinators"): the coordinator of a group or
// transactional id is the leader of its __consumer_offsets /
// __transaction_state partition, so this broker loads a partition's state
// when it becomes its leader and unloads it when it stops leading (Kafka's
// GroupCoordinator / TransactionCoordinator onElection and onResignation);
// transaction markers go to partition leaders on other brokers as
// WriteTxnMarkers (Kafka's TransactionMarkerChannelManager), and a
// transactional produce to a partition led here is verified with the
// transaction's coordinator wherever it is (AddPartitionsToTxn v4
// VerifyOnly, KIP-890 part 1).

// Inter-broker connection slots of the coordinators on replica.KgoDialer
// (the replica fetchers use 0 and up).
const (
	connMarkers = -1 // WriteTxnMarkers
	connVerify  = -2 // AddPartitionsToTxn v4 VerifyOnly, TxnOffsetCommit checks
)

// markerRetryBudget bounds one WriteMarkers call's retries of retriable
// failures (a leader moving, not enough replicas), which keeps EndTxn,
// whose first attempt at the markers runs before it is answered here,
// answered; after it the transaction stays PrepareCommit/PrepareAbort and
// the transaction coordinator tries again every second
// (txn.Config.MarkerRetryInterval), without a bound, until the markers are
// written, the partitions deleted or the coordinator unloaded, as Kafka's
// TransactionMarkerChannelManager retries.
const markerRetryBudget = 10 * time.Second

// markerRetryBackoff is the pause between marker retries when no metadata
// change wakes them first (Kafka's retry.backoff.ms default).
const markerRetryBackoff = 100 * time.Millisecond

// coordinatorRun is the cluster side of the coordinators: the loop that
// follows leadership and the inter-broker connections. Owned by the
// Server (stopCoordinators).
type coordinatorRun struct {
	dialer *replica.KgoDialer
	stop   context.CancelFunc
	done   chan struct{}
	// txnEpochs is the coordinator epoch each loaded __transaction_state
	// partition was loaded at (only the follow loop touches it).
	txnEpochs map[int32]int32
	// verify batches produce verifications per coordinator broker.
	verify *verifyBatcher
}

// startCoordinators starts following the leadership of the coordinator
// partitions (a node in a cluster only).
func (s *Server) startCoordinators() {
	if s.cluster == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.coord.stop, s.coord.done, s.coord.txnEpochs = cancel, make(chan struct{}), map[int32]int32{}
	go s.followCoordinators(ctx)
}

// newCoordinatorDialer builds the inter-broker connections of the
// coordinators (before the coordinators, which use them).
func (s *Server) newCoordinatorDialer() {
	if s.cluster == nil {
		return
	}
	s.coord = &coordinatorRun{dialer: &replica.KgoDialer{
		Resolve: s.peerAddr,
		Opts:    append([]kgo.Opt{kgo.ClientID(fmt.Sprintf("strata-coordinator-%d", s.broker.NodeID()))}, s.interBrokerOpts()...),
	}, verify: newVerifyBatcher()}
	if err := s.reg.Register(s.coord.verify); err != nil {
		s.logger.Warn("transaction verification metrics not registered", "err", err)
	}
}

// stopCoordinators stops the leadership loop (before the cluster cache
// stops).
func (s *Server) stopCoordinators() {
	if s.coord != nil && s.coord.stop != nil {
		s.coord.stop()
		<-s.coord.done
		s.coord.stop = nil
	}
}

// closeCoordinatorDialer closes the inter-broker connections (after the
// coordinators stopped using them).
func (s *Server) closeCoordinatorDialer() {
	if s.coord != nil {
		s.coord.dialer.Close()
	}
}

// peerAddr is broker id's address on the inter-broker listener.
func (s *Server) peerAddr(id int32) (string, bool) {
	b := s.cluster.cache.View().Brokers[id]
	if b == nil {
		return "", false
	}
	e, ok := b.Listener(s.ib.Listener.Name)
	if !ok {
		return "", false
	}
	return fmt.Sprintf("%s:%d", e.Host, e.Port), true
}

// peerRequest sends req to broker id on connection slot conn; a failed
// connection is dropped so the next request dials again.
func (s *Server) peerRequest(ctx context.Context, id int32, conn int, req kmsg.Request) (kmsg.Response, error) {
	c, err := s.coord.dialer.Dial(ctx, id, conn)
	if err != nil {
		return nil, err
	}
	resp, err := c.Request(ctx, req)
	if err != nil {
		s.coord.dialer.Forget(id, conn)
		return nil, fmt.Errorf("broker %d: %w", id, err)
	}
	return resp, nil
}

// followCoordinators loads and unloads coordinator partitions as this
// broker's leadership of them changes, level-triggered on the metadata
// view once the local replicas reflect it.
func (s *Server) followCoordinators(ctx context.Context) {
	defer close(s.coord.done)
	c := s.cluster
	for {
		v := c.cache.View()
		ch := c.cache.Changed()
		if err := c.waitAppliedRev(ctx, v.Rev); err != nil {
			return
		}
		var again <-chan time.Time
		switch s.syncCoordinators(ctx, v) {
		case retryLater:
			again = time.After(time.Second)
		case retrySoon:
			again = time.After(uncommittedRetry)
		}
		select {
		case <-ctx.Done():
			return
		case <-ch:
		case <-again:
		}
	}
}

// When syncCoordinators wants to be called again without a metadata change.
type coordRetry int

const (
	retryNone  coordRetry = iota
	retryLater            // a load failed: in a second
	retrySoon             // a partition's log is not committed to its end yet (wins over retryLater)
)

// uncommittedRetry is how often a coordinator partition whose log is not
// committed to its end yet is tried again: its high watermark reaches the
// end as soon as the followers fetch (a replica fetch round), and
// coordinator failover waits on it.
const uncommittedRetry = 50 * time.Millisecond

// syncCoordinators makes the coordinators serve exactly the coordinator
// partitions this broker leads in v; it reports whether something is
// left to be tried again, and when. A partition whose log holds records
// past its high watermark is loaded only once they are committed (the
// coordinators serve no uncommitted state: group.loadCommitWait).
func (s *Server) syncCoordinators(ctx context.Context, v *meta.View) (retry coordRetry) {
	failed := func(what string, p int32, err error) {
		if errors.Is(err, storage.ErrUncommitted) {
			s.logger.Debug(what+": waiting for the partition's high watermark", "partition", p, "err", err)
			retry = max(retry, retrySoon)
			return
		}
		s.logger.Warn(what, "partition", p, "err", err)
		retry = max(retry, retryLater)
	}
	me := s.broker.NodeID()
	leads := func(topic string, n int32) map[int32]int32 {
		t := v.Topics[topic]
		if t == nil || t.Deleting {
			return nil
		}
		if t.Partitions != n {
			s.logger.Error("coordinator topic partition count differs from this broker's setting; coordinating none of it",
				"topic", topic, "partitions", t.Partitions, "setting", n)
			return nil
		}
		out := map[int32]int32{}
		for p := int32(0); p < n; p++ {
			_, part, ok := v.Partition(topic, p)
			if !ok || part.State.Leader != me || part.State.LedByEarlierIncarnation(me, s.BrokerEpoch()) {
				continue // not led here, or not yet: elected as this broker's previous incarnation
			}
			if _, err := s.broker.Partition(topic, p); err != nil {
				continue // not created here yet: the next view
			}
			out[p] = part.State.LeaderEpoch
		}
		return out
	}
	if g := s.group; g != nil {
		n := s.groupPartitions
		led := leads(offsetsTopic, n)
		for p := int32(0); p < n; p++ {
			if _, ok := led[p]; !ok {
				g.UnloadPartition(p)
			}
		}
		for p := range led {
			if g.Owns(p) {
				continue
			}
			if err := g.LoadPartition(ctx, p); err != nil {
				failed("load consumer groups", p, err)
			}
		}
	}
	if t := s.txn; t != nil {
		n := s.txnPartitions
		led := leads(transactionTopic, n)
		for p := int32(0); p < n; p++ {
			epoch, ok := led[p]
			if loaded, was := s.coord.txnEpochs[p]; was && (!ok || loaded != epoch) {
				// A new leader epoch is a new coordinator epoch: markers
				// of the old one are fenced (Kafka reloads on election).
				t.UnloadPartition(p)
				delete(s.coord.txnEpochs, p)
			}
		}
		for p, epoch := range led {
			if _, ok := s.coord.txnEpochs[p]; ok {
				continue
			}
			if err := t.LoadPartition(ctx, p, epoch); err != nil {
				failed("load transaction state", p, err)
				continue
			}
			s.coord.txnEpochs[p] = epoch
		}
	}
	return retry
}

// leadsFunc reports, in a cluster, whether this broker leads a partition
// of topic in the current metadata (nil on a single node).
func (s *Server) leadsFunc(topic string) func(p int32) bool {
	if s.cluster == nil {
		return nil
	}
	return func(p int32) bool {
		_, part, ok := s.cluster.cache.View().Partition(topic, p)
		return ok && part.State.Leader == s.broker.NodeID()
	}
}

// waitAppliedRev waits until the local replicas reflect revision rev.
func (c *cluster) waitAppliedRev(ctx context.Context, rev int64) error {
	for {
		c.appliedMu.Lock()
		ch := c.appliedCh
		c.appliedMu.Unlock()
		if c.applied.Load() >= rev {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// markerResult is the outcome of one partition's marker.
type markerResult struct {
	p   *broker.Partition
	off int64
	err error
}

// writeLocalMarkers appends a COMMIT/ABORT marker to every partition of
// parts this broker leads and waits until they are acknowledged (one group
// commit or replication round covers them all); markers on
// __consumer_offsets then complete the group's pending transactional
// offsets. It returns each partition's error (nil: written). This is
// Kafka's ReplicaManager.appendRecords with origin Coordinator as
// KafkaApis.handleWriteTxnMarkersRequest runs it.
func (s *Server) writeLocalMarkers(ctx context.Context, pid int64, epoch int16, coordinatorEpoch int32, commit bool, parts []txn.TopicPartition) []error {
	out := make([]error, len(parts))
	res := make([]markerResult, len(parts))
	for i, tp := range parts {
		p, err := s.broker.Partition(tp.Topic, tp.Partition)
		if err == nil && s.cluster != nil {
			if _, part, ok := s.cluster.cache.View().Partition(tp.Topic, tp.Partition); ok && part.State.Leader != s.broker.NodeID() && p.Replica() == nil {
				err = fmt.Errorf("%s-%d is led by broker %d: %w", tp.Topic, tp.Partition, part.State.Leader, kerr.NotLeaderForPartition)
			}
		}
		if err != nil {
			res[i].err = err
			continue
		}
		off, err := p.AppendMarker(pid, epoch, coordinatorEpoch, commit)
		res[i] = markerResult{p: p, off: off, err: err}
	}
	for i, r := range res {
		if r.err == nil {
			// Fsynced whatever strata.durable.acks says: the transaction
			// state records the markers as written once this returns.
			r.err = r.p.WaitSynced(ctx, storage.AppendResult{LastOffset: r.off})
			if r.err == nil && r.p.Topic == offsetsTopic && s.group != nil {
				s.group.CompleteTxn(r.p.Index, pid, commit)
			}
		}
		if r.err != nil {
			out[i] = fmt.Errorf("marker for %s-%d: %w", parts[i].Topic, parts[i].Partition, r.err)
		}
	}
	return out
}

// markerSuperseded reports whether a marker was refused because a newer
// producer epoch or coordinator epoch was seen: the transaction was ended
// by a later coordinator or fenced, so the marker is dropped (Kafka's
// TransactionMarkerRequestCompletionHandler).
func markerSuperseded(err error) bool {
	return errors.Is(err, kerr.InvalidProducerEpoch) || errors.Is(err, kerr.TransactionCoordinatorFenced)
}

// markerRetriable reports whether a marker failure is retried, at the
// partition's leader of the moment (Kafka's
// TransactionMarkerRequestCompletionHandler: UNKNOWN_TOPIC_OR_PARTITION,
// NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS(_AFTER_APPEND),
// REQUEST_TIMED_OUT, KAFKA_STORAGE_ERROR re-enqueue the marker).
func markerRetriable(err error) bool {
	for _, e := range []*kerr.Error{kerr.UnknownTopicOrPartition, kerr.NotLeaderForPartition, kerr.NotEnoughReplicas,
		kerr.NotEnoughReplicasAfterAppend, kerr.RequestTimedOut, kerr.KafkaStorageError, kerr.LeaderNotAvailable} {
		if errors.Is(err, e) {
			return true
		}
	}
	return errors.Is(err, context.DeadlineExceeded)
}

// writeClusterMarkers writes a transaction's markers to the leaders of its
// partitions wherever they are: here directly, elsewhere with
// WriteTxnMarkers (key 27). A partition whose leader moved, or that has
// none yet, is retried at the leader the metadata names next; a partition
// deleted meanwhile is skipped (Kafka drops markers of partitions no
// longer in the metadata), and so is a marker superseded by a newer epoch.
func (s *Server) writeClusterMarkers(ctx context.Context, pid int64, epoch int16, coordinatorEpoch int32, commit bool, parts []txn.TopicPartition) error {
	me := s.broker.NodeID()
	deadline := time.Now().Add(markerRetryBudget)
	pending := parts
	var last error
	for {
		v := s.cluster.cache.View()
		changed := s.cluster.cache.Changed()
		var local, retry []txn.TopicPartition
		remote := map[int32][]txn.TopicPartition{}
		for _, tp := range pending {
			t, part, ok := v.Partition(tp.Topic, tp.Partition)
			switch {
			case !ok || t.Deleting:
				// Deleted: nothing to mark.
			case part.State.Leader < 0 || !v.Live(part.State.Leader):
				retry = append(retry, tp)
				last = fmt.Errorf("%s-%d has no leader: %w", tp.Topic, tp.Partition, kerr.LeaderNotAvailable)
			case part.State.Leader == me:
				local = append(local, tp)
			default:
				remote[part.State.Leader] = append(remote[part.State.Leader], tp)
			}
		}
		var fatal []error
		settle := func(tp txn.TopicPartition, err error) {
			switch {
			case err == nil:
			case markerSuperseded(err):
				s.logger.Info("transaction marker superseded", "topic", tp.Topic, "partition", tp.Partition,
					"producer_id", pid, "epoch", epoch, "err", err)
			case markerRetriable(err):
				retry, last = append(retry, tp), err
			default:
				fatal = append(fatal, err)
			}
		}
		if len(local) > 0 {
			for i, err := range s.writeLocalMarkers(ctx, pid, epoch, coordinatorEpoch, commit, local) {
				settle(local[i], err)
			}
		}
		for leader, tps := range remote {
			errs := s.sendMarkers(ctx, leader, pid, epoch, coordinatorEpoch, commit, tps)
			for i, err := range errs {
				settle(tps[i], err)
			}
		}
		if len(fatal) > 0 {
			return errors.Join(fatal...)
		}
		if len(retry) == 0 {
			return nil
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return fmt.Errorf("markers of producer %d not written to %d partition(s), will retry: %w", pid, len(retry), last)
		}
		pending = retry
		select {
		case <-ctx.Done():
		case <-changed:
		case <-time.After(markerRetryBackoff):
		}
	}
}

// sendMarkers sends one WriteTxnMarkers request to broker leader and
// returns each partition's error; a request that failed as a whole fails
// every partition with a retriable error.
func (s *Server) sendMarkers(ctx context.Context, leader int32, pid int64, epoch int16, coordinatorEpoch int32, commit bool, tps []txn.TopicPartition) []error {
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch = pid, epoch, commit, coordinatorEpoch
	idx := map[txn.TopicPartition]int{}
	for i, tp := range tps {
		idx[tp] = i
		n := len(m.Topics)
		if n == 0 || m.Topics[n-1].Topic != tp.Topic {
			t := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
			t.Topic = tp.Topic
			m.Topics = append(m.Topics, t)
			n++
		}
		m.Topics[n-1].Partitions = append(m.Topics[n-1].Partitions, tp.Partition)
	}
	req.Markers = append(req.Markers, m)
	errs := make([]error, len(tps))
	rctx, cancel := context.WithTimeout(ctx, markerRetryBudget)
	defer cancel()
	kresp, err := s.peerRequest(rctx, leader, connMarkers, req)
	if err != nil {
		for i := range errs {
			errs[i] = fmt.Errorf("WriteTxnMarkers to broker %d: %v: %w", leader, err, kerr.RequestTimedOut)
		}
		return errs
	}
	answered := make([]bool, len(tps))
	for _, rm := range kresp.(*kmsg.WriteTxnMarkersResponse).Markers {
		for _, rt := range rm.Topics {
			for _, rp := range rt.Partitions {
				i, ok := idx[txn.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}]
				if !ok {
					continue
				}
				answered[i] = true
				if e := kerr.ErrorForCode(rp.ErrorCode); e != nil {
					errs[i] = fmt.Errorf("marker for %s-%d on broker %d: %w", rt.Topic, rp.Partition, leader, e)
				}
			}
		}
	}
	for i, ok := range answered {
		if !ok {
			errs[i] = fmt.Errorf("broker %d did not answer the marker for %s-%d: %w", leader, tps[i].Topic, tps[i].Partition, kerr.RequestTimedOut)
		}
	}
	return errs
}

// WriteTxnMarkers serves WriteTxnMarkers (key 27) from another broker's
// transaction coordinator: each marker is written to the partitions this
// broker leads, with per-partition errors (KafkaApis.handleWriteTxnMarkersRequest).
func (s *Server) WriteTxnMarkers(ctx context.Context, req *kmsg.WriteTxnMarkersRequest) *kmsg.WriteTxnMarkersResponse {
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	for _, m := range req.Markers {
		var tps []txn.TopicPartition
		for _, t := range m.Topics {
			for _, p := range t.Partitions {
				tps = append(tps, txn.TopicPartition{Topic: t.Topic, Partition: p})
			}
		}
		errs := s.writeLocalMarkers(ctx, m.ProducerID, m.ProducerEpoch, m.CoordinatorEpoch, m.Committed, tps)
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		i := 0
		for _, t := range m.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition, rp.ErrorCode = p, markerCode(errs[i])
				i++
				rt.Partitions = append(rt.Partitions, rp)
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	return resp
}

// markerCode is the Kafka code of a marker's error.
func markerCode(err error) int16 {
	if err == nil {
		return 0
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return kerr.RequestTimedOut.Code
	}
	return kerr.KafkaStorageError.Code
}

// verifyRemote verifies transactional writes to partitions parts, led
// here, with the coordinator of transactionalID on another broker: an
// AddPartitionsToTxn v4 with VerifyOnly (KIP-890 part 1, Kafka's
// AddPartitionsToTxnManager), batched per coordinator broker
// (verifyBatched). The coordinator's answers are the producer's; a
// coordinator that cannot be reached or is moving is the retriable
// NOT_ENOUGH_REPLICAS (verifyProduceError).
func (s *Server) verifyRemote(ctx context.Context, transactionalID string, pid int64, epoch int16, parts []txn.TopicPartition) []error {
	all := func(err error) []error {
		errs := make([]error, len(parts))
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	v := s.cluster.cache.View()
	t := v.Topics[transactionTopic]
	if t == nil || t.Partitions <= 0 {
		return all(fmt.Errorf("no %s yet: %w", transactionTopic, kerr.CoordinatorNotAvailable))
	}
	_, part, ok := v.Partition(transactionTopic, txn.PartitionFor(transactionalID, t.Partitions))
	if !ok || part.State.Leader < 0 || !v.Live(part.State.Leader) {
		return all(fmt.Errorf("the coordinator of %s has no leader: %w", transactionalID, kerr.CoordinatorNotAvailable))
	}
	if part.State.Leader == s.broker.NodeID() {
		// Ours, but not loaded yet (or just unloaded).
		return s.verifyLocal(transactionalID, pid, epoch, parts)
	}
	return s.verifyBatched(ctx, part.State.Leader, transactionalID, pid, epoch, parts)
}

// verifyLocal verifies parts with this broker's transaction coordinator.
func (s *Server) verifyLocal(transactionalID string, pid int64, epoch int16, parts []txn.TopicPartition) []error {
	errs := make([]error, len(parts))
	for i, tp := range parts {
		errs[i] = s.txn.VerifyProduce(transactionalID, pid, epoch, tp)
	}
	return errs
}

// verifyTransaction checks transactional writes to parts with the
// transaction's coordinator, here or on another broker: one error per
// partition.
func (s *Server) verifyTransaction(ctx context.Context, transactionalID string, pid int64, epoch int16, parts []txn.TopicPartition) []error {
	if s.txn == nil {
		errs := make([]error, len(parts))
		for i := range errs {
			errs[i] = fmt.Errorf("no transaction coordinator: %w", kerr.CoordinatorNotAvailable)
		}
		return errs
	}
	if s.cluster == nil || s.txn.Owns(txn.PartitionFor(transactionalID, s.txnPartitions)) {
		return s.verifyLocal(transactionalID, pid, epoch, parts)
	}
	return s.verifyRemote(ctx, transactionalID, pid, epoch, parts)
}

// groupPartitionOf is the __consumer_offsets partition of a group.
func (s *Server) groupPartitionOf(groupID string) int32 {
	return group.PartitionFor(groupID, s.groupPartitions)
}
