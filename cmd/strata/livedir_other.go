//go:build !unix

package main

// brokerRunning cannot tell without flock: it reports false.
func brokerRunning(string) bool { return false }
