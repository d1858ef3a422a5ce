package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/strata-io/strata/internal/etcdnode"
	"github.com/strata-io/strata/internal/meta"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// newClusterCmd is `strata cluster`: the cluster metadata as the
// controllers hold it (docs/cluster.md).
func newClusterCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "cluster", Short: "Cluster id, brokers and controller (info); the metadata held by the controllers (status); moving every replica off a broker (decommission)"}
	cmd.AddCommand(newClusterStatusCmd(), newClusterInfoCmd(), newClusterDecommissionCmd())
	return cmd
}

// clusterStatus is `strata cluster status -o json`.
type clusterStatus struct {
	ClusterID         string            `json:"cluster_id"`
	Controller        int32             `json:"controller"`
	Brokers           []brokerStatus    `json:"brokers"`
	Controllers       []controllerState `json:"controllers"`
	Topics            int               `json:"topics"`
	Partitions        int               `json:"partitions"`
	OfflinePartitions []string          `json:"offline_partitions"`
	// UnderReplicated lists the partitions whose ISR is smaller than their
	// replica set (Kafka's UnderReplicatedPartitions, cluster-wide).
	UnderReplicated []string `json:"under_replicated_partitions"`
}

type brokerStatus struct {
	ID        int32    `json:"id"`
	Rack      string   `json:"rack,omitempty"`
	Epoch     int64    `json:"epoch"`
	Listeners []string `json:"listeners"`
	Leaders   int      `json:"leaders"`
	Replicas  int      `json:"replicas"`
}

type controllerState struct {
	ID      int32  `json:"id"`
	Address string `json:"address"`
	Learner bool   `json:"learner,omitempty"`
}

func newClusterStatusCmd() *cobra.Command {
	var controllers, output string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Brokers (rack, epoch, leaders), controllers, partitions, offline and under-replicated partitions",
		Long:  "Reads the cluster metadata from the controllers' metadata store through a controller listener (--bootstrap-controller, as kafka-metadata-quorum), so it works while brokers are down.",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			cli, err := controllerClient(controllers, timeout)
			if err != nil {
				return err
			}
			defer cli.Close()
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			st, err := readClusterStatus(ctx, cli)
			if err != nil {
				return err
			}
			if output == "json" {
				return writeJSON(cmd.OutOrStdout(), st)
			}
			return st.print(cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&controllers, "bootstrap-controller", "127.0.0.1:9093", "controller listener(s), host:port[,host:port]")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Second, "how long to wait for the controllers")
	return cmd
}

func readClusterStatus(ctx context.Context, cli *clientv3.Client) (*clusterStatus, error) {
	v, err := meta.NewStore(cli, meta.DefaultKeys, 0).Load(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the cluster metadata: %w", err)
	}
	members, err := etcdnode.Members(ctx, cli)
	if err != nil {
		return nil, err
	}
	st := &clusterStatus{ClusterID: v.ClusterID, Controller: v.Controller, Topics: len(v.Topics), Partitions: v.PartitionCount(),
		Brokers: []brokerStatus{}, Controllers: []controllerState{}, OfflinePartitions: []string{}, UnderReplicated: []string{}}
	for _, m := range members {
		st.Controllers = append(st.Controllers, controllerState{ID: m.NodeID, Address: strings.TrimPrefix(m.PeerURL, "http://"), Learner: m.IsLearner})
	}
	leaders, replicas := map[int32]int{}, map[int32]int{}
	for _, name := range v.TopicNames() {
		t := v.Topics[name]
		for _, p := range v.Parts[t.ID] {
			if p.ModRevision == 0 {
				continue
			}
			for _, r := range p.State.Replicas {
				replicas[r]++
			}
			if len(p.State.ISR) < len(p.State.Replicas) {
				st.UnderReplicated = append(st.UnderReplicated, fmt.Sprintf("%s-%d", name, p.Partition))
			}
			if v.ServingLeader(p.State) == meta.NoLeader {
				st.OfflinePartitions = append(st.OfflinePartitions, fmt.Sprintf("%s-%d", name, p.Partition))
			} else {
				leaders[p.State.Leader]++
			}
		}
	}
	for _, id := range v.BrokerIDs() {
		b := v.Brokers[id]
		bs := brokerStatus{ID: id, Rack: b.Rack, Epoch: b.Epoch, Leaders: leaders[id], Replicas: replicas[id], Listeners: []string{}}
		for _, l := range b.Listeners {
			bs.Listeners = append(bs.Listeners, fmt.Sprintf("%s://%s:%d", l.Name, l.Host, l.Port))
		}
		st.Brokers = append(st.Brokers, bs)
	}
	sort.Strings(st.OfflinePartitions)
	sort.Strings(st.UnderReplicated)
	return st, nil
}

func (st *clusterStatus) print(w io.Writer) error {
	fmt.Fprintf(w, "cluster %s, active controller %d, %d topics, %d partitions, %d offline, %d under-replicated\n\n",
		st.ClusterID, st.Controller, st.Topics, st.Partitions, len(st.OfflinePartitions), len(st.UnderReplicated))
	t := newTable(w, "BROKER", "RACK", "EPOCH", "LEADERS", "REPLICAS", "LISTENERS")
	for _, b := range st.Brokers {
		t.row(b.ID, b.Rack, b.Epoch, b.Leaders, b.Replicas, strings.Join(b.Listeners, ","))
	}
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	t = newTable(w, "CONTROLLER", "ADDRESS", "ROLE")
	for _, c := range st.Controllers {
		role := "voter"
		if c.Learner {
			role = "learner"
		}
		t.row(c.ID, c.Address, role)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if len(st.OfflinePartitions) > 0 {
		fmt.Fprintf(w, "\noffline partitions: %s\n", strings.Join(st.OfflinePartitions, ", "))
	}
	if len(st.UnderReplicated) > 0 {
		fmt.Fprintf(w, "\nunder-replicated partitions: %s\n", strings.Join(st.UnderReplicated, ", "))
	}
	return nil
}
