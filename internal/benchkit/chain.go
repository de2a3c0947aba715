package benchkit

import (
	"log/slog"
	"os"

	"github.com/prosody-events/prosody-go/core/tracing"

	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/dedup"
	"github.com/prosody-events/prosody-go/core/dedupstore"
	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/middleware"
	"github.com/prosody-events/prosody-go/core/telemetry"
)

// PipelineStacks are the stacks the client builds around h in cfg's mode
// (pipeline by default, with its telemetry broadcast, failure-rate gate and
// monopolization tracker): what the benchmarks that drive the consumer
// directly run, with the scheduler (for consumer.Options.Scheduler, as
// the client passes it). Call the returned stop when done. Deduplication
// (on unless cfg's idempotence_cache_size is 0) keeps its ids in memory,
// as in mock mode; PipelineStacksWith takes another store.
func PipelineStacks(cfg config.Config, h event.Handler) (middleware.Stacks, func(), *middleware.Scheduler) {
	return stacks(cfg, h, telemetry.NewBroadcast(), nil, nil, dedupstore.NewMemory(cfg.IdempotenceTTL))
}

// PipelineStacksWith are PipelineStacks deduplicating with ids in store
// (the Cassandra table, for a benchmark with -cassandra).
func PipelineStacksWith(cfg config.Config, h event.Handler, store dedupstore.Store) (middleware.Stacks, func(), *middleware.Scheduler) {
	return stacks(cfg, h, telemetry.NewBroadcast(), nil, nil, store)
}

// ObservedStacks are PipelineStacksWith whose broadcast has observers
// (the telemetry emitter, the metrics), as a client's has.
func ObservedStacks(cfg config.Config, h event.Handler, store dedupstore.Store, observers ...telemetry.Observer) (middleware.Stacks, func(), *middleware.Scheduler) {
	b := telemetry.NewBroadcast()
	for _, o := range observers {
		b.Subscribe(o)
	}
	return stacks(cfg, h, b, nil, nil, store)
}

// StacksWith are the stacks of cfg's mode with their telemetry broadcast,
// sched as the scheduler (nil: the fair one cfg describes), and sink for
// the failure topic of low-latency mode.
func StacksWith(cfg config.Config, h event.Handler, sched *middleware.Scheduler, sink middleware.DeadLetterSink) (middleware.Stacks, func(), *middleware.Scheduler) {
	return stacks(cfg, h, telemetry.NewBroadcast(), sched, sink, dedupstore.NewMemory(cfg.IdempotenceTTL))
}

// BareStacks are PipelineStacks without the telemetry broadcast, and so
// without the telemetry and monopolization layers and the failure-rate
// gate, and without deduplication: the stack before deferral, for a
// side-by-side measure of what those layers cost.
func BareStacks(cfg config.Config, h event.Handler) (middleware.Stacks, func(), *middleware.Scheduler) {
	return stacks(cfg, h, nil, nil, nil, nil)
}

func stacks(cfg config.Config, h event.Handler, b *telemetry.Broadcast, sched *middleware.Scheduler, sink middleware.DeadLetterSink, ids dedupstore.Store) (middleware.Stacks, func(), *middleware.Scheduler) {
	timeouts := middleware.NewTimeouts(cfg.HandlerTimeout())
	var clock func() int64
	if b != nil {
		clock = b.Now
	}
	if sched == nil {
		sched = middleware.SchedulerOf(&cfg, clock)
	}
	// Warnings only: a benchmark that defers logs every retry otherwise.
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	svc := middleware.Services{Scheduler: sched, Timeouts: timeouts, Broadcast: b, Logger: log, DeadLetters: sink,
		Spans: tracing.Recording()}
	if ids != nil && cfg.IdempotenceCacheSize > 0 {
		svc.Dedup = dedup.New(dedup.Options{Version: cfg.IdempotenceVersion, Group: cfg.GroupID,
			CacheSize: cfg.IdempotenceCacheSize, Store: ids, Logger: log})
	}
	stop := func() {
		timeouts.Stop()
		if b != nil {
			b.Close()
		}
	}
	return middleware.ModeStacks(&cfg, h, svc), stop, sched
}
