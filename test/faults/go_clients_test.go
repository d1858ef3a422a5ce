package faults

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// kafkaGoFaults is segmentio/kafka-go, in-process, as group members.
func kafkaGoFaults() faultClient {
	return faultClient{name: "kafka-go", member: kafkaGoMember}
}

// kafkaGoMember is a consumer group member built on kafka-go's
// ConsumerGroup (the group machinery under its Reader): each generation's
// assignment is printed, each assigned partition read by a partition
// Reader from the offset the generation hands over, and each record
// committed with the generation's OffsetCommit (Generation.CommitOffsets:
// the broker refuses a commit of an ended generation, where the Reader's
// queued commits would be sent again with the next one). kafka-go rejoins
// by itself when the coordinator goes away (Next).
func kafkaGoMember(op clientOp) role {
	return func(ctx context.Context, emit func(event)) error {
		brokers := strings.Split(op.Bootstrap, ",")
		cg, err := kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{
			ID: op.Group, Brokers: brokers, Topics: []string{op.Topic},
			SessionTimeout: 10 * time.Second, RebalanceTimeout: 10 * time.Second,
			HeartbeatInterval: 500 * time.Millisecond, JoinGroupBackoff: 250 * time.Millisecond,
			StartOffset: kafka.FirstOffset, Timeout: 5 * time.Second,
		})
		if err != nil {
			return fmt.Errorf("consumer group: %w", err)
		}
		emitErr := func(what string, err error) {
			code := int16(-1)
			var kerr kafka.Error
			if errors.As(err, &kerr) {
				code = int16(kerr)
			}
			emit(event{Event: "error", TS: nowMicros(), ErrorCode: code, Error: what + ": " + err.Error()})
		}
		var commitMu sync.Mutex // one OffsetCommit at a time on the generation's connection
		for ctx.Err() == nil {
			gen, err := cg.Next(ctx)
			if err != nil {
				if ctx.Err() == nil {
					emitErr("next generation", err)
				}
				continue
			}
			as := gen.Assignments[op.Topic]
			var ps []int32
			for _, a := range as {
				ps = append(ps, int32(a.ID))
			}
			slices.Sort(ps)
			emit(event{Event: "assigned", TS: nowMicros(), Partitions: ps})
			for _, a := range as {
				gen.Start(func(gctx context.Context) { // owned by gen: it waits for this to return
					r := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, Topic: op.Topic, Partition: a.ID,
						MaxWait: 200 * time.Millisecond, ReadBackoffMin: 100 * time.Millisecond, ReadBackoffMax: time.Second})
					defer r.Close()
					if err := r.SetOffset(a.Offset); err != nil {
						emitErr("set offset", err)
						return
					}
					for {
						m, err := r.ReadMessage(gctx)
						if err != nil {
							if gctx.Err() == nil {
								emitErr("read", err)
							}
							return
						}
						emit(event{Event: "record", TS: nowMicros(), Partition: int32(m.Partition), Offset: m.Offset, Value: string(m.Value)})
						commitMu.Lock()
						err = gen.CommitOffsets(map[string]map[int]int64{op.Topic: {m.Partition: m.Offset + 1}})
						commitMu.Unlock()
						if err != nil {
							emitErr("commit", err)
							continue
						}
						emit(event{Event: "committed", TS: nowMicros(), Partition: int32(m.Partition), Offset: m.Offset + 1})
					}
				})
			}
		}
		err = cg.Close() // leaves the group
		emit(event{Event: "closed", TS: nowMicros()})
		return err
	}
}

// kgoConsumerProtocolFaults is franz-go as members of a KIP-848 group
// (group.protocol=consumer: ConsumerGroupHeartbeat, the coordinator
// assigns the partitions).
func kgoConsumerProtocolFaults() faultClient {
	return faultClient{name: "franz-go-kip848", member: kgoConsumerProtocolMember, groupType: "consumer"}
}

