package benchkit

import (
	"log/slog"
	"os"

	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/middleware"
	"github.com/prosody-events/prosody-go/core/telemetry"
)

// PipelineStacks are the stacks the client builds around h in cfg's mode
// (pipeline by default, with its telemetry broadcast, failure-rate gate and
// monopolization tracker): what the benchmarks that drive the consumer
// directly run, with the limiter (for consumer.Options.Limiter, as the
// client passes it). Call the returned stop when done.
func PipelineStacks(cfg config.Config, h event.Handler) (middleware.Stacks, func(), *middleware.Limiter) {
	return stacks(cfg, h, telemetry.NewBroadcast())
}

// BareStacks are PipelineStacks without the telemetry broadcast, and so
// without the telemetry and monopolization layers and the failure-rate
// gate: the stack before deferral, for a side-by-side measure of what
// those layers cost.
func BareStacks(cfg config.Config, h event.Handler) (middleware.Stacks, func(), *middleware.Limiter) {
	return stacks(cfg, h, nil)
}

func stacks(cfg config.Config, h event.Handler, b *telemetry.Broadcast) (middleware.Stacks, func(), *middleware.Limiter) {
	timeouts := middleware.NewTimeouts(cfg.HandlerTimeout())
	limiter := middleware.NewLimiter(cfg.MaxConcurrency)
	// Warnings only: a benchmark that defers logs every retry otherwise.
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	svc := middleware.Services{Limiter: limiter, Timeouts: timeouts, Broadcast: b, Logger: log}
	stop := func() {
		timeouts.Stop()
		if b != nil {
			b.Close()
		}
	}
	return middleware.ModeStacks(&cfg, h, svc), stop, limiter
}
