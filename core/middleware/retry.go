package middleware

import (
	"context"
	"log/slog"
	"math"
	"math/rand/v2"
	"time"

	"github.com/prosody-events/prosody-go/core/fault"
	"github.com/prosody-events/prosody-go/core/internal/invocation"
)

// Unlimited as RetryPolicy.MaxRetries retries transient failures until they
// succeed or the invocation is cancelled.
const Unlimited = -1

// RetryPolicy says how transient failures are retried.
type RetryPolicy struct {
	// MaxRetries is how many retries follow the first attempt (so
	// MaxRetries+1 attempts in all); Unlimited never gives up.
	MaxRetries int
	// Base and MaxDelay shape the backoff (see Delay).
	Base, MaxDelay time.Duration
	Logger         *slog.Logger
	// Jitter returns a uniform random integer in [0, n); nil uses
	// math/rand/v2. Tests replace it to get repeatable delays.
	Jitter func(n int64) int64
}

// Delay is the backoff after attempt number n (1-based) failed: "full
// jitter", a uniform random number of whole milliseconds in [0, cap) with
// cap = min(2^n × Base, MaxDelay), so that many keys failing together do
// not retry in lockstep. The first retry waits less than 2 × Base. A zero
// cap gives no delay (the original panics there).
func (p RetryPolicy) Delay(n int) time.Duration {
	baseMs := p.Base.Milliseconds()
	capMs := p.MaxDelay.Milliseconds()
	c := capMs
	if n < 62 && baseMs > 0 && baseMs <= math.MaxInt64>>uint(n) {
		c = min(baseMs<<uint(n), capMs)
	}
	if c <= 0 || baseMs <= 0 {
		return 0
	}
	jitter := p.Jitter
	if jitter == nil {
		jitter = rand.Int64N
	}
	return time.Duration(jitter(c)) * time.Millisecond
}

// Retry runs the layers inside again after a transient failure, waiting
// the policy's backoff between attempts, during which the run holds no
// concurrency permit. Permanent and terminal failures, transient ones once
// the retries are spent, and any failure once the invocation is cancelled
// (the partition is going away) are passed outward. A cancellation during
// the backoff ends the run with the cancellation cause. Retries are
// attempts of Failure demand.
type Retry struct{ p RetryPolicy }

// NewRetry returns the retry layer of policy p.
func NewRetry(p RetryPolicy) *Retry { return &Retry{p: p} }

// UsesSlot implements Stateful: the slot counts the attempts.
func (*Retry) UsesSlot() {}

// Before implements Layer.
func (l *Retry) Before(r *Run) Step {
	r.Slot().N = 1
	return Continue
}

// After implements Layer.
func (l *Retry) After(r *Run, err error) Step {
	if err == nil || r.ctx.Err() != nil || err == invocation.ErrNotStarted {
		return Result(err) // (the last: never started, nothing to log)
	}
	slot := r.Slot()
	n := int(slot.N)
	switch fault.ClassOf(err) {
	case fault.ClassTerminal:
		l.log(r, slog.LevelInfo, "event aborted by a terminal failure", n, err)
		return Result(err)
	case fault.ClassPermanent:
		l.log(r, slog.LevelError, "event failed permanently; not retried", n, err)
		return Result(err)
	}
	if l.p.MaxRetries != Unlimited && n > l.p.MaxRetries {
		l.log(r, slog.LevelError, "event still failing; maximum attempts reached", n, err)
		return Result(err)
	}
	delay := l.p.Delay(n)
	if lg := l.p.Logger; lg != nil {
		lg.LogAttrs(context.Background(), slog.LevelWarn, "event failed, will retry",
			slog.String("key", r.ctx.Key()), slog.Int("attempt", n),
			slog.Duration("delay", delay), slog.String("error", err.Error()))
	}
	slot.N++
	r.demand = Failure
	return RetryAfter(delay)
}

func (l *Retry) log(r *Run, level slog.Level, msg string, attempts int, err error) {
	if lg := l.p.Logger; lg != nil {
		lg.LogAttrs(context.Background(), level, msg, slog.String("key", r.ctx.Key()),
			slog.Int("attempts", attempts), slog.String("error", err.Error()))
	}
}
