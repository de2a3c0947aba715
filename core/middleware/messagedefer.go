package middleware

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/prosody-events/prosody-go/core/deferral"
	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/fault"
	"github.com/prosody-events/prosody-go/core/timerstore"
	"github.com/prosody-events/prosody-go/core/tracing"
)

// MessageDefer turns a message's transient failure into a durable,
// timer-driven retry (core-behavior.md §4.4), so that its offset can be
// committed and every other key of the partition moves on while the key's
// order is kept:
//
//   - a message of a deferred key is appended to the key's queue in the
//     store, and the layers inside do not run;
//   - a message that fails transiently, when the policy allows, gets a
//     retry timer (first) and becomes the key's queue (then), and succeeds
//     as far as the layers outside are concerned;
//   - the retry timer (a deferral.Retry of type DeferredMessage) reads the
//     key's head message back from Kafka and runs it through the layers
//     inside as failure demand: on success the head leaves the queue and
//     the next one is retried at once; on a transient failure the retry is
//     rescheduled with a growing backoff; a permanent failure drops it.
//
// Its own store, timer and loader errors keep their class and go to the
// outer retry.
type MessageDefer struct{ policy *DeferPolicy }

// NewMessageDefer returns the layer deciding with policy.
func NewMessageDefer(policy *DeferPolicy) *MessageDefer { return &MessageDefer{policy: policy} }

// UsesSlot implements Stateful: the slot holds the retry timer whose
// message is running inside (V) and its retry count (N).
func (*MessageDefer) UsesSlot() {}

// Before implements Layer.
func (d *MessageDefer) Before(r *Run) Step {
	s := r.Slot()
	if s.V != nil {
		s.V = nil // read first: a write of a pointer costs a barrier while the collector runs
	}
	switch ev := r.ev.(type) {
	case *event.Message:
		p := deferralOf(r)
		if p == nil || !p.MessageDeferred(ev.Key) {
			return Continue
		}
		return r.io(p.Local, func(ctx context.Context) Step {
			if err := p.Messages.Append(ctx, ev.Key, ev.Offset); err != nil {
				return Result(fmt.Errorf("queueing a message behind its key's deferred one: %w", err))
			}
			d.policy.logger().Debug("message queued behind its key's deferred one",
				slog.String("key", ev.Key), slog.Int64("offset", ev.Offset))
			return Result(nil)
		})
	case *deferral.Retry:
		if ev.Type != timerstore.DeferredMessage {
			return Continue
		}
		p := deferralOf(r)
		if p == nil {
			return Result(fault.Terminal(fmt.Errorf("a deferred message's retry reached a partition without deferral")))
		}
		return r.io(false, func(ctx context.Context) Step { return d.load(ctx, r, s, p, ev) })
	}
	return Continue
}

// load reads the key's head message for its retry and runs it inside, or
// settles the retry when there is nothing to run.
func (d *MessageDefer) load(ctx context.Context, r *Run, s *Slot, p *deferral.Partition, retry *deferral.Retry) Step {
	key := retry.Key
	offset, retries, ok, err := p.Messages.Next(ctx, key)
	if err != nil {
		return Result(fmt.Errorf("reading the deferred messages of key %q: %w", key, err))
	}
	if !ok {
		return endOrphan(ctx, key, p.Messages, p.SetMessageDeferred)
	}
	msg, err := p.Load(ctx, offset)
	log := d.policy.logger().With(slog.String("key", key), slog.Int64("offset", offset))
	switch {
	case err == nil && msg.Key != key:
		log.Warn("deferred message skipped: the record at its offset has another key", slog.String("record_key", msg.Key))
		return d.advance(ctx, p, retry, offset, nil)
	case err == nil:
		s.V, s.N = retry, int64(retries)
		r.ev, r.demand = msg, Failure
		return Continue
	case fault.ClassOf(err) == fault.ClassPermanent:
		log.Warn("deferred message skipped: it cannot be read back from Kafka", slog.Any("error", err))
		return d.advance(ctx, p, retry, offset, nil)
	case fault.ClassOf(err) == fault.ClassTransient:
		log.Warn("reading a deferred message failed; retrying later", slog.Any("error", err))
		return d.again(ctx, p, retry, retries+1, nil)
	}
	return Result(fmt.Errorf("reading deferred message %d of key %q: %w", offset, key, err))
}

// After implements Layer.
func (d *MessageDefer) After(r *Run, err error) Step {
	s := r.Slot()
	retry, _ := s.V.(*deferral.Retry)
	if retry == nil {
		msg, ok := r.ev.(*event.Message)
		if !ok || err == nil || fault.ClassOf(err) != fault.ClassTransient || !d.policy.allows() {
			return Result(err)
		}
		p := deferralOf(r)
		if p == nil {
			return Result(err)
		}
		return r.io(p.Local, func(ctx context.Context) Step { return d.deferFirst(ctx, p, msg, err) })
	}
	offset := r.ev.(*event.Message).Offset
	r.ev = retry
	p := deferralOf(r)
	switch {
	case err == nil:
		return r.io(p.Local, func(ctx context.Context) Step { return d.advance(ctx, p, retry, offset, nil) })
	case fault.ClassOf(err) == fault.ClassTransient:
		return r.io(p.Local, func(ctx context.Context) Step { return d.again(ctx, p, retry, uint32(s.N)+1, err) })
	case fault.ClassOf(err) == fault.ClassPermanent:
		d.policy.logger().Warn("deferred message failed permanently; it is dropped",
			slog.String("key", retry.Key), slog.Int64("offset", offset), slog.Any("error", err))
		return r.io(p.Local, func(ctx context.Context) Step { return d.advance(ctx, p, retry, offset, err) })
	}
	return Result(err)
}

// deferFirst defers msg, whose key was not deferred (DeferPolicy.deferFirst).
func (d *MessageDefer) deferFirst(ctx context.Context, p *deferral.Partition, msg *event.Message, cause error) Step {
	err := d.policy.deferFirst(ctx, p, msg.Key, timerstore.DeferredMessage, tracing.FromHeaders(msg.Headers).Map(),
		p.SetMessageDeferred, func() error { return startQueue(ctx, d.policy, p.Messages, msg.Key, "messages", msg.Offset) })
	if err != nil {
		return Result(fmt.Errorf("deferring message %d of key %q: %w", msg.Offset, msg.Key, err))
	}
	d.policy.logger().Info("message deferred after a transient failure",
		slog.String("key", msg.Key), slog.Int64("offset", msg.Offset), slog.Any("error", cause))
	return Result(nil)
}

// advance removes the key's head offset after its retry ended for good,
// and retries the next one at once, if any. The outcome is result.
func (d *MessageDefer) advance(ctx context.Context, p *deferral.Partition, retry *deferral.Retry, offset int64, result error) Step {
	_, more, err := p.Messages.Complete(ctx, retry.Key, offset)
	if err != nil {
		return Result(fmt.Errorf("completing deferred message %d of key %q: %w", offset, retry.Key, err))
	}
	return d.policy.moveOn(ctx, p, retry, more, p.SetMessageDeferred, result)
}

// again reschedules the key's retry after its retries-th failure.
func (d *MessageDefer) again(ctx context.Context, p *deferral.Partition, retry *deferral.Retry, retries uint32, cause error) Step {
	return d.policy.again(ctx, p, p.Messages, retry, retries, cause)
}
