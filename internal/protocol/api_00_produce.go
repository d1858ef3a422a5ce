package protocol

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/strata-io/strata/internal/broker"
	"github.com/strata-io/strata/internal/parallel"
	"github.com/strata-io/strata/internal/record"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxProduceWorkers bounds the goroutines one Produce request uses to
// append its partitions in parallel.
const maxProduceWorkers = 8

// handleProduce (key 0, v0-11) appends record batches. v0-2 carry legacy
// message sets (magic 0/1), stored up-converted to one v2 batch each; like
// Kafka, a v2 batch in a v0-2 request is accepted as is. acks=0 gets no
// response; acks=1 is answered once the bytes are written; acks=-1 once
// they are fsynced (group commit). Partitions are appended in parallel, by at
// most maxProduceWorkers goroutines.
func (s *Server) handleProduce(ctx context.Context, c *conn, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	var common error
	switch {
	case req.Acks != 0 && req.Acks != 1 && req.Acks != -1:
		common = fmt.Errorf("acks=%d: %w", req.Acks, kerr.InvalidRequiredAcks)
	case req.TransactionID != nil && s.cfg.Txn == nil:
		common = fmt.Errorf("transactions are not enabled: %w", kerr.TransactionalIDAuthorizationFailed)
	case req.TransactionID == nil && hasTransactional(req):
		// Kafka: transactional records need a transactional id.
		common = fmt.Errorf("transactional records without a transactional id: %w", kerr.TransactionalIDAuthorizationFailed)
	}
	type job struct {
		topic string
		rp    *kmsg.ProduceRequestTopicPartition
		sp    *kmsg.ProduceResponseTopicPartition
	}
	var jobs []job
	resp.Topics = make([]kmsg.ProduceResponseTopic, len(req.Topics))
	for i := range req.Topics {
		rt := &req.Topics[i]
		st := &resp.Topics[i]
		*st = kmsg.NewProduceResponseTopic()
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		for j := range rt.Partitions {
			sp := &st.Partitions[j]
			*sp = kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rt.Partitions[j].Partition
			if common != nil {
				s.fillProduceError(sp, req.Version, common, nil)
				continue
			}
			jobs = append(jobs, job{rt.Topic, &rt.Partitions[j], sp})
		}
	}
	// Partitions are appended by at most maxProduceWorkers goroutines per
	// request (the handler's own among them: one partition starts none),
	// whatever the number of partitions it names.
	var verified map[TxnPartition]error
	if req.TransactionID != nil && common == nil && len(jobs) > 1 {
		verified = s.verifyTxnPartitions(*req.TransactionID, req)
	}
	durable := make([]func(context.Context), len(jobs))
	parallel.ForEach(len(jobs), maxProduceWorkers, func(i int) error {
		durable[i] = s.producePartition(req, jobs[i].topic, *jobs[i].rp, jobs[i].sp, verified)
		return nil
	})
	durable = slices.DeleteFunc(durable, func(w func(context.Context)) bool { return w == nil })
	if req.Acks == 0 {
		return reply{none: true}, nil
	}
	s.produceLeaders(c, req.Version, resp)
	rep := reply{msg: resp}
	if len(durable) > 0 {
		// The answer waits for fsync in the connection's writer, so the next
		// request is appended meanwhile and shares the group commit.
		// A draining shutdown lets these waits finish (the logs are still
		// open); only a forced shutdown cuts them off.
		rep.wait = func() {
			wctx, cancel := s.hard, context.CancelFunc(func() {})
			if req.TimeoutMillis > 0 {
				wctx, cancel = context.WithTimeout(s.hard, time.Duration(req.TimeoutMillis)*time.Millisecond)
			}
			defer cancel()
			for _, w := range durable {
				w(wctx)
			}
		}
	}
	return rep, nil
}

