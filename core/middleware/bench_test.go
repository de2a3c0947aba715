package middleware

import (
	"context"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

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

// BenchmarkSpans is the cost of the receive span around a no-op handler,
// recorded by the SDK with a batch processor and an exporter that drops
// what it is given (the engine benchmark's traced reader).
func BenchmarkSpans(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	s := NewStack(Handler(event.HandlerFuncs{}, nil), &Spans{Tracer: tp.Tracer("bench")})
	scope := invocation.NewScope()
	msg := &event.Message{Key: "k", Topic: "t", Partition: 3, Offset: 12345}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		r := new(Run)
		for pb.Next() {
			ctx := invocation.NewInvocation(scope, "k")
			if err := s.Invoke(r, ctx, msg); err != nil {
				b.Fatal(err)
			}
			ctx.Invalidate()
		}
	})
}
