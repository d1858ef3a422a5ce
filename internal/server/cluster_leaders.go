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
func (a clusterAPI) ListReassignments(parts map[string][]int32) []protocol.Reassigning {
	res := a.c.admin.ListReassignments(parts)
	out := make([]protocol.Reassigning, len(res))
	for i, r := range res {
		out[i] = protocol.Reassigning{Topic: r.Topic, Partition: r.Partition, Replicas: r.Replicas, Adding: r.Adding, Removing: r.Removing}
	}
	return out
}
