package protocol

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/authz"
)

// unregisterTimeout bounds an UnregisterBroker (the request carries no
// timeout; Kafka's controller answers once its record is committed).
const unregisterTimeout = 30 * time.Second

// handleUnregisterBroker (key 64, v0; KIP-631) removes a broker's
// registration from the cluster metadata, as Kafka's controller does
// (ReplicationControlManager.unregisterBroker: the registration goes
// whether the broker is fenced or running, and it leaves every ISR and
// leadership; a broker without a registration is BROKER_ID_NOT_REGISTERED
// 102, "Broker ID N is not currently registered"). Kafka forwards it from
// any broker to the controller (KafkaApis: forwardToControllerOrFail);
// every Strata broker writes to the metadata store itself. Served in a
// cluster only.
func (s *Server) handleUnregisterBroker(ctx context.Context, _ *conn, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.UnregisterBrokerRequest)
	resp := req.ResponseKind().(*kmsg.UnregisterBrokerResponse)
	ctx, cancel := context.WithTimeout(ctx, unregisterTimeout)
	defer cancel()
	if err := s.cfg.Cluster.UnregisterBroker(ctx, req.BrokerID); err != nil {
		resp.ErrorCode = errCode(err)
		resp.ErrorMessage = kmsg.StringPtr(err.Error())
	}
	return reply{msg: resp}, nil
}

// guardUnregisterBroker: ALTER on the cluster (ControllerApis.handleUnregisterBroker).
func guardUnregisterBroker(s *Server, ctx context.Context, c *conn, kreq kmsg.Request, next handlerFn) (reply, error) {
	if c.allowedCluster(authz.OpAlter) {
		return next(ctx, c, kreq)
	}
	resp := kreq.(*kmsg.UnregisterBrokerRequest).ResponseKind().(*kmsg.UnregisterBrokerResponse)
	resp.ErrorCode, resp.ErrorMessage = kerr.ClusterAuthorizationFailed.Code, msgClusterDenied
	return reply{msg: resp}, nil
}
