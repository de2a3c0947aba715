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
// crash, or a retry after a commit that landed and something outside it
// failed — by its key's marker, and ends it as a success without calling
// the handler: its writes are in, and applying them again would count the
// message twice. Only messages up to the lease an earlier owner left, and
// retries (failure demand), are checked, so a first attempt reads nothing.
type Transaction struct {
	Logger *slog.Logger
	// OwnAttempt: no layer outside gives each attempt a context of its own
	// (the handler timeout is off), so this one does. A handle must end
	// with its attempt, not live on into the next.
	OwnAttempt bool
}

// Before implements Layer.
func (t *Transaction) Before(r *Run) Step {
	p := state.PartitionOf(r.ctx)
	if p == nil {
		return Continue
	}
	m, ok := r.ev.(*event.Message)
	if !ok {
		// A timer runs on settled state too (no marker: timers are not
		// redelivered by Kafka).
		if key := r.ev.EventKey(); p.HasPartial(key) {
			return r.io(p.Local(), func(ctx context.Context) Step {
				if err := p.SettlePartial(ctx, key); err != nil {
					return Result(err)
				}
				return t.enter(r)
			})
		}
		return t.enter(r)
	}
	if !p.NeedsCheck(m.Key, m.Offset, r.demand == Failure) {
		return t.enter(r)
	}
	return r.io(p.Local(), func(ctx context.Context) Step {
		applied, err := p.Applied(ctx, m.Key, m.Offset)
		if err != nil {
			return Result(err)
		}
		if applied {
			t.logger().Debug("message already applied to keyed state; not handled again",
				slog.String("topic", m.Topic), slog.Int("partition", int(m.Partition)),
				slog.Int64("offset", m.Offset), slog.String("key", m.Key))
			return Result(nil)
		}
		return t.enter(r)
	})
}

func (t *Transaction) enter(r *Run) Step {
	if t.OwnAttempt {
		r.call = r.ctx.Attempt()
	}
	return Continue
}

// After implements Layer.
func (t *Transaction) After(r *Run, err error) Step {
	p := state.PartitionOf(r.ctx)
	if p == nil {
		return Result(err)
	}
	// The attempt ends before it is settled: a handle opened or used from
	// now on (a host task left running) fails instead of writing into a
	// transaction nobody will commit.
	attempt := r.call
	if attempt != r.ctx {
		attempt.Invalidate()
	}
	if t.OwnAttempt {
		r.call = r.ctx
	}
	tx := p.Take(attempt)
	if tx == nil {
		return Result(err)
	}
	if err == nil && r.ctx.Err() != nil {
		// Revoked or shut down: the partition may have a new owner
		// already, whose handling of the redelivered event must not race
		// this commit.
		err = r.ctx.Cause()
	}
	if err != nil {
		tx.Discard()
		return Result(err)
	}
	if !tx.Pending() {
		return Result(nil)
	}
	offset := int64(-1)
	if m, ok := r.ev.(*event.Message); ok {
		offset = m.Offset
	}
	return r.io(p.Local(), func(ctx context.Context) Step { return Result(tx.Commit(ctx, offset)) })
}

func (t *Transaction) logger() *slog.Logger {
	if t.Logger == nil {
		return slog.Default()
	}
	return t.Logger
}