// verifyTxnPartitions verifies together, with one call to the
// transaction's coordinator, every partition of a transactional produce
// whose producer has no transaction open there yet
// (broker.Partition.NeedsTxnVerification), as Kafka's
// ReplicaManager.appendRecords collects them for its
// AddPartitionsToTxnManager (KIP-890 part 1). Each partition's append
// takes its answer from the result; one not verified here is verified
// alone (producePartition).
func (s *Server) verifyTxnPartitions(txnID string, req *kmsg.ProduceRequest) map[TxnPartition]error {
	type producer struct {
		pid   int64
		epoch int16
	}
	need := map[producer][]TxnPartition{}
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			pid, epoch, err := transactionalProducer(rp.Records)
			if err != nil {
				continue // refused by its append
			}
			p, err := s.leaderPartition(rt.Topic, rp.Partition, -1)
			if err != nil || !p.NeedsTxnVerification(pid) {
				continue
			}
			k := producer{pid, epoch}
			need[k] = append(need[k], TxnPartition{Topic: rt.Topic, Partition: rp.Partition})
		}
	}
	if len(need) == 0 {
		return nil
	}
	out := map[TxnPartition]error{}
	for k, parts := range need {
		for i, err := range s.cfg.Txn.VerifyProduce(txnID, k.pid, k.epoch, parts) {
			out[parts[i]] = err
		}
	}
	return out
}

// producePartition appends one partition's records and fills its answer;
// verified holds the transaction verifications already done for the
// request (verifyTxnPartitions). For acks=-1 it returns the durability
// wait, which fills in an error if the fsync fails or times out.
func (s *Server) producePartition(req *kmsg.ProduceRequest, topic string, rp kmsg.ProduceRequestTopicPartition, sp *kmsg.ProduceResponseTopicPartition, verified map[TxnPartition]error) func(context.Context) {
	p, err := s.leaderPartition(topic, rp.Partition, -1)
	if err != nil {
		s.fillProduceError(sp, req.Version, err, nil)
		return nil
	}
	if len(rp.Records) == 0 {
		s.fillProduceError(sp, req.Version, fmt.Errorf("empty records: %w", kerr.InvalidRecord), nil)
		return nil
	}
	records := rp.Records
	if req.Version < 3 && record.IsLegacy(records) {
		if records, err = record.ConvertLegacy(records); err != nil {
			s.fillProduceError(sp, req.Version, err, nil)
			return nil
		}
	}
	pid, verify := int64(-1), (func() error)(nil)
	if req.TransactionID != nil {
		var epoch int16
		if pid, epoch, err = transactionalProducer(records); err != nil {
			s.fillProduceError(sp, req.Version, err, nil)
			return nil
		}
		txnID, tp := *req.TransactionID, TxnPartition{Topic: topic, Partition: rp.Partition}
		verify = func() error {
			if err, ok := verified[tp]; ok {
				return err
			}
			return s.cfg.Txn.VerifyProduce(txnID, pid, epoch, []TxnPartition{tp})[0]
		}
	}
	res, err := p.AppendProduce(records, req.Acks, pid, verify)
	if err != nil {
		s.fillProduceError(sp, req.Version, err, res.RecordErrors)
		switch errCode(err) {
		case kerr.UnknownServerError.Code:
			s.logger.Warn("produce failed", "topic", topic, "partition", rp.Partition, "err", err)
		case kerr.KafkaStorageError.Code:
			s.logStorageError(topic, rp.Partition, err)
		}
		return nil
	}
	s.metrics.topicBytesIn.WithLabelValues(topic).Add(float64(len(rp.Records)))
	sp.BaseOffset = res.BaseOffset
	sp.LogAppendTime = res.LogAppendTime
	sp.LogStartOffset = res.LogStartOffset
	if req.Acks != -1 {
		return nil
	}
	return func(ctx context.Context) {
		if err := p.WaitDurable(ctx, res); err != nil {
			s.fillProduceError(sp, req.Version, err, nil)
		}
	}
}

// storageErrorLogEvery bounds the log lines of KAFKA_STORAGE_ERROR
// answers (a full disk refuses every append).
const storageErrorLogEvery = 10 * time.Second

