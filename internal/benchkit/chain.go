package benchkit

import (
	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/middleware"
)

// PipelineChain is the middleware chain the client builds around h in
// pipeline mode from cfg (unlimited retries, cancellation, the concurrency
// limit, handler timeouts): what the benchmarks that drive the consumer
// directly run, with its limiter (for consumer.Options.Limiter, as the
// client passes it). Stop the returned Timeouts when done.
func PipelineChain(cfg config.Config, h event.Handler) (middleware.Invoker, *middleware.Timeouts, *middleware.Limiter) {
	timeouts := middleware.NewTimeouts(cfg.HandlerTimeout())
	limiter := middleware.NewLimiter(cfg.MaxConcurrency)
	return middleware.Chain(middleware.HandlerInvoker(h),
		middleware.Retry(middleware.RetryPolicy{MaxRetries: middleware.Unlimited, Base: cfg.RetryBase, MaxDelay: cfg.MaxRetryDelay}),
		middleware.Cancellation(),
		limiter.Middleware(),
		timeouts.Middleware(),
	), timeouts, limiter
}
