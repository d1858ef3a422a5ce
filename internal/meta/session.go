package meta

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Session is a broker's liveness in etcd: a lease with TTL
// broker.session.timeout.ms, renewed every broker.heartbeat.interval.ms,
// to which the broker's registration is attached.
//
// Fencing (docs/cluster.md "Fencing"): etcd expires the lease no earlier
// than TTL after the leader received the last renewal, hence no earlier
// than TTL after the broker sent it. The broker considers itself fenced
// from FenceFraction*TTL after the send time of its last acknowledged
// renewal. Since the controller acts only after it sees the registration
// deleted, the broker has stopped leading at least (1-FenceFraction)*TTL
// (3 s with Kafka's 9 s default) before any other broker can be made
// leader of its partitions. The check reads the monotonic clock at each
// use, so a process paused by SIGSTOP is fenced the instant it resumes.
type Session struct {
	cli       *clientv3.Client
	lease     clientv3.LeaseID
	ttl       time.Duration
	heartbeat time.Duration
	logger    *slog.Logger

	validUntil atomic.Int64 // monotonic nanoseconds since base
	base       time.Time
	lost       chan struct{} // closed when the lease is gone
	lostOnce   sync.Once

	cancel context.CancelFunc
	done   chan struct{}
}

// FenceFraction is the share of the session timeout after the last
// acknowledged renewal at which a broker stops acting as leader.
const FenceFraction = 2.0 / 3.0

// NewSession grants a lease of ttl (rounded up to whole seconds, etcd's
// unit) and renews it every heartbeat until Close or until the lease is
// found expired (Lost).
func NewSession(ctx context.Context, cli *clientv3.Client, ttl, heartbeat time.Duration, logger *slog.Logger) (*Session, error) {
	if logger == nil {
		logger = slog.Default()
	}
	secs := int64((ttl + time.Second - 1) / time.Second)
	sent := time.Now()
	g, err := cli.Grant(ctx, secs)
	if err != nil {
		return nil, Retriable(err)
	}
	wctx, cancel := context.WithCancel(context.Background())
	s := &Session{cli: cli, lease: g.ID, ttl: time.Duration(secs) * time.Second, heartbeat: heartbeat, logger: logger,
		base: sent, lost: make(chan struct{}), cancel: cancel, done: make(chan struct{})}
	s.renewed(sent)
	go s.run(wctx)
	return s, nil
}

// Lease is the lease id to attach keys to.
func (s *Session) Lease() clientv3.LeaseID { return s.lease }

// TTL is the lease's time to live.
func (s *Session) TTL() time.Duration { return s.ttl }

func (s *Session) renewed(sentAt time.Time) {
	until := sentAt.Add(time.Duration(float64(s.ttl) * FenceFraction)).Sub(s.base)
	for {
		old := s.validUntil.Load()
		if int64(until) <= old || s.validUntil.CompareAndSwap(old, int64(until)) {
			return
		}
	}
}

// Fenced reports whether the broker must not act as a leader now: its last
// acknowledged renewal is too old, or the lease is gone.
func (s *Session) Fenced() bool {
	select {
	case <-s.lost:
		return true
	default:
	}
	return time.Since(s.base) >= time.Duration(s.validUntil.Load())
}

// Lost is closed when the lease is known expired or revoked: the
// registration is gone and the broker must register again (a new epoch).
func (s *Session) Lost() <-chan struct{} { return s.lost }

func (s *Session) markLost() { s.lostOnce.Do(func() { close(s.lost) }) }

func (s *Session) run(ctx context.Context) {
	defer close(s.done)
	t := time.NewTicker(s.heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sent := time.Now()
		rctx, cancel := context.WithTimeout(ctx, s.heartbeat)
		resp, err := s.cli.KeepAliveOnce(rctx, s.lease)
		cancel()
		switch {
		case err == nil && resp.TTL > 0:
			s.renewed(sent)
		case errors.Is(err, rpctypes.ErrLeaseNotFound) || (err == nil && resp.TTL <= 0):
			s.logger.Warn("broker session lease expired; this broker is fenced until it registers again")
			s.markLost()
			return
		case ctx.Err() != nil:
			return
		default:
			if s.Fenced() {
				s.logger.Warn("broker session not renewed; fenced", "err", err)
			}
		}
	}
}

// Close stops renewing and revokes the lease, which deletes the
// registration at once (a clean shutdown needs no session timeout).
func (s *Session) Close(ctx context.Context) error {
	s.cancel()
	<-s.done
	s.markLost()
	_, err := s.cli.Revoke(ctx, s.lease)
	return Retriable(err)
}
