package middleware

import (
	"time"

	"github.com/prosody-events/prosody-go/core/event"
)

// Timeout gives each attempt its own context, cancelled with
// event.ErrTimeout after d. The handler sees ShouldCancel become true and
// should return; its result then counts as a transient failure unless it
// succeeded anyway. d <= 0 means no limit.
func Timeout(d time.Duration) Middleware {
	return func(next Invoker) Invoker {
		if d <= 0 {
			return next
		}
		return func(ctx *event.Context, ev event.Event) error {
			attempt, done := ctx.WithTimeout(d)
			defer done()
			err := next(attempt, ev)
			if err != nil && attempt.Err() != nil && ctx.Err() == nil {
				// The handler gave up because of the timeout (or failed for
				// some other reason while timed out): report the timeout, so the
				// outcome is transient and the log says why.
				return timeoutError{err}
			}
			return err
		}
	}
}

// timeoutError keeps the handler's own error in the chain while classifying
// as the timeout.
type timeoutError struct{ err error }

func (e timeoutError) Error() string   { return "handler timed out: " + e.err.Error() }
func (e timeoutError) Unwrap() []error { return []error{event.ErrTimeout, e.err} }