// logStorageError logs why a produce was answered KAFKA_STORAGE_ERROR (at
// most every storageErrorLogEvery): the client sees only the code (the
// message too from Produce v8), and the cause — the free-space reserve
// strata.log.min.free.bytes, a failed write — must be in the broker's log.
func (s *Server) logStorageError(topic string, partition int32, err error) {
	now := time.Now().UnixNano()
	last := s.storageErrLogged.Load()
	if now-last < int64(storageErrorLogEvery) || !s.storageErrLogged.CompareAndSwap(last, now) {
		return
	}
	s.logger.Warn("produce answered KAFKA_STORAGE_ERROR", "topic", topic, "partition", partition, "err", err,
		"next_log_in", storageErrorLogEvery)
}

// fillProduceError sets a partition's error, with per-record errors on v8+.
func (s *Server) fillProduceError(sp *kmsg.ProduceResponseTopicPartition, version int16, err error, recs []broker.RecordError) {
	sp.ErrorCode = errCode(err)
	if version >= 10 {
		sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = currentLeader(err)
	}
	sp.BaseOffset = -1
	sp.LogAppendTime = -1
	sp.LogStartOffset = -1
	if version >= 8 {
		sp.ErrorMessage = errMessage(err)
		for _, r := range recs {
			er := kmsg.NewProduceResponseTopicPartitionErrorRecord()
			er.RelativeOffset = r.Index
			msg := r.Message
			er.ErrorMessage = &msg
			sp.ErrorRecords = append(sp.ErrorRecords, er)
		}
	}
}

// produceLeaders adds the endpoints of the leaders named in
// NOT_LEADER_OR_FOLLOWER answers (KIP-951, Produce v10+), so clients go to
// the new leader without a metadata round trip.
func (s *Server) produceLeaders(c *conn, version int16, resp *kmsg.ProduceResponse) {
	if version < 10 || s.cfg.Cluster == nil {
		return
	}
	ids := map[int32]bool{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.CurrentLeader.LeaderID >= 0 {
				ids[p.CurrentLeader.LeaderID] = true
			}
		}
	}
	resp.Brokers = s.leaderEndpoints(c, ids)
}

// hasTransactional reports whether any partition's first batch is a
// transactional v2 batch.
func hasTransactional(req *kmsg.ProduceRequest) bool {
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			if b, ok := firstBatch(p.Records); ok && b.IsTransactional() {
				return true
			}
		}
	}
	return false
}

// firstBatch views the header of the first v2 batch of records.
func firstBatch(records []byte) (record.Batch, bool) {
	if len(records) < record.HeaderSize || record.Batch(records).Magic() != record.MagicV2 {
		return nil, false
	}
	return record.Batch(records), true
}

// transactionalProducer checks the batches of a produce with a
// transactional id (every batch a transactional data batch of one producer
// id and epoch) and returns that producer. The partition is then verified
// with the transaction's coordinator as KIP-890 part 1 does by default, at
// the first produce of the transaction to the partition only
// (broker.Partition.AppendProduce).
func transactionalProducer(records []byte) (int64, int16, error) {
	first, ok := firstBatch(records)
	if !ok || !first.IsTransactional() || first.IsControl() {
		return 0, 0, fmt.Errorf("a produce request with a transactional id must hold transactional record batches: %w", kerr.InvalidRecord)
	}
	pid, epoch := first.ProducerID(), first.ProducerEpoch()
	for rest := records; len(rest) >= record.HeaderSize; {
		b := record.Batch(rest)
		if b.Magic() != record.MagicV2 || !b.IsTransactional() || b.IsControl() || b.ProducerID() != pid || b.ProducerEpoch() != epoch {
			return 0, 0, fmt.Errorf("mixed batches in a transactional produce: %w", kerr.InvalidRecord)
		}
		n := b.Size()
		if n <= 0 || n > len(rest) {
			break // storage validation reports the malformed batch
		}
		rest = rest[n:]
	}
	return pid, epoch, nil
}
