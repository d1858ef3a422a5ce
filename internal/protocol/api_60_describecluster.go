package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleDescribeCluster (key 60, v0-1) describes the cluster: its id, the
// controller id Metadata reports and the live brokers.
func (s *Server) handleDescribeCluster(_ context.Context, c *conn, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	if req.Version >= 1 && req.EndpointType != 1 { // only brokers, no controller endpoints
		resp.ErrorCode = kerr.UnsupportedEndpointType.Code
		msg := "only the broker endpoint type (1) is served"
		resp.ErrorMessage = &msg
		return reply{msg: resp}, nil
	}
	resp.EndpointType = 1
	if s.cfg.Cluster != nil {
		// Every live broker on the listener the request came in on.
		v := s.cfg.Cluster.View()
		ln := s.listenerName(c)
		resp.ClusterID = s.b.ClusterID()
		resp.ControllerID = metadataController(v, ln, s.b.NodeID())
		for _, id := range v.BrokerIDs() {
			e, rack, ok := endpoint(v, id, ln)
			if !ok {
				continue
			}
			br := kmsg.NewDescribeClusterResponseBroker()
			br.NodeID, br.Host, br.Port = id, e.Host, e.Port
			if rack != "" {
				br.Rack = &rack
			}
			resp.Brokers = append(resp.Brokers, br)
		}
		return reply{msg: resp}, nil
	}
	resp.ClusterID = s.b.ClusterID()
	resp.ControllerID = s.b.NodeID()
	br := kmsg.NewDescribeClusterResponseBroker()
	br.NodeID, br.Host, br.Port = s.b.NodeID(), c.listener().host, c.listener().port
	resp.Brokers = append(resp.Brokers, br)
	return reply{msg: resp}, nil
}
