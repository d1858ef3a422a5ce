package main

import (
	"net"
	"testing"

	"github.com/strata-io/strata/internal/servertest"
)

// startStrata runs an in-process PLAINTEXT Strata broker (servertest) with
// extra settings, and returns its address; it stops when the test ends.
func startStrata(t *testing.T, extra map[string]string) string {
	t.Helper()
	return startTestBroker(t, "PLAINTEXT://127.0.0.1:0", extra)
}

// startPinned starts a broker on a fixed free port, so that a test can
// Close and Open it on the same address while clients stay connected.
func startPinned(t *testing.T) *servertest.Broker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return servertest.Start(t, servertest.Options{Settings: map[string]string{"listeners": "PLAINTEXT://" + addr}})
}
