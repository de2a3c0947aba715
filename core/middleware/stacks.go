package middleware

import (
	"log/slog"

	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/event"
)

// Services are what the layers of a consumer's stacks need besides the
// configuration. Each layer gets its own through its constructor.
type Services struct {
	// Limiter is the concurrency limit (max_concurrency), shared by every
	// stack of the consumer.
	Limiter *Limiter
	// Timeouts times handler attempts (timeout).
	Timeouts *Timeouts
	// DeadLetters writes to the failure topic in low-latency mode.
	DeadLetters DeadLetterSink
	Logger      *slog.Logger
	// Jitter draws the retries' random delays (RetryPolicy.Jitter); nil
	// uses math/rand/v2.
	Jitter func(n int64) int64
}

// Stacks are a consumer's stacks: the one every message and timer goes
// through, and the one for undecodable records (nil: they are committed
// as skipped).
type Stacks struct {
	Events      *Stack
	Undecodable *Stack
}

// ModeStacks assembles the stacks of cfg's mode around h (core-behavior.md
// §4.1, outermost first). This is the one place where layers are put in
// order; the layers specified but not built yet are named where they go.
//
// Every mode ends with the same inner block:
//
//	Cancellation → Scheduler → Timeout → Telemetry → handler
//
// where the concurrency limit holds the scheduler's place until the fair
// scheduler replaces it, and telemetry is still to come. Timers go
// through the same stack as messages; the layers that treat them apart
// (the failure topic never takes a timer) look at the event.
func ModeStacks(cfg *config.Config, h event.Handler, svc Services) Stacks {
	retry := RetryPolicy{Base: cfg.RetryBase, MaxDelay: cfg.MaxRetryDelay, Logger: svc.Logger, Jitter: svc.Jitter}
	unlimited := retry
	unlimited.MaxRetries = Unlimited

	inner := []Layer{
		Cancellation{},
		svc.Limiter, // Scheduler: the fair scheduler takes this place.
		svc.Timeouts,
		// Telemetry: the telemetry issue adds it here.
	}
	var outer []Layer
	var undecodable *Stack
	switch cfg.Mode {
	case config.ModeLowLatency:
		limited := retry
		limited.MaxRetries = cfg.MaxRetries
		deadLetter := NewDeadLetter(cfg.FailureTopic, cfg.GroupID, svc.DeadLetters, svc.Logger)
		outer = []Layer{
			NewRetry(unlimited), // the durability boundary: a failed dead-letter write runs the stack again
			deadLetter,
			NewRetry(limited),
		}
		undecodable = NewStack(RejectUndecodable{}, NewRetry(unlimited), deadLetter)
	case config.ModeBestEffort:
		outer = []Layer{NewLog(svc.Logger)}
	default: // pipeline
		outer = []Layer{
			NewRetry(unlimited), // the durability boundary: retries until success or shutdown
			// Deduplication (omitted when idempotence_cache_size is 0): the deduplication issue.
			// MessageDefer, then TimerDefer: the deferral issue.
			// Monopolization (omitted when disabled): the deferral issue.
		}
	}
	return Stacks{
		Events:      NewStack(Handler(h, svc.Limiter), append(outer, inner...)...),
		Undecodable: undecodable,
	}
}
