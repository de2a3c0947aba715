package middleware

import (
	"context"
	"testing"
	"time"

	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/internal/invocation"
)

// BenchmarkInvoke is the cost of a pipeline stack's layers around a no-op
// handler, per event, with a fresh invocation each (as the engine makes).
func BenchmarkInvoke(b *testing.B) {
	timeouts := NewTimeouts(time.Minute)
	defer timeouts.Stop()
	limiter := NewFIFOScheduler(32)
	s := NewStack(Handler(event.HandlerFuncs{}, limiter),
		NewRetry(RetryPolicy{MaxRetries: Unlimited, Base: time.Millisecond, MaxDelay: time.Second}),
		Cancellation{}, limiter, timeouts)
	scope := invocation.NewScope()
	msg := &event.Message{Key: "k"}
	r := new(Run)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		ctx := invocation.NewInvocation(scope, "k")
		if err := s.Invoke(r, ctx, msg); err != nil {
			b.Fatal(err)
		}
		ctx.Invalidate()
	}
	_ = context.Background
}
