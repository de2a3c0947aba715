package middleware

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/prosody-events/prosody-go/core/deferral"
	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/internal/invocation"
	"github.com/prosody-events/prosody-go/core/timerstore"
	"github.com/prosody-events/prosody-go/core/tracing"
)

// Spans is the outermost layer when the core's spans are recorded: each
// message runs in a `receive` span and each timer in a `trigger` span,
// related to the context the event carries (the record's headers, or the
// context stored with the timer) as message_spans and timer_spans say.
// Every layer inside and the handler run in that span: a Go handler's
// context carries it, a host is handed its trace context, and timers
// scheduled from the handler store it, so their trigger spans lead back
// to it.
type Spans struct {
	Messages, Timers tracing.Relation
	// Tracer makes the spans; nil: the core's (tracing.Tracer).
	Tracer trace.Tracer
}

// Before implements Layer.
func (l *Spans) Before(r *Run) Step {
	var ctx context.Context
	var span trace.Span
	switch ev := r.ev.(type) {
	case *event.Message:
		ctx, span = tracing.StartRemote(l.Tracer, tracing.FromHeaders(ev.Headers), l.Messages, "receive",
			attribute.Int("partition", int(ev.Partition)), attribute.Int64("offset", ev.Offset),
			attribute.String("topic", ev.Topic), attribute.String("key", ev.Key))
	case *event.Timer:
		ctx, span = l.trigger(ev, timerstore.Application)
	case *deferral.Retry:
		ctx, span = l.trigger(&ev.Timer, ev.Type)
	default:
		return Continue
	}
	values := trace.ContextWithSpan(r.ctx.Parent(), span)
	if bag := baggage.FromContext(ctx); bag.Len() > 0 {
		values = baggage.ContextWithBaggage(values, bag)
	}
	r.ctx.SetTrace(spanTrace{values})
	return Continue
}

func (l *Spans) trigger(t *event.Timer, typ timerstore.Type) (context.Context, trace.Span) {
	return tracing.StartRemote(l.Tracer, tracing.FieldsOf(t.TraceContext), l.Timers, "trigger",
		attribute.String("key", t.Key), attribute.String("time", t.Time.UTC().Format(time.RFC3339)),
		attribute.String("timer_type", timerTypeName(typ)))
}

// After implements Layer. The span is the one Before put in the
// invocation's context (the layer keeps no slot: a stack has few).
func (l *Spans) After(r *Run, err error) Step {
	switch r.ev.(type) {
	case *event.Message, *event.Timer, *deferral.Retry:
	default:
		return Result(err)
	}
	span := trace.SpanFromContext(r.ctx)
	if err != nil && err != invocation.ErrNotStarted {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
	return Result(err)
}

// spanTrace is an event's span in its invocation's context: what the
// handler's context carries, and the trace context timers scheduled from
// it store.
type spanTrace struct{ ctx context.Context }

func (s spanTrace) TraceSpan() map[string]string { return tracing.FieldsOfContext(s.ctx).Map() }
func (s spanTrace) Value(key any) any            { return s.ctx.Value(key) }

func timerTypeName(t timerstore.Type) string {
	switch t {
	case timerstore.DeferredMessage:
		return "deferred_message"
	case timerstore.DeferredTimer:
		return "deferred_timer"
	}
	return "application"
}
