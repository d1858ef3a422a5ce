package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/strata-io/strata/internal/broker"
	"github.com/strata-io/strata/internal/etcdnode"
)

// earlyMember is the metadata store member of a controller node, started
// by New while the broker loads its logs (issue 18: at 10,000 partitions
// the two took about a second each, one after the other). The member
// starts once the broker holds its log directories' locks
// (broker.LoadProgress.Locked), so a second broker on the same
// directories fails on the lock as before and never opens the store.
// startCluster takes the started member; Shutdown or a failed New that
// never got there stops it.
type earlyMember struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when node/err are set
	node   *etcdnode.Node
	err    error
}

// startMemberEarly starts the metadata store member on the controller
// listener in the background, once progress reports the log directories
// locked; the member owns the listener from now on.
func (s *Server) startMemberEarly(progress *broker.LoadProgress) {
	ln := s.ctlLn
	s.ctlLn = nil
	me := int32(s.cfg.Int("node.id"))
	dir := s.cfg.Get("metadata.log.dir")
	if dir == "" {
		dir = s.cfg.List("log.dirs")[0]
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &earlyMember{cancel: cancel, done: make(chan struct{})}
	s.member = m
	go func() { // owner: the Server, through m (takeMember or stopMember)
		defer close(m.done)
		select {
		case <-progress.Locked():
		case <-ctx.Done():
			ln.Close()
			m.err = fmt.Errorf("metadata store member not started: %w", ctx.Err())
			return
		}
		m.node, m.err = s.startMember(ctx, me, dir, ln, s.storeVoters())
	}()
}

// takeMember waits for the member started by startMemberEarly until ctx
// ends, which stops it.
func (s *Server) takeMember(ctx context.Context) (*etcdnode.Node, error) {
	m := s.member
	s.member = nil
	select {
	case <-m.done:
	case <-ctx.Done():
		m.cancel()
		<-m.done
		if m.node != nil {
			m.node.Close()
		}
		if m.err != nil {
			// etcdnode says what it waited for (a quorum of voters).
			return nil, fmt.Errorf("%v: %w", m.err, ctx.Err())
		}
		return nil, fmt.Errorf("metadata store member: %w", ctx.Err())
	}
	m.cancel()
	return m.node, m.err
}

// stopMember stops a member started by startMemberEarly that startCluster
// never took (New failed, or Shutdown before Start).
func (s *Server) stopMember() error {
	m := s.member
	if m == nil {
		return nil
	}
	s.member = nil
	m.cancel()
	<-m.done
	if m.node != nil {
		m.node.Close()
	}
	if m.err != nil && !errors.Is(m.err, context.Canceled) {
		return m.err
	}
	return nil
}

// storeVoters are the configured controller voters as the store member
// takes them.
func (s *Server) storeVoters() []etcdnode.Voter {
	var voters []etcdnode.Voter
	for _, v := range s.cfg.Voters() {
		voters = append(voters, etcdnode.Voter{ID: v.ID, Host: v.Host, Port: v.Port})
	}
	return voters
}
