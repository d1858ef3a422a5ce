package server

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/strata-io/strata/internal/meta"
	"github.com/strata-io/strata/internal/quota"
	"github.com/strata-io/strata/internal/replica"
)

// This file wires replication (internal/replica, docs/replication.md) into
// a cluster node: one replica Manager per broker, fed from the metadata
// cache at every view the reconciler applies, its followers fetching from
// the leaders over the inter-broker listener, its ISR changes committed as
// compare-and-sets through meta.

// replicationRefusal says why this node cannot replicate partitions ("" when
// it can): followers fetch over the inter-broker listener, so a SASL
// inter-broker listener needs the broker's own credentials
// (sasl.mechanism.inter.broker.protocol and its JAAS entry).
func (s *Server) replicationRefusal() string {
	if s.ib.Unavailable != "" {
		return "Replication factor above 1 needs inter-broker credentials: " + s.ib.Unavailable + "."
	}
	return ""
}

// startReplication creates and starts the node's replica Manager with
// Kafka's follower settings (num.replica.fetchers, replica.fetch.*,
// replica.lag.time.max.ms) and strata.durable.acks. It does nothing when
// the node cannot replicate (replicationRefusal).
func (s *Server) startReplication(c *cluster) error {
	if s.replicationRefusal() != "" {
		return nil
	}
	ms := func(name string) time.Duration { return time.Duration(s.cfg.Int64(name)) * time.Millisecond }
	listener := s.ib.Listener.Name
	c.dialer = &replica.KgoDialer{Resolve: func(id int32) (string, bool) {
		b := c.cache.View().Brokers[id]
		if b == nil {
			return "", false
		}
		e, ok := b.Listener(listener)
		if !ok {
			return "", false
		}
		return net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port))), true
	}, Opts: s.interBrokerOpts()}
	w := quota.Window{Samples: s.cfg.Int("replication.quota.window.num"), SizeMs: s.cfg.Int64("replication.quota.window.size.seconds") * 1000}
	c.leaderQuota, c.followerQuota = quota.NewReplication(w, nil), quota.NewReplication(w, nil)
	c.repl = replica.NewManager(replica.ManagerConfig{
		Local:       s.broker.NodeID(),
		BrokerEpoch: c.epoch,
		// A leader stops leading on definitive evidence only: its lease
		// found expired or revoked (docs/cluster.md "Fencing"), or a
		// view with another leader or a newer epoch (Sync).
		Fenced: func() bool {
			select {
			case <-c.session().Lost():
				return true
			default:
				return false
			}
		},
		Durable:               s.cfg.Bool("strata.durable.acks"),
		LagTimeMax:            ms("replica.lag.time.max.ms"),
		Fetchers:              s.cfg.Int("num.replica.fetchers"),
		FetchMaxBytes:         int32(s.cfg.Int64("replica.fetch.max.bytes")),
		FetchResponseMaxBytes: int32(s.cfg.Int64("replica.fetch.response.max.bytes")),
		FetchMinBytes:         int32(s.cfg.Int64("replica.fetch.min.bytes")),
		FetchWaitMax:          ms("replica.fetch.wait.max.ms"),
		FetchBackoff:          ms("replica.fetch.backoff.ms"),
		LeaderQuota:           c.leaderQuota,
		FollowerQuota:         c.followerQuota,
		Dialer:                c.dialer,
		Committer:             &replica.MetaCommitter{Store: c.store, Cache: c.cache},
		Logger:                s.logger,
	})
	// In s.parts: its follower lag series are per partition (see Server.parts).
	if err := s.parts.Register(replica.NewCollector(c.repl)); err != nil {
		return fmt.Errorf("register replication metrics: %w", err)
	}
	c.repl.Start()
	return nil
}

// syncReplicas hands the view's replicated partitions hosted here to the
// replica Manager (after ApplyTopics created their logs): each becomes a
// leader or a follower at its epoch, truncating where its history diverges
// from the new leader's (KIP-101/279). Before this broker is registered
// (no broker epoch yet, KIP-903) it waits for the next view.
func (s *Server) syncReplicas(c *cluster, v *meta.View) {
	if c.repl == nil || c.epoch() == 0 {
		return
	}
	s.applyThrottles(c, v)
	c.repl.Sync(v, func(tp replica.TP) (replica.Hosted, bool) {
		p, err := s.broker.Partition(tp.Topic, tp.Partition)
		if err != nil || p.Log == nil {
			return replica.Hosted{}, false
		}
		minISR := 1
		if t := v.Topics[tp.Topic]; t != nil {
			minISR = s.policy(t).MinISR
		}
		return replica.Hosted{Log: p.Log, MinISR: minISR, Attach: p.SetReplica}, true
	})
}

