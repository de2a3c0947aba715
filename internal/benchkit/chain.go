package benchkit

import (
	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/middleware"
)

// PipelineStacks are the stacks the client builds around h in cfg's mode
// (pipeline by default): what the benchmarks that drive the consumer
// directly run, with the limiter (for consumer.Options.Limiter, as the
// client passes it). Stop the returned Timeouts when done.
func PipelineStacks(cfg config.Config, h event.Handler) (middleware.Stacks, *middleware.Timeouts, *middleware.Limiter) {
	timeouts := middleware.NewTimeouts(cfg.HandlerTimeout())
	limiter := middleware.NewLimiter(cfg.MaxConcurrency)
	return middleware.ModeStacks(&cfg, h, middleware.Services{Limiter: limiter, Timeouts: timeouts}), timeouts, limiter
}
