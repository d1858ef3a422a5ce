package console

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// Principals the console acts as when no one is logged in.
const (
	// anonymousUser is a loopback console's user without a login:
	// User:ANONYMOUS, what Kafka calls a PLAINTEXT connection's principal
	// (KafkaPrincipal.ANONYMOUS), so the console gets what a client on a
	// loopback PLAINTEXT listener would.
	anonymousUser = "ANONYMOUS"
)

// Client pool bounds: a user's client closes after clientIdle without a
// page, and at most maxClients users have one at a time.
const (
	clientIdle = 10 * time.Minute
	maxClients = 64
)

// errTooManyUsers is answered when maxClients users are active at once.
var errTooManyUsers = errors.New("too many console users at once: try again in a few minutes")

// clients holds one Kafka client per principal the console acts as, so
// every request a page sends is authorized as its logged-in user
// (User:<login>) by the broker's authorizer, exactly as that user's own
// client would be.
type clients struct {
	// dialer returns the connections of user's client.
	dialer func(user string) func(ctx context.Context, addr string) (net.Conn, error)

	mu     sync.Mutex
	m      map[string]*pooled
	closed bool
}

type pooled struct {
	k    *kafka
	used time.Time
}

func newClients(dialer func(user string) func(ctx context.Context, addr string) (net.Conn, error)) *clients {
	return &clients{dialer: dialer, m: map[string]*pooled{}}
}

// get returns user's client, making it on first use.
func (p *clients) get(user string) (*kafka, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errors.New("console: closed")
	}
	now := time.Now()
	if e := p.m[user]; e != nil {
		e.used = now
		return e.k, nil
	}
	if len(p.m) >= maxClients {
		p.evictLocked(now)
		if len(p.m) >= maxClients {
			return nil, errTooManyUsers
		}
	}
	k, err := newKafka(p.dialer(user))
	if err != nil {
		return nil, fmt.Errorf("console: client for user %q: %w", user, err)
	}
	p.m[user] = &pooled{k: k, used: now}
	return k, nil
}

// evictIdle closes the clients unused for clientIdle.
func (p *clients) evictIdle() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.evictLocked(time.Now())
}

func (p *clients) evictLocked(now time.Time) {
	for u, e := range p.m {
		if now.Sub(e.used) > clientIdle {
			e.k.close()
			delete(p.m, u)
		}
	}
}

// close closes every client; get fails afterwards.
func (p *clients) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for u, e := range p.m {
		e.k.close()
		delete(p.m, u)
	}
}

// userOf is the principal name a request acts as: its logged-in user, or
// anonymousUser on a console without login.
func userOf(ctx context.Context) string {
	if u := sessionFrom(ctx).user; u != "" {
		return u
	}
	return anonymousUser
}