// handOffLeadership is Strata's controlled shutdown (Kafka's, KIP-631: the
// broker asks to shut down and the controller moves its leaderships to
// other in-sync replicas before it stops). When this broker leads a
// replicated partition that another live ISR member could lead, it revokes
// its registration first, while it still serves: the active controller
// reacts as to any broker leaving (internal/controller: a new leader from
// the ISR, this broker out of every ISR) and this broker, fenced at once,
// answers produce and fetch with NOT_LEADER_OR_FOLLOWER naming the new
// leader (KIP-951), so clients move without waiting for their metadata.
// It returns when no such partition is led here any more, or after the
// session timeout, or when ctx ends.
func (s *Server) handOffLeadership(ctx context.Context) {
	c := s.cluster
	if c == nil || c.repl == nil || c.reg.Load() == nil {
		return
	}
	me := s.broker.NodeID()
	movable := func(v *meta.View) int {
		n := 0
		for _, parts := range v.Parts {
			for _, p := range parts {
				if p.State.Leader != me || len(p.State.Replicas) < 2 {
					continue
				}
				for _, id := range p.State.ISR {
					if id != me && v.Live(id) {
						n++
						break
					}
				}
			}
		}
		return n
	}
	n := movable(c.cache.View())
	if n == 0 {
		return
	}
	s.logger.Info("controlled shutdown: moving leadership to other in-sync replicas", "partitions", n)
	// No new registration after the revocation (keepRegistered would
	// register again on the lost lease).
	if c.regStop != nil {
		c.regStop()
		<-c.regDone
		c.regStop = nil
	}
	sess := c.session()
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	err := sess.Close(rctx)
	cancel()
	if err != nil {
		s.logger.Warn("controlled shutdown: registration not revoked; leadership moves after the session timeout", "err", err)
		return
	}
	c.revoked = true
	wctx, cancel := context.WithTimeout(ctx, sess.TTL())
	defer cancel()
	for {
		ch := c.cache.Changed()
		if n := movable(c.cache.View()); n == 0 {
			s.logger.Info("controlled shutdown: leadership moved")
			return
		}
		select {
		case <-ch:
		case <-wctx.Done():
			s.logger.Warn("controlled shutdown: leadership not moved in time; stopping anyway", "partitions", movable(c.cache.View()))
			return
		}
	}
}

// applyThrottles hands the replication throttles of view v to the replica
// Manager's quotas (Kafka's BrokerConfigHandler and TopicConfigHandler):
// the rates are this broker's leader/follower.replication.throttled.rate
// under the dynamic broker configs (its own, else the cluster default,
// else unbounded), the throttled partitions those of each topic's
// leader/follower.replication.throttled.replicas naming this broker ("*":
// all). A value that does not parse (written by hand to the store) throttles
// nothing and is logged.
func (s *Server) applyThrottles(c *cluster, v *meta.View) {
	cfg := s.configFor(v)
	c.leaderQuota.SetBound(cfg.Int64("leader.replication.throttled.rate"))
	c.followerQuota.SetBound(cfg.Int64("follower.replication.throttled.rate"))
	me := s.broker.NodeID()
	for _, side := range []struct {
		name string
		q    *quota.Replication
	}{{"leader.replication.throttled.replicas", c.leaderQuota}, {"follower.replication.throttled.replicas", c.followerQuota}} {
		m := map[string][]int32{}
		for name, t := range v.Topics {
			val, ok := t.Configs[side.name]
			if !ok || t.Deleting {
				continue
			}
			parts, ok := quota.ParseThrottledReplicas(val, me)
			if !ok {
				s.logger.Warn("replication throttle ignored: malformed value", "topic", name, "config", side.name, "value", val)
				continue
			}
			if len(parts) > 0 {
				m[name] = parts
			}
		}
		side.q.SetThrottled(m)
	}
}
