package server

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"

	"github.com/strata-io/strata/internal/config"
	"github.com/strata-io/strata/internal/console"
	"github.com/strata-io/strata/internal/meta"
)

// mountConsole builds the web console and serves it at / on the HTTP
// listener. Its Kafka clients talk to this broker's protocol server over
// in-process pipes (no socket, TLS or SASL), so every console action is
// an ordinary Kafka request; requests for another broker (a partition's
// leader, a group's coordinator) go to that broker (dialPeer). host and
// port are this broker's advertised address.
func (s *Server) mountConsole(host string, port int32) error {
	c, err := console.New(console.Config{
		// Each connection acts as the console user it is dialled for
		// (the logged-in SCRAM user, or User:ANONYMOUS without a login),
		// so the authorizer checks a console action as that user's own
		// client's; the history sampler's acts as the broker itself.
		Dial: func(_ context.Context, as console.Actor) (net.Conn, error) {
			client, server := net.Pipe()
			var err error
			if as.Broker {
				err = s.proto.ServeInProcessAsBroker(server)
			} else {
				err = s.proto.ServeInProcess(server, as.User)
			}
			if err != nil {
				client.Close()
				return nil, err
			}
			return client, nil
		},
		Self:        net.JoinHostPort(host, strconv.Itoa(int(port))),
		DialPeer:    s.consolePeer,
		Credentials: s.broker,
		Compaction:  s.cleaner,
		Metrics:     s.reg,
		Partitions:  s.partStats,
		Cluster:     consoleCluster{s},
		NodeID:      s.broker.NodeID(),
		ListenAddr:  s.cfg.Get("strata.metrics.listener"),
		Authorizer:  s.sec.authorizer != nil,
		Logger:      s.logger,
	})
	if err != nil {
		return err
	}
	s.console = c
	s.metrics.Handle("/", c.Handler())
	return nil
}

// consolePeer connects the console to another broker, given as addr, its
// address on this node's first listener (the console's in-process
// connections are on that listener, so this node's Metadata advertises the
// brokers there) or on another listener (a peer asked over the inter-broker
// connection advertises the brokers on that listener). The connection goes to that broker's endpoint on the
// inter-broker listener with the inter-broker TLS and SASL credentials,
// as the replica fetchers' and the coordinators' connections do
// (dialInterBroker), whatever the listeners' security protocols. The
// history sampler acts there as the broker, like those. A user's request
// is sent only without an authorizer: the other broker would see this
// broker's principal, not the user (Kafka has no way to send a client's
// request to another broker on its behalf outside the controller's
// Envelope, KIP-590), so with an authorizer a page reaches only this
// broker and says which broker holds the rest.
func (s *Server) consolePeer(ctx context.Context, addr string, as console.Actor) (net.Conn, error) {
	if !as.Broker && s.sec.authorizer != nil {
		return nil, fmt.Errorf("broker %s: with an authorizer the console acts as %s on this broker only (another broker would not see %s): open that broker's console",
			addr, as, as)
	}
	id, ok := s.brokerAt(addr)
	if !ok {
		return nil, fmt.Errorf("console: no registered broker has the address %s", addr)
	}
	target, ok := s.peerAddr(id)
	if !ok {
		return nil, fmt.Errorf("console: broker %d has no %s (inter-broker) listener", id, s.ib.Listener.Name)
	}
	nc, err := s.dialInterBroker(ctx, target)
	if err != nil {
		return nil, fmt.Errorf("console: broker %d at %s (%s): %w", id, target, s.ib.Listener.Name, err)
	}
	return nc, nil
}

// brokerAt is the registered broker with an endpoint at addr (host:port):
// on this node's first listener, else on any listener.
func (s *Server) brokerAt(addr string) (int32, bool) {
	if s.cluster == nil || s.cluster.cache == nil {
		return 0, false
	}
	v := s.cluster.cache.View()
	if v == nil {
		return 0, false
	}
	at := func(e meta.Endpoint) bool { return net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port))) == addr }
	for id, b := range v.Brokers {
		if e, ok := b.Listener(s.lns[0].cfg.Name); ok && at(e) {
			return id, true
		}
	}
	for id, b := range v.Brokers {
		if slices.ContainsFunc(b.Listeners, at) {
			return id, true
		}
	}
	return 0, false
}

// closeConsole stops the console's sampler and Kafka client.
func (s *Server) closeConsole() {
	if s.console != nil {
		s.console.Close()
	}
}

// Console exposes the web console (nil without an HTTP listener).
func (s *Server) Console() *console.Console { return s.console }

// consoleCluster tells the console what this node knows of the cluster
// beyond Metadata: with the KRaft settings, its registration epoch, whether
// its session is fenced, the voters and whether it is the active
// controller; without them, that it is a single node without a quorum.
type consoleCluster struct{ s *Server }

func (c consoleCluster) ClusterState(ctx context.Context) (console.ClusterState, error) {
	s := c.s
	id := s.broker.NodeID()
	cl := s.cluster
	if cl == nil {
		return console.LocalCluster{NodeID: id}.ClusterState(ctx)
	}
	mode := "KRaft combined node (process.roles=broker,controller): metadata in the controller quorum"
	if !s.cfg.HasRole(config.RoleController) {
		mode = "KRaft broker (process.roles=broker): metadata in the controller quorum"
	}
	st := console.ClusterState{
		Mode:             mode,
		Brokers:          map[int32]console.BrokerState{id: {Epoch: cl.epoch(), State: "registered"}},
		ActiveController: -1,
	}
	// Every broker registered in the cluster metadata (the cache's view):
	// its registration epoch; a registration lasts as long as its session.
	if cl.cache != nil {
		if v := cl.cache.View(); v != nil {
			for bid, b := range v.Brokers {
				st.Brokers[bid] = console.BrokerState{Epoch: b.Epoch, State: "registered"}
			}
			st.ActiveController = v.Controller
		}
	}
	if cl.session().Fenced() {
		st.Brokers[id] = console.BrokerState{Epoch: cl.epoch(), State: "fenced (session not renewed)"}
	}
	for _, v := range s.cfg.Voters() {
		st.Controllers = append(st.Controllers, int32(v.ID))
	}
	if cl.active.Load() {
		st.ActiveController = id
	}
	return st, nil
}
