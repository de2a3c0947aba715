package middleware

import "github.com/prosody-events/prosody-go/core/event"

// Cancellation refuses to start an attempt whose context is already
// cancelled (the partition is being revoked, or the client is shutting
// down), returning the cancellation cause so its class decides what follows:
// a revocation is terminal and leaves the event uncommitted for the next
// owner. Without it, a retry loop woken by its backoff timer could start
// one more attempt after shutdown began.
func Cancellation() Middleware {
	return func(next Invoker) Invoker {
		return func(ctx *event.Context, ev event.Event) error {
			if err := ctx.Check(); err != nil {
				return err
			}
			return next(ctx, ev)
		}
	}
}
