package middleware

import (
	"log/slog"

	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/dedup"
	"github.com/prosody-events/prosody-go/core/deferral"
	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/monopolization"
	"github.com/prosody-events/prosody-go/core/scheduler"
	"github.com/prosody-events/prosody-go/core/telemetry"
	"github.com/prosody-events/prosody-go/core/tracing"
)

// Services are what the layers of a consumer's stacks need besides the
// configuration. Each layer gets its own through its constructor.
type Services struct {
	// Scheduler hands out the max_concurrency permits and decides which
	// waiting attempt goes next; one is shared by every stack of the
	// consumer.
	Scheduler *Scheduler
	// Timeouts times handler attempts (timeout).
	Timeouts *Timeouts
	// DeadLetters writes to the failure topic in low-latency mode.
	DeadLetters DeadLetterSink
	Logger      *slog.Logger
	// Jitter draws the retries' random delays (RetryPolicy.Jitter); nil
	// uses math/rand/v2.
	Jitter func(n int64) int64
	// Broadcast is the consumer's handler telemetry, published by the
	// innermost layer; the failure-rate gate and the monopolization
	// tracker of pipeline mode subscribe to it. Nil: no telemetry layer,
	// and deferral is never gated off.
	Broadcast *telemetry.Broadcast
	// Dedup skips messages handled before, in pipeline mode; nil (or an
	// idempotence_cache_size of 0) leaves the layer out.
	Dedup *dedup.Deduplicator
	// KeyedState: the client has keyed-state collections, so every stack
	// settles an attempt's state (Transaction), reading the partition's
	// keyed state from the invocation's environment.
	KeyedState bool
	// Spans puts every event in a span of the core's (the outermost
	// layer, Spans); off while the core's tracer is a no-op, when spans
	// would be made for nobody.
	Spans bool
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
// The pipeline's defer layers read the partition's deferral state from
// the invocation's environment (the engine gives every pipeline
// partition one); without it they pass events through.
//
// With the core's spans recorded, every mode starts with Spans.
//
// Every mode ends with the same inner block:
//
//	Cancellation → Scheduler → Timeout → [Transaction] → Telemetry → handler
//
// Timers go through the same stack as messages; the layers that treat
// them apart (the failure topic never takes a timer) look at the event.
func ModeStacks(cfg *config.Config, h event.Handler, svc Services) Stacks {
	retry := RetryPolicy{Base: cfg.RetryBase, MaxDelay: cfg.MaxRetryDelay, Logger: svc.Logger, Jitter: svc.Jitter}
	unlimited := retry
	unlimited.MaxRetries = Unlimited

	inner := []Layer{
		Cancellation{},
		svc.Scheduler,
		svc.Timeouts,
	}
	if svc.KeyedState {
		inner = append(inner, &Transaction{Logger: svc.Logger, OwnAttempt: svc.Timeouts == nil || !svc.Timeouts.Enabled()})
	}
	if svc.Broadcast != nil {
		inner = append(inner, &Telemetry{b: svc.Broadcast, spans: svc.Spans})
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
		undecodable = NewStack(RejectUndecodable{}, NewRetry(unlimited), deadLetter).WithLogger(svc.Logger)
	case config.ModeBestEffort:
		outer = []Layer{NewLog(svc.Logger)}
	default: // pipeline
		policy := &DeferPolicy{
			Enabled: cfg.DeferEnabled,
			Backoff: deferral.Backoff{Base: cfg.DeferBase, MaxDelay: cfg.DeferMaxDelay, Jitter: svc.Jitter},
			Logger:  svc.Logger,
		}
		if svc.Broadcast != nil {
			policy.Gate = deferral.NewGate(cfg.DeferFailureThreshold, cfg.DeferFailureWindow)
			svc.Broadcast.Subscribe(policy.Gate)
		}
		// The defer layers are there even with defer_enabled off, which
		// only stops new deferrals: keys deferred before still drain.
		outer = []Layer{NewRetry(unlimited)} // the durability boundary: retries until success or shutdown
		if svc.Dedup != nil && cfg.IdempotenceCacheSize > 0 {
			outer = append(outer, NewDeduplication(svc.Dedup))
		}
		outer = append(outer, NewMessageDefer(policy), NewTimerDefer(policy))
		if cfg.MonopolizationEnabled && svc.Broadcast != nil {
			tracker := monopolization.NewTracker(cfg.MonopolizationWindow, cfg.MonopolizationCacheSize, cfg.MonopolizationThreshold)
			svc.Broadcast.Subscribe(tracker)
			outer = append(outer, NewMonopolization(tracker, cfg.MonopolizationThreshold))
		}
	}
	if svc.Spans {
		outer = append([]Layer{&Spans{Messages: Relation(cfg.MessageSpans), Timers: Relation(cfg.TimerSpans)}}, outer...)
	}
	return Stacks{
		Events:      NewStack(Handler(h, svc.Scheduler), append(outer, inner...)...).WithLogger(svc.Logger),
		Undecodable: undecodable,
	}
}

// Relation is the span relation a message_spans or timer_spans value names.
func Relation(l config.SpanLinking) tracing.Relation {
	if l == config.SpanFollowsFrom {
		return tracing.FollowsFrom
	}
	return tracing.Child
}

// SchedulerOf is the fair scheduler cfg describes: max_concurrency permits
// and the scheduler_* options, on clock (nil: the system's; a client
// passes its telemetry broadcast's, which costs an atomic load).
func SchedulerOf(cfg *config.Config, clock func() int64) *Scheduler {
	return NewFairScheduler(scheduler.Options{
		Permits:       cfg.MaxConcurrency,
		FailureWeight: cfg.SchedulerFailureWeight,
		MaxWait:       cfg.SchedulerMaxWait,
		WaitWeight:    cfg.SchedulerWaitWeight,
		CacheSize:     cfg.SchedulerCacheSize,
		Clock:         clock,
	})
}
