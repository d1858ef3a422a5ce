package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/internal/controller"
	"github.com/strata-io/strata/internal/protocol"
)

// ElectLeaders runs ElectLeaders through the controller's Admin: each
// election is a compare-and-set on the partition's key, run by whichever
// broker received the request (as topic administration).
func (a clusterAPI) ElectLeaders(ctx context.Context, typ int8, parts map[string][]int32) ([]protocol.PartitionResult, error) {
	res, err := a.c.admin.ElectLeaders(ctx, typ, parts)
	out := make([]protocol.PartitionResult, len(res))
	for i, r := range res {
		out[i] = protocol.PartitionResult{Topic: r.Topic, Partition: r.Partition, Err: electionError(r.Err)}
	}
	return out, adminError(err)
}

// electionError maps an election's refusal to its Kafka error.
func electionError(err error) error {
	var ee *controller.ElectionError
	if errors.As(err, &ee) {
		return fmt.Errorf("%s: %w", ee.Message, kerr.ErrorForCode(ee.Code))
	}
	return adminError(err)
}

// rebalanceConfig is the automatic preferred-leader election's settings.
func (s *Server) rebalanceConfig() controller.RebalanceConfig {
	return controller.RebalanceConfig{
		Enable:     s.cfg.Bool("auto.leader.rebalance.enable"),
		Interval:   secondsDuration(s.cfg.Int64("leader.imbalance.check.interval.seconds")),
		Percentage: s.cfg.Int("leader.imbalance.per.broker.percentage"),
	}
}

func secondsDuration(n int64) time.Duration { return time.Duration(n) * time.Second }

// AlterReassignments runs AlterPartitionReassignments through the
// controller's Admin (each entry a compare-and-set; completion follows
// when the adding replicas joined the ISR: controller/reassign.go).
func (a clusterAPI) AlterReassignments(ctx context.Context, rs []protocol.Reassignment, allowRFChange bool) []protocol.PartitionResult {
	in := make([]controller.Reassignment, len(rs))
	for i, r := range rs {
		in[i] = controller.Reassignment{Topic: r.Topic, Partition: r.Partition, Target: r.Target}
	}
	res := a.c.admin.AlterReassignments(ctx, in, allowRFChange)
	out := make([]protocol.PartitionResult, len(res))
	for i, r := range res {
		out[i] = protocol.PartitionResult{Topic: r.Topic, Partition: r.Partition, Err: adminError(r.Err)}
	}
	return out
}

// ListReassignments lists the reassignments in progress.
func (a clusterAPI) ListReassignments(ctx context.Context, parts map[string][]int32) ([]protocol.Reassigning, error) {
	res, err := a.c.admin.ListReassignments(ctx, parts)
	if err != nil {
		return nil, adminError(err)
	}
	out := make([]protocol.Reassigning, len(res))
	for i, r := range res {
		out[i] = protocol.Reassigning{Topic: r.Topic, Partition: r.Partition, Replicas: r.Replicas, Adding: r.Adding, Removing: r.Removing}
	}
	return out, nil
}

// UnregisterBroker removes broker id's registration (KIP-631; Kafka's
// ReplicationControlManager.unregisterBroker): none is
// BROKER_ID_NOT_REGISTERED with Kafka's message; otherwise the
// registration is deleted by compare-and-set on its broker epoch (an
// UnregisterBrokerRecord) and the call returns once this broker's view no
// longer holds it. The controller then treats the broker as gone (out of
// every ISR, its leaderships moved). A broker stopped for good has no
// registration left in Strata (it lapses with its session lease, where
// Kafka keeps a fenced one until this request), so its id answers
// BROKER_ID_NOT_REGISTERED; a running broker unregistered this way stays
// out of the cluster until it restarts, as a Kafka broker whose
// heartbeats then fail with STALE_BROKER_EPOCH.
func (a clusterAPI) UnregisterBroker(ctx context.Context, id int32) error {
	// Decided on a view synced with the store (as Kafka's controller on
	// its committed state): a broker that registered through another
	// node's store member just before is found, and its current epoch.
	v, err := a.c.cache.Sync(ctx)
	if err != nil {
		return adminError(err)
	}
	b := v.Brokers[id]
	if b == nil {
		return fmt.Errorf("Broker ID %d is not currently registered: %w", id, kerr.BrokerIDNotRegistered)
	}
	if err := a.c.store.Unregister(ctx, id, b.Epoch); err != nil {
		return adminError(err)
	}
	for {
		ch := a.c.cache.Changed()
		if cur := a.c.cache.View().Brokers[id]; cur == nil || cur.Epoch != b.Epoch {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return adminError(ctx.Err())
		}
	}
}
