package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// connWatch reports on stderr when the client loses its broker (a
// connection attempt fails) and when it has it back (the next one
// succeeds), once per outage, so that a consumer following a topic does
// not sit silently through a broker restart.
type connWatch struct {
	w    io.Writer
	mu   sync.Mutex
	down map[string]bool // broker address -> reported lost
}

var _ kgo.HookBrokerConnect = (*connWatch)(nil)

// OnBrokerConnect implements kgo.HookBrokerConnect.
func (c *connWatch) OnBrokerConnect(meta kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	addr := net.JoinHostPort(meta.Host, fmt.Sprint(meta.Port))
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.down == nil {
		c.down = map[string]bool{}
	}
	switch {
	case err != nil && !c.down[addr]:
		c.down[addr] = true
		fmt.Fprintf(c.w, "strata: lost the broker at %s (%v); retrying\n", addr, unwrapDial(err))
	case err == nil && c.down[addr]:
		delete(c.down, addr)
		fmt.Fprintf(c.w, "strata: broker at %s is back\n", addr)
	}
}

// unwrapDial shortens "unable to dial: dial tcp 127.0.0.1:9092: connect:
// connection refused" to "connection refused".
func unwrapDial(err error) error {
	var oe *net.OpError
	if !errors.As(err, &oe) {
		return err
	}
	var se *os.SyscallError
	if errors.As(oe.Err, &se) {
		return se.Err
	}
	return oe.Err
}
