package middleware

import (
	"errors"
	"sync/atomic"
	"testing"

	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/fault"
	"github.com/prosody-events/prosody-go/core/internal/invocation"
)

func TestCancellation(t *testing.T) {
	tests := []struct {
		name      string
		revoke    bool  // before the attempt
		handler   error // what the handler returns
		midway    bool  // the handler revokes before returning
		wantRun   bool
		wantClass fault.Class
		wantIs    error
	}{
		{"a live invocation runs", false, nil, false, true, 0, nil},
		{"a cancelled invocation does not run", true, nil, false, false, fault.ClassTerminal, invocation.ErrRevoked},
		{"a transient failure while shutting down is terminal", false, errors.New("interrupted"), true, true, fault.ClassTerminal, invocation.ErrRevoked},
		{"a permanent failure keeps its class", false, fault.Permanent(errors.New("bad")), true, true, fault.ClassPermanent, nil},
		{"a transient failure of a live invocation stays transient", false, errors.New("flaky"), false, true, fault.ClassTransient, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := newInv()
			defer cancel(nil)
			if tt.revoke {
				cancel(invocation.ErrRevoked)
			}
			ran := false
			h := handlerFunc(func(*event.Context, event.Event) error {
				ran = true
				if tt.midway {
					cancel(invocation.ErrRevoked)
				}
				return tt.handler
			})
			err := invoke(NewStack(Handler(h, nil), Cancellation{}), ctx, &event.Message{})
			if ran != tt.wantRun {
				t.Fatalf("handler ran: %v, want %v", ran, tt.wantRun)
			}
			if tt.handler == nil && !tt.revoke {
				if err != nil {
					t.Fatalf("err = %v", err)
				}
				return
			}
			if fault.ClassOf(err) != tt.wantClass || (tt.wantIs != nil && !errors.Is(err, tt.wantIs)) {
				t.Fatalf("err = %v (%v), want %v wrapping %v", err, fault.ClassOf(err), tt.wantClass, tt.wantIs)
			}
			if tt.handler != nil && !errors.Is(err, tt.handler) {
				t.Fatalf("err = %v lost the handler's error", err)
			}
		})
	}
}

// An event whose partition stopped starting work while it was on its way
// through the outer layers does not reach its handler; a retry of an
// attempt that did start still does (core-behavior.md §3.9: draining
// starts no new or queued work, and in-flight work goes on).
func TestCancellationStartsNothingOnceThePartitionStops(t *testing.T) {
	var stopping atomic.Bool
	ctx, cancel := newInv()
	defer cancel(nil)
	ctx.SetEnv(&invocation.Env{Stopping: &stopping}, nil)
	calls := 0
	h := handlerFunc(func(*event.Context, event.Event) error {
		calls++
		if calls == 1 {
			stopping.Store(true) // the drain begins during the first attempt
			return errors.New("flaky")
		}
		return nil
	})
	stack := NewStack(Handler(h, nil), NewRetry(RetryPolicy{MaxRetries: Unlimited}), Cancellation{})
	if err := invoke(stack, ctx, &event.Message{}); err != nil || calls != 2 {
		t.Fatalf("an attempt that started: err = %v after %d calls, want its retry to run and succeed", err, calls)
	}
	calls = 0
	err := invoke(stack, ctx, &event.Message{})
	if !errors.Is(err, invocation.ErrNotStarted) || calls != 0 {
		t.Fatalf("an event not started when the partition stopped: err = %v after %d calls, want ErrNotStarted and no call", err, calls)
	}
}

// refuseOnce is an outer layer that refuses the event's first pass
// transiently before any handler ran (as Monopolization does with
// deferral gated off, or MessageDefer.Before when its Append fails), and
// the partition stops starting work meanwhile.
type refuseOnce struct {
	n        *int
	stopping *atomic.Bool
}

func (l refuseOnce) Before(r *Run) Step {
	*l.n++
	if *l.n == 1 {
		l.stopping.Store(true) // the drain begins during the backoff
		return Result(fault.Transient(errors.New("refused before the handler")))
	}
	return Continue
}
func (refuseOnce) After(_ *Run, err error) Step { return Result(err) }

// An event whose handler never ran does not reach it once the partition
// stops starting work, even on a retry after an outer layer refused it
// (found in review: the first version of the rule went by the attempt's
// demand, which the retry had raised).
func TestCancellationRefusesARetryWhoseHandlerNeverRan(t *testing.T) {
	var stopping atomic.Bool
	ctx, cancel := newInv()
	defer cancel(nil)
	ctx.SetEnv(&invocation.Env{Stopping: &stopping}, nil)
	calls, passes := 0, 0
	h := handlerFunc(func(*event.Context, event.Event) error { calls++; return nil })
	sched := NewFIFOScheduler(4)
	stack := NewStack(Handler(h, sched), NewRetry(RetryPolicy{MaxRetries: Unlimited}),
		refuseOnce{n: &passes, stopping: &stopping}, Cancellation{}, sched)
	err := invoke(stack, ctx, &event.Message{})
	if calls != 0 {
		t.Fatalf("handler started %d times after the partition stopped starting work (err %v); its first attempt had never run", calls, err)
	}
}
