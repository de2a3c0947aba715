package client

import (
	"context"
	"log/slog"
	"time"

	"github.com/prosody-events/prosody-go/core/dedup"
	"github.com/prosody-events/prosody-go/core/emitter"
	"github.com/prosody-events/prosody-go/core/kafkasec"
	"github.com/prosody-events/prosody-go/core/metrics"
	"github.com/prosody-events/prosody-go/core/tracing"
)

// telemetryFlushBudget bounds how long Unsubscribe waits for the telemetry
// topic: telemetry that cannot be written in this time is not worth
// holding a shutdown for.
const telemetryFlushBudget = 5 * time.Second

// startEmitter starts the telemetry emitter when it is enabled and not in
// mock mode, and makes it the producer's observer of sent records.
func (c *Client) startEmitter() error {
	if !c.cfg.TelemetryEnabled || c.cfg.Mock {
		return nil
	}
	em, err := emitter.New(emitter.Options{
		Brokers:      c.cfg.BootstrapServers,
		Security:     kafkasec.FromConfig(c.cfg),
		Topic:        c.cfg.TelemetryTopic,
		Group:        c.cfg.GroupID,
		SourceSystem: c.cfg.SourceSystemOrGroup(),
		Logger:       c.log,
	})
	if err != nil {
		return err
	}
	c.emitter = em
	if c.producer != nil {
		c.producer.OnDelivered(em.Sent)
	}
	return nil
}

// flushTelemetry writes what the emitter holds, within the flush budget;
// telemetry that cannot be written is logged, not returned: it does not
// fail an unsubscribe.
func (c *Client) flushTelemetry(ctx context.Context) {
	if c.emitter == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, telemetryFlushBudget)
	defer cancel()
	if err := c.emitter.Flush(ctx); err != nil {
		c.log.Warn("telemetry events may be lost: the emitter could not flush", slog.Any("error", err))
	}
}

// closeEmitter stops the emitter after a last flush, and exports the
// core's spans recorded so far.
func (c *Client) closeEmitter(ctx context.Context) {
	spanCtx, cancelSpans := context.WithTimeout(ctx, telemetryFlushBudget)
	defer cancelSpans()
	if err := tracing.Flush(spanCtx); err != nil {
		c.log.Warn("spans may be lost: they could not be exported", slog.Any("error", err))
	}
	if c.emitter == nil {
		return
	}
	if c.producer != nil {
		c.producer.OnDelivered(nil)
	}
	ctx, cancel := context.WithTimeout(ctx, telemetryFlushBudget)
	defer cancel()
	if err := c.emitter.Close(ctx); err != nil {
		c.log.Warn("telemetry events may be lost: the emitter did not finish in time", slog.Any("error", err))
	}
}

// TelemetryStats reports what became of the telemetry events, and false
// when no emitter runs (disabled, or mock mode).
func (c *Client) TelemetryStats() (emitter.Stats, bool) {
	if c.emitter == nil {
		return emitter.Stats{}, false
	}
	return c.emitter.Stats(), true
}

// newMetrics builds the metrics the probe server serves on /metrics.
func (c *Client) newMetrics(dd *dedup.Deduplicator) *metrics.Metrics {
	src := metrics.Sources{DeadLetters: c.deadLettersSent.Load}
	if dd != nil {
		src.Deduplicated = func() int64 { return dd.Stats().Skipped }
	}
	if c.emitter != nil {
		src.TelemetryDropped = func() uint64 { return c.emitter.Stats().Dropped }
	}
	return metrics.New(src)
}
