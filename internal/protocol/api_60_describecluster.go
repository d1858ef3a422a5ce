package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleDescribeCluster (key 60, v0-1) describes the one-node cluster.
func (s *Server) handleDescribeCluster(_ context.Context, _ *conn, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	if req.Version >= 1 && req.EndpointType != 1 { // only brokers, no controller endpoints
		resp.ErrorCode = kerr.UnsupportedEndpointType.Code
		msg := "only the broker endpoint type (1) is served"
		resp.ErrorMessage = &msg
		return reply{msg: resp}, nil
	}
	resp.EndpointType = 1
	resp.ClusterID = s.b.ClusterID()
	resp.ControllerID = s.b.NodeID()
	br := kmsg.NewDescribeClusterResponseBroker()
	br.NodeID, br.Host, br.Port = s.b.NodeID(), s.host, s.port
	resp.Brokers = append(resp.Brokers, br)
	return reply{msg: resp}, nil
}
