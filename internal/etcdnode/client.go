package etcdnode

import (
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Keepalive of the metadata store's clients (go.etcd.io/etcd/client/v3
// Config.DialKeepAliveTime / DialKeepAliveTimeout, gRPC's
// keepalive.ClientParameters): after ClientKeepAliveTime without anything
// read from a member the client pings it, and closes the connection when
// no answer comes within ClientKeepAliveTimeout. A member whose process is
// frozen (SIGSTOP, a VM paused, a stuck disk holding its goroutines) keeps
// its TCP connections open (the kernel still acknowledges), so without
// the ping the client's round-robin balancer keeps sending one call in
// three, and a watch stream for ever, to a member that never answers.
// Once the connection is closed, calls in flight fail with Unavailable
// (reads are retried by the client on another member, writes return the
// error to the caller, whose retry goes to another member), and the
// balancer picks only members whose connection is ready: a frozen one
// never completes a new HTTP/2 handshake. 10 s is gRPC's minimum ping
// interval (grpc.WithKeepaliveParams raises a shorter one to it) and
// above the etcd server's enforcement minimum (embed.Config
// GRPCKeepAliveMinTime, 5 s by default: more frequent pings are refused
// with GOAWAY "too_many_pings"). The server also refuses pings without
// an active stream (its EnforcementPolicy.PermitWithoutStream is false),
// so Config.PermitWithoutStream stays unset: an idle connection has no
// call to stall.
const (
	ClientKeepAliveTime    = 10 * time.Second
	ClientKeepAliveTimeout = 3 * time.Second
	// ClientDialTimeout bounds the client's first connection (etcd's
	// Config.DialTimeout).
	ClientDialTimeout = 5 * time.Second
)

// ClientConfig is the configuration of a client of the metadata store
// over endpoints: a broker's, a controller's, the CLI's. logger nil: none.
func ClientConfig(logger *zap.Logger, endpoints ...string) clientv3.Config {
	if logger == nil {
		logger = zap.NewNop()
	}
	return clientv3.Config{
		Endpoints:            endpoints,
		DialTimeout:          ClientDialTimeout,
		DialKeepAliveTime:    ClientKeepAliveTime,
		DialKeepAliveTimeout: ClientKeepAliveTimeout,
		Logger:               logger,
	}
}
