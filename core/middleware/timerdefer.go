package middleware

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/prosody-events/prosody-go/core/deferral"
	"github.com/prosody-events/prosody-go/core/deferstore"
	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/fault"
	"github.com/prosody-events/prosody-go/core/timerstore"
)

// TimerDefer is MessageDefer for application timers (core-behavior.md
// §4.5): a timer that fails transiently is parked in the store with a
// retry timer of type DeferredTimer, the key's later timers queue behind
// it, and the retry runs the key's earliest parked timer as failure
// demand until it succeeds or fails permanently. What handlers schedule
// while their key's timers are deferred goes to the queue too
// (deferral.Timers, the handlers' view of the partition's timers).
type TimerDefer struct{ policy *DeferPolicy }

// NewTimerDefer returns the layer deciding with policy.
func NewTimerDefer(policy *DeferPolicy) *TimerDefer { return &TimerDefer{policy: policy} }

// UsesSlot implements Stateful: the slot holds the retry timer whose
// parked timer is running inside (V) and its retry count (N).
func (*TimerDefer) UsesSlot() {}

// Before implements Layer.
func (d *TimerDefer) Before(r *Run) Step {
	s := r.Slot()
	if s.V != nil {
		s.V = nil // read first: a write of a pointer costs a barrier while the collector runs
	}
	switch ev := r.ev.(type) {
	case *event.Timer:
		p := deferralOf(r)
		if p == nil || !p.TimerDeferred(ev.Key) {
			return Continue
		}
		return r.io(p.Local, func(ctx context.Context) Step {
			if err := p.Timers.Append(ctx, ev.Key, parked(ev)); err != nil {
				return Result(fmt.Errorf("queueing a timer behind its key's deferred one: %w", err))
			}
			return Result(nil)
		})
	case *deferral.Retry:
		if ev.Type != timerstore.DeferredTimer {
			return Continue
		}
		p := deferralOf(r)
		if p == nil {
			return Result(fault.Terminal(fmt.Errorf("a deferred timer's retry reached a partition without deferral")))
		}
		return r.io(p.Local, func(ctx context.Context) Step {
			t, retries, ok, err := p.Timers.Next(ctx, ev.Key)
			if err != nil {
				return Result(fmt.Errorf("reading the deferred timers of key %q: %w", ev.Key, err))
			}
			if !ok {
				return endOrphan(ctx, ev.Key, p.Timers, p.SetTimerDeferred)
			}
			s.V, s.N = ev, int64(retries)
			r.ev = &event.Timer{Topic: ev.Topic, Partition: ev.Partition, Key: ev.Key, Time: t.Time.Std(), TraceContext: t.Span}
			r.demand = Failure
			return Continue
		})
	}
	return Continue
}

// parked is t as its key's deferral queue holds it.
func parked(t *event.Timer) deferstore.DeferredTimer {
	return deferstore.DeferredTimer{Time: timerstore.TimeOf(t.Time), Span: t.TraceContext}
}

// After implements Layer.
func (d *TimerDefer) After(r *Run, err error) Step {
	s := r.Slot()
	retry, _ := s.V.(*deferral.Retry)
	if retry == nil {
		t, ok := r.ev.(*event.Timer)
		if !ok || err == nil || fault.ClassOf(err) != fault.ClassTransient || !d.policy.allows() {
			return Result(err)
		}
		p := deferralOf(r)
		if p == nil {
			return Result(err)
		}
		return r.io(p.Local, func(ctx context.Context) Step {
			cause := err
			err := d.policy.deferFirst(ctx, p, t.Key, timerstore.DeferredTimer, t.TraceContext,
				p.SetTimerDeferred, func() error { return startQueue(ctx, d.policy, p.Timers, t.Key, "timers", parked(t)) })
			if err != nil {
				return Result(fmt.Errorf("deferring a timer of key %q: %w", t.Key, err))
			}
			d.policy.logger().Info("timer deferred after a transient failure", slog.String("key", t.Key),
				slog.Time("time", t.Time), slog.Any("error", cause))
			return Result(nil)
		})
	}
	at := timerstore.TimeOf(r.ev.(*event.Timer).Time)
	r.ev = retry
	p := deferralOf(r)
	switch {
	case err == nil:
		return r.io(p.Local, func(ctx context.Context) Step { return d.advance(ctx, p, retry, at, nil) })
	case fault.ClassOf(err) == fault.ClassTransient:
		return r.io(p.Local, func(ctx context.Context) Step {
			return d.policy.again(ctx, p, p.Timers, retry, uint32(s.N)+1, err)
		})
	case fault.ClassOf(err) == fault.ClassPermanent:
		d.policy.logger().Warn("deferred timer failed permanently; it is dropped",
			slog.String("key", retry.Key), slog.Time("time", at.Std()), slog.Any("error", err))
		return r.io(p.Local, func(ctx context.Context) Step { return d.advance(ctx, p, retry, at, err) })
	}
	return Result(err)
}

// advance removes the key's earliest parked timer after its retry ended
// for good, and retries the next one at once, if any.
func (d *TimerDefer) advance(ctx context.Context, p *deferral.Partition, retry *deferral.Retry, at timerstore.Time, result error) Step {
	_, more, err := p.Timers.Complete(ctx, retry.Key, at)
	if err != nil {
		return Result(fmt.Errorf("completing a deferred timer of key %q: %w", retry.Key, err))
	}
	return d.policy.moveOn(ctx, p, retry, more, p.SetTimerDeferred, result)
}
