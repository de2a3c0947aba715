package middleware

import (
	"context"
	"log/slog"

	"github.com/prosody-events/prosody-go/core/fault"
	"github.com/prosody-events/prosody-go/core/internal/invocation"
)

// Log is the outermost layer of best-effort mode: it logs a failed event
// by its class and passes the outcome on, so that the engine commits it
// (or, for a terminal failure, leaves it for the next owner).
type Log struct{ log *slog.Logger }

// NewLog returns the layer logging to log.
func NewLog(log *slog.Logger) *Log {
	if log == nil {
		log = slog.Default()
	}
	return &Log{log: log}
}

// Before implements Layer.
func (*Log) Before(*Run) Step { return Continue }

// After implements Layer.
func (l *Log) After(r *Run, err error) Step {
	if err == nil || err == invocation.ErrNotStarted {
		return Result(err)
	}
	level, msg := slog.LevelError, "event failed; committed without a retry (best-effort mode)"
	if fault.IsTerminal(err) {
		level, msg = slog.LevelInfo, "event aborted by a terminal failure"
	}
	l.log.LogAttrs(context.Background(), level, msg, slog.String("key", r.ctx.Key()),
		slog.String("class", fault.ClassOf(err).String()), slog.String("error", err.Error()))
	return Result(err)
}
