package middleware

import (
	"context"
	"log/slog"

	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/state"
)

// Transaction settles an attempt's keyed state by its outcome: a success
// commits what the attempt staged (one atomic write per key, marked with
// the message), a failure discards it. It sits inside the timeout, so the
// attempt's context is the handler's; the commit is part of the attempt
// (a failed commit is a transient failure, retried by the mode).
//
// Before an attempt it recognises a message that an earlier attempt
// already applied — a redelivery after the offset commit was lost in a
// crash, or a retry after a commit whose outcome is unknown — by its key's
// marker, and ends it as a success without calling the handler: its
// writes are in, and applying them again would count the message twice.
// Only messages at or below the lease an earlier owner left, and those
// after an unknown commit outcome, are checked, so the common attempt
// reads nothing.
type Transaction struct {
	Logger *slog.Logger
}

// Before implements Layer.
func (t *Transaction) Before(r *Run) Step {
	p := state.PartitionOf(r.ctx)
	m, ok := r.ev.(*event.Message)
	if p == nil || !ok || !p.NeedsCheck(m.Key, m.Offset) {
		return Continue
	}
	return r.io(p.Local(), func(ctx context.Context) Step {
		applied, err := p.Applied(ctx, m.Key, m.Offset)
		if err != nil {
			return Result(err)
		}
		if applied {
			p.Settled(m.Key, m.Offset)
			t.logger().Debug("message already applied to keyed state; not handled again",
				slog.String("topic", m.Topic), slog.Int("partition", int(m.Partition)),
				slog.Int64("offset", m.Offset), slog.String("key", m.Key))
			return Result(nil)
		}
		return Continue
	})
}

// After implements Layer.
func (t *Transaction) After(r *Run, err error) Step {
	p := state.PartitionOf(r.ctx)
	if p == nil {
		return Result(err)
	}
	tx := p.Take(r.call)
	if tx == nil {
		return Result(err)
	}
	if err != nil {
		tx.Discard()
		return Result(err)
	}
	if !tx.Pending() {
		return Result(nil)
	}
	offset := int64(-1)
	m, isMessage := r.ev.(*event.Message)
	if isMessage {
		offset = m.Offset
	}
	return r.io(p.Local(), func(ctx context.Context) Step {
		cerr := tx.Commit(ctx, offset)
		if cerr != nil && isMessage {
			// The write may have landed: the retry checks the marker.
			p.Unsure(m.Key, m.Offset)
		} else if isMessage {
			p.Settled(m.Key, m.Offset)
		}
		return Result(cerr)
	})
}

func (t *Transaction) logger() *slog.Logger {
	if t.Logger == nil {
		return slog.Default()
	}
	return t.Logger
}
