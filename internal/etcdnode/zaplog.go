package etcdnode

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// slogCore is a zapcore.Core that forwards etcd's log entries at or above
// a level to a *slog.Logger, so the embedded member logs through the
// broker's logger instead of its own stderr writer.
type slogCore struct {
	l      *slog.Logger
	min    zapcore.Level
	fields []zapcore.Field
}

func newZapLogger(l *slog.Logger, min zapcore.Level) *zap.Logger {
	return zap.New(&slogCore{l: l.With("component", "etcd"), min: min})
}

func (c *slogCore) Enabled(l zapcore.Level) bool { return l >= c.min }

func (c *slogCore) With(fs []zapcore.Field) zapcore.Core {
	out := *c
	out.fields = append(append([]zapcore.Field(nil), c.fields...), fs...)
	return &out
}

func (c *slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

// expected lists etcd messages that describe Strata's deliberate setup
// or a normal stop, not a problem: its client and peer listeners are
// loopback-only behind the controller listener (so one port serving HTTP
// and gRPC, and simple auth tokens with auth disabled, are intended), and
// closing the member closes its listeners. etcd's storage-version monitor
// (EtcdServer.StorageVersion, run by monitorStorageVersion) may read a new
// member's backend before its first entry is applied, when no term is
// stored yet; it logs "Failed to detect schema version: missing term
// information" and tries again at its next interval, so with the fast Raft
// timing of a one-member store that first-start race is routine.
var expected = []string{
	"Running http and grpc server on single port",
	"simple token is not cryptographically signed",
	"use of closed network connection",
	"server closed",
	"Server closed",
	"Failed to detect schema version",
}

func (c *slogCore) Write(e zapcore.Entry, fs []zapcore.Field) error {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range c.fields {
		f.AddTo(enc)
	}
	for _, f := range fs {
		f.AddTo(enc)
	}
	for _, x := range expected {
		if strings.Contains(e.Message, x) || strings.Contains(fmt.Sprint(enc.Fields["error"]), x) {
			return nil
		}
	}
	attrs := make([]slog.Attr, 0, len(enc.Fields))
	for k, v := range enc.Fields {
		attrs = append(attrs, slog.Any(k, v))
	}
	lvl := slog.LevelInfo
	switch {
	case e.Level >= zapcore.ErrorLevel:
		lvl = slog.LevelError
	case e.Level == zapcore.WarnLevel:
		lvl = slog.LevelWarn
	case e.Level < zapcore.InfoLevel:
		lvl = slog.LevelDebug
	}
	c.l.LogAttrs(context.Background(), lvl, e.Message, attrs...)
	return nil
}

func (c *slogCore) Sync() error { return nil }
