package middleware

import (
	"github.com/prosody-events/prosody-go/core/event"
)

// Limiter bounds how many handler attempts run at once across every
// partition of a client (max_concurrency). It sits inside Retry, so an
// event waiting out a backoff holds no slot.
type Limiter struct{ slots chan struct{} }

// NewLimiter returns a Limiter with n slots (n >= 1).
func NewLimiter(n int) *Limiter {
	if n < 1 {
		n = 1
	}
	return &Limiter{slots: make(chan struct{}, n)}
}

// InUse is the number of slots taken.
func (l *Limiter) InUse() int { return len(l.slots) }

// Middleware takes a slot for the inner call. If the context is cancelled
// while it waits, the cancellation cause is returned without running.
func (l *Limiter) Middleware() Middleware {
	return func(next Invoker) Invoker {
		return func(ctx *event.Context, ev event.Event) error {
			// Try first without waiting: asking for ctx.Done() would make the
			// context allocate its channel even when a slot is free.
			select {
			case l.slots <- struct{}{}:
			default:
				select {
				case l.slots <- struct{}{}:
				case <-ctx.Done():
					return ctx.Cause()
				}
			}
			defer func() { <-l.slots }()
			return next(ctx, ev)
		}
	}
}