// kgoClassicFaults is franz-go as members of a classic group (JoinGroup,
// SyncGroup, Heartbeat; its default cooperative-sticky balancer, the
// leader member assigns).
func kgoClassicFaults() faultClient {
	return faultClient{name: "franz-go", member: kgoClassicMember, groupType: "classic"}
}

// kgoClassicMember is kgoConsumerProtocolMember in a classic group.
func kgoClassicMember(op clientOp) role { return kgoMember(op, false) }

// kgoConsumerProtocolMember is a franz-go member of a consumer-protocol
// group that commits each record (CommitRecords, with its member id and
// epoch) after printing it; assignments are printed as they come
// (incremental under KIP-848). Rebalances wait until a poll's records are
// processed (BlockRebalanceOnPoll, AllowRebalance): without that, records
// of a partition the member lost while it committed them one by one are
// committed under its next member id and epoch, which the coordinator
// accepts (the commit is checked against the member's epoch, not its
// partitions, as Kafka's), rolling back the new owner's commits. franz-go
// rejoins by itself when the coordinator goes away, and CommitRecords
// retries retriable failures (the coordinator moving or loading).
func kgoConsumerProtocolMember(op clientOp) role { return kgoMember(op, true) }

// kgoMember is a franz-go group member of a consumer-protocol (KIP-848)
// or a classic group (see kgoConsumerProtocolMember).
func kgoMember(op clientOp, consumerProtocol bool) role {
	return func(ctx context.Context, emit func(event)) error {
		assigned := func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			ps := slices.Clone(m[op.Topic])
			slices.Sort(ps)
			emit(event{Event: "assigned", TS: nowMicros(), Partitions: ps})
		}
		revoked := func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			emit(event{Event: "revoked", TS: nowMicros(), Partitions: m[op.Topic]})
		}
		lost := func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			emit(event{Event: "lost", TS: nowMicros(), Partitions: m[op.Topic]})
		}
		opts := []kgo.Opt{}
		if f := os.Getenv("STRATA_FAULTS_KGO_LOG"); f != "" { // debugging: franz-go's debug log
			lf, err := os.OpenFile(f, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
			if err != nil {
				return err
			}
			defer lf.Close()
			prefix := fmt.Sprintf("[%p] ", lf) // one per member incarnation
			opts = append(opts, kgo.WithLogger(kgo.BasicLogger(lf, kgo.LogLevelDebug, func() string { return prefix })))
		}
		if consumerProtocol {
			opts = append(opts, kgo.ServerSideBalancer(), kgo.Balancers(kgo.RangeBalancer()))
		}
		cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers(strings.Split(op.Bootstrap, ",")...),
			kgo.ConsumerGroup(op.Group), kgo.ConsumeTopics(op.Topic),
			kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.OnPartitionsAssigned(assigned), kgo.OnPartitionsRevoked(revoked), kgo.OnPartitionsLost(lost),
			kgo.FetchMaxWait(200*time.Millisecond), kgo.RetryTimeout(60*time.Second),
			kgo.MetadataMinAge(250*time.Millisecond))...)
		if err != nil {
			return fmt.Errorf("client: %w", err)
		}
		emitErr := func(what string, err error) {
			code := int16(-1)
			var ke *kerr.Error
			if errors.As(err, &ke) {
				code = ke.Code
			}
			emit(event{Event: "error", TS: nowMicros(), ErrorCode: code, Error: what + ": " + err.Error()})
		}
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				break
			}
			fs.EachError(func(topic string, p int32, err error) {
				emitErr(fmt.Sprintf("fetch %s-%d", topic, p), err)
			})
			fs.EachRecord(func(r *kgo.Record) {
				emit(event{Event: "record", TS: nowMicros(), Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)})
				if err := cl.CommitRecords(ctx, r); err != nil {
					emitErr("commit", err)
					return
				}
				emit(event{Event: "committed", TS: nowMicros(), Partition: r.Partition, Offset: r.Offset + 1})
			})
			cl.AllowRebalance()
		}
		cl.AllowRebalance() // Close waits for it to leave the group (member epoch -1)
		cl.Close()
		emit(event{Event: "closed", TS: nowMicros()})
		return nil
	}
}
