package replica

import (
	"context"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// KgoDialer reaches other brokers with franz-go clients, one per (broker,
// fetcher) so that every fetcher has its own connection as in Kafka. Opts
// carry the inter-broker listener's TLS and SASL settings.
type KgoDialer struct {
	// Resolve returns a broker's address on the inter-broker listener.
	Resolve func(id int32) (addr string, ok bool)
	Opts    []kgo.Opt

	mu      sync.Mutex
	clients map[[2]int32]*kgoConn
}

type kgoConn struct {
	addr string
	cl   *kgo.Client
	b    *kgo.Broker
}

// Dial implements Dialer.
func (d *KgoDialer) Dial(_ context.Context, id int32, conn int) (Conn, error) {
	addr, ok := d.Resolve(id)
	if !ok {
		return nil, fmt.Errorf("broker %d has no address on the inter-broker listener", id)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	key := [2]int32{id, int32(conn)}
	if c := d.clients[key]; c != nil {
		if c.addr == addr {
			return c.b, nil
		}
		c.cl.Close()
		delete(d.clients, key)
	}
	opts := append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.ClientID(fmt.Sprintf("strata-replica-fetcher-%d", conn))}, d.Opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("client for broker %d at %s: %w", id, addr, err)
	}
	if d.clients == nil {
		d.clients = map[[2]int32]*kgoConn{}
	}
	c := &kgoConn{addr: addr, cl: cl, b: cl.SeedBrokers()[0]}
	d.clients[key] = c
	return c.b, nil
}

// Forget implements Dialer.
func (d *KgoDialer) Forget(id int32, conn int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	key := [2]int32{id, int32(conn)}
	if c := d.clients[key]; c != nil {
		c.cl.Close()
		delete(d.clients, key)
	}
}

// Close closes every client.
func (d *KgoDialer) Close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for k, c := range d.clients {
		c.cl.Close()
		delete(d.clients, k)
	}
}
