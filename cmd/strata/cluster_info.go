package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
)

// clusterInfo is the JSON shape of `strata cluster info`.
type clusterInfo struct {
	ClusterID  string       `json:"cluster_id"`
	Controller int32        `json:"controller"` // -1 when unknown
	Brokers    []brokerInfo `json:"brokers"`
}

type brokerInfo struct {
	ID   int32   `json:"id"`
	Host string  `json:"host"`
	Port int32   `json:"port"`
	Rack *string `json:"rack"`
}

// newClusterInfoCmd is `strata cluster info`: the cluster id, brokers and
// controller as any Kafka client sees them (Metadata), like
// kafka-broker-api-versions / kafka-metadata-quorum describe or rpk
// cluster info.
func newClusterInfoCmd() *cobra.Command {
	o := &clientOpts{}
	cmd := &cobra.Command{
		Use:   "info",
		Short: "Cluster id, brokers and controller, through the Kafka protocol (--brokers)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.withAdmin(cmd.Context(), func(ctx context.Context, adm *kadm.Client) error {
				m, err := adm.BrokerMetadata(ctx)
				if err != nil {
					return fmt.Errorf("cluster metadata: %w", err)
				}
				info := clusterInfo{ClusterID: m.Cluster, Controller: m.Controller, Brokers: []brokerInfo{}}
				for _, b := range m.Brokers {
					info.Brokers = append(info.Brokers, brokerInfo{ID: b.NodeID, Host: b.Host, Port: b.Port, Rack: b.Rack})
				}
				return o.emit(cmd, info, func(w io.Writer) error { return printClusterInfo(w, info) })
			})
		},
	}
	addClientFlags(cmd, o)
	return cmd
}

// printClusterInfo is the table form of `cluster info`.
func printClusterInfo(w io.Writer, info clusterInfo) error {
	controller := "unknown"
	if info.Controller >= 0 {
		controller = strconv.Itoa(int(info.Controller))
	}
	fmt.Fprintf(w, "Cluster ID: %s\nController: %s\n\n", orDash(info.ClusterID), controller)
	return writeTable(w, info.Brokers, func(b brokerInfo) []any {
		id := strconv.Itoa(int(b.ID))
		if b.ID == info.Controller {
			id += " (controller)"
		}
		rack := "-"
		if b.Rack != nil {
			rack = *b.Rack
		}
		return []any{id, net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))), rack}
	}, "BROKER", "ADDRESS", "RACK")
}
