package middleware

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"

	"github.com/prosody-events/prosody-go/core/event"
)

func newCtx() (*event.Context, context.CancelCauseFunc) {
	parent, cancel := context.WithCancelCause(context.Background())
	return event.NewContext(parent, "k"), cancel
}

func TestChainOrderIsOutermostFirst(t *testing.T) {
	var trace []string
	layer := func(name string) Middleware {
		return func(next Invoker) Invoker {
			return func(ctx *event.Context, ev event.Event) error {
				trace = append(trace, name)
				return next(ctx, ev)
			}
		}
	}
	inv := Chain(func(*event.Context, event.Event) error { trace = append(trace, "handler"); return nil },
		layer("outer"), layer("middle"), layer("inner"))
	ctx, cancel := newCtx()
	defer cancel(nil)
	if err := inv(ctx, &event.Message{}); err != nil {
		t.Fatal(err)
	}
	want := []string{"outer", "middle", "inner", "handler"}
	for i := range want {
		if trace[i] != want[i] {
			t.Fatalf("order %v, want %v", trace, want)
		}
	}
}

func TestHandlerInvokerDispatchesByKind(t *testing.T) {
	var msgs, timers atomic.Int32
	inv := HandlerInvoker(event.HandlerFuncs{
		Message: func(*event.Context, *event.Message) error { msgs.Add(1); return nil },
		Timer:   func(*event.Context, *event.Timer) error { timers.Add(1); return nil },
	})
	ctx, cancel := newCtx()
	defer cancel(nil)
	_ = inv(ctx, &event.Message{})
	_ = inv(ctx, &event.Timer{})
	_ = inv(ctx, &event.Message{})
	if msgs.Load() != 2 || timers.Load() != 1 {
		t.Fatalf("messages %d timers %d", msgs.Load(), timers.Load())
	}
}

func TestCancellationRejectsCancelledContext(t *testing.T) {
	var ran bool
	inv := Chain(func(*event.Context, event.Event) error { ran = true; return nil }, Cancellation())
	ctx, cancel := newCtx()
	cancel(event.ErrRevoked)
	if err := inv(ctx, &event.Message{}); !errors.Is(err, event.ErrRevoked) || ran {
		t.Fatalf("err %v ran %v, want ErrRevoked without running", err, ran)
	}
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
