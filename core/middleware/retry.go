package middleware

import (
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/fault"
)

// Unlimited as RetryPolicy.MaxRetries retries transient failures until they
// succeed or the event is cancelled.
const Unlimited = -1

// RetryPolicy says how transient failures are retried.
type RetryPolicy struct {
	// MaxRetries is how many retries follow the first attempt (so
	// MaxRetries+1 attempts in all); Unlimited never gives up.
	MaxRetries int
	// Base is the delay before the first retry; each later delay doubles,
	// capped at MaxDelay.
	Base, MaxDelay time.Duration
	Logger         *slog.Logger
}

// Delay is the backoff before retry number n (1-based), with up to 20%
// random jitter below the nominal value so that many keys failing together
// do not retry in lockstep.
func (p RetryPolicy) Delay(n int) time.Duration {
	d := p.Base
	for i := 1; i < n && d < p.MaxDelay; i++ {
		d *= 2
	}
	if d > p.MaxDelay {
		d = p.MaxDelay
	}
	if d <= 0 {
		return 0
	}
	return d - time.Duration(rand.Int64N(int64(d)/5+1))
}

// Retry re-runs the inner layers after a transient failure, waiting the
// policy's backoff between attempts. Permanent and terminal failures, and
// transient ones once the retries are spent, are returned to the caller. A
// cancellation during the backoff ends the loop with the cancellation cause.
func Retry(p RetryPolicy) Middleware {
	return func(next Invoker) Invoker {
		return func(ctx *event.Context, ev event.Event) error {
			for attempt := 1; ; attempt++ {
				err := next(ctx, ev)
				delay, again := p.after(ctx, attempt, err)
				if !again {
					return err
				}
				if err := sleep(ctx, delay); err != nil {
					return err
				}
			}
		}
	}
}

// after decides what follows attempt number n (1-based) ending with err:
// another attempt after the returned delay, or none (err is the outcome).
// It logs the retry it asks for.
func (p *RetryPolicy) after(ctx *event.Context, n int, err error) (time.Duration, bool) {
	if p == nil || err == nil || fault.ClassOf(err) != fault.ClassTransient {
		return 0, false
	}
	if p.MaxRetries != Unlimited && n > p.MaxRetries {
		return 0, false
	}
	delay := p.Delay(n)
	if p.Logger != nil {
		p.Logger.LogAttrs(ctx, slog.LevelWarn, "handler failed, will retry",
			slog.String("key", ctx.Key()), slog.Int("attempt", n),
			slog.Duration("delay", delay), slog.String("error", err.Error()))
	}
	return delay, true
}

func sleep(ctx *event.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Cause()
	}
}
