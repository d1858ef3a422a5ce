package server

import (
	"context"
	"net"

	"github.com/strata-io/strata/internal/config"
	"github.com/strata-io/strata/internal/console"
)

// mountConsole builds the web console and serves it at / on the HTTP
// listener. Its Kafka client talks to this broker's protocol server over
// in-process pipes (no socket, TLS or SASL), so every console action is
// an ordinary Kafka request.
func (s *Server) mountConsole() error {
	c, err := console.New(console.Config{
		// Each connection acts as the console user it is dialled for
		// (the logged-in SCRAM user, User:ANONYMOUS without a login, or
		// the sampler's User:strata-console), so the authorizer checks
		// a console action as that user's own client's.
		Dial: func(_ context.Context, user string) (net.Conn, error) {
			client, server := net.Pipe()
			if err := s.proto.ServeInProcess(server, user); err != nil {
				client.Close()
				return nil, err
			}
			return client, nil
		},
		Credentials: s.broker,
		Compaction:  s.cleaner,
		Metrics:     s.reg,
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
