package console

import "context"

// ClusterSource tells the console what Kafka's Metadata answer does not:
// each broker's registration epoch and state, and the controller quorum.
// Brokers, racks, leaders, replicas and ISRs come from Metadata itself.
// The cluster packages implement it once brokers register with a
// controller; until then LocalCluster describes this one process.
type ClusterSource interface {
	ClusterState(ctx context.Context) (ClusterState, error)
}

// ClusterState is the cluster as its metadata layer knows it.
type ClusterState struct {
	// Mode says how the cluster is run, in a few words.
	Mode string
	// Brokers are known brokers by node id; a broker missing here but in
	// Metadata shows its epoch and state as unknown.
	Brokers map[int32]BrokerState
	// Controllers are the controller quorum's voters (empty: none).
	Controllers []int32
	// ActiveController is the quorum's leader (-1: none or unknown).
	ActiveController int32
}

// BrokerState is one broker's registration.
type BrokerState struct {
	// Epoch is the broker's registration epoch (-1: not registered).
	Epoch int64
	// State is "running", "fenced", "controlled shutdown" and so on.
	State string
}

// LocalCluster is a single broker without a controller quorum: it reports
// itself as running and, honestly, no registration epoch and no quorum.
type LocalCluster struct{ NodeID int32 }

// ClusterState implements ClusterSource.
func (l LocalCluster) ClusterState(context.Context) (ClusterState, error) {
	return ClusterState{
		Mode:             "single node: no controller quorum (this broker answers Metadata as its own controller)",
		Brokers:          map[int32]BrokerState{l.NodeID: {Epoch: -1, State: "running"}},
		ActiveController: -1,
	}, nil
}
