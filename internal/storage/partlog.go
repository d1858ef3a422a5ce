package storage

import (
	"context"
	"log/slog"
)

// partitionLogger returns base with a "partition" attribute. It is what
// base.With("partition", name) logs, without the copy of base's handler
// that With makes (a text or JSON handler's state and its preformatted
// attributes, a few hundred bytes a log): name is only added to the
// records actually logged, which for a partition are rare.
func partitionLogger(base *slog.Logger, name string) *slog.Logger {
	return slog.New(&partitionHandler{h: base.Handler(), name: name})
}

// partitionHandler adds the partition attribute first to each record.
type partitionHandler struct {
	h    slog.Handler
	name string
}

func (p *partitionHandler) Enabled(ctx context.Context, lvl slog.Level) bool {
	return p.h.Enabled(ctx, lvl)
}

func (p *partitionHandler) Handle(ctx context.Context, r slog.Record) error {
	nr := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	nr.AddAttrs(slog.String("partition", p.name))
	r.Attrs(func(a slog.Attr) bool {
		nr.AddAttrs(a)
		return true
	})
	return p.h.Handle(ctx, nr)
}

func (p *partitionHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return p.h.WithAttrs(append([]slog.Attr{slog.String("partition", p.name)}, as...))
}

func (p *partitionHandler) WithGroup(name string) slog.Handler {
	return p.h.WithAttrs([]slog.Attr{slog.String("partition", p.name)}).WithGroup(name)
}
