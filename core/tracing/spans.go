package tracing

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Relation is how a span relates to the remote context it comes from.
type Relation uint8

const (
	// Child: the span's parent is the remote span, in the same trace.
	Child Relation = iota
	// FollowsFrom: the span is a new root, linked to the remote span.
	FollowsFrom
)

// followsFrom is the attribute of the link of a FollowsFrom span.
var followsFrom = attribute.String("opentracing.ref_type", "follows_from")

// Start options of the spans StartRemote makes.
var (
	consumerKind = trace.WithSpanKind(trace.SpanKindConsumer)
	newRoot      = trace.WithNewRoot()
)

// StartRemote starts the span name with tr (nil: the core's Tracer) for
// work that comes from the remote context f, related to it by rel; the
// baggage of f goes on either way.
//
// The attributes are set on the started span rather than passed as a
// start option: the SDK copies start options' attributes into a config of
// their own before copying them into the span, and that copy was a third
// of the allocations of a receive span. No sampler the OTEL_* variables
// choose reads them.
func StartRemote(tr trace.Tracer, f Fields, rel Relation, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if tr == nil {
		tr = Tracer()
	}
	remote := f.Context(context.Background())
	sc := trace.SpanContextFromContext(remote)
	// A FollowsFrom span is a new root that keeps the remote baggage and
	// links to the remote span, if there is one.
	var ctx context.Context
	var span trace.Span
	switch {
	case rel == Child:
		ctx, span = tr.Start(remote, name, consumerKind)
	case !sc.IsValid():
		ctx, span = tr.Start(withBaggageOf(remote), name, consumerKind, newRoot)
	default:
		ctx, span = tr.Start(withBaggageOf(remote), name, consumerKind, newRoot,
			trace.WithLinks(trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{followsFrom}}))
	}
	if span.IsRecording() {
		span.SetAttributes(attrs...)
	}
	return ctx, span
}

// withBaggageOf is a context with ctx's baggage and nothing else.
func withBaggageOf(ctx context.Context) context.Context {
	return baggage.ContextWithBaggage(context.Background(), baggage.FromContext(ctx))
}

// FieldsOfContext is the trace context of ctx (its span and baggage) in
// wire form.
func FieldsOfContext(ctx context.Context) Fields {
	var f Fields
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		carrier := propagation.MapCarrier{}
		propagation.TraceContext{}.Inject(ctx, carrier)
		f.TraceParent, f.TraceState = carrier[TraceParent], sc.TraceState().String()
	}
	if bag := baggage.FromContext(ctx); bag.Len() > 0 {
		f.Baggage = bag.String()
	}
	return f
}

// FieldsOfSpan is the trace context of a span in wire form (no baggage).
func FieldsOfSpan(sc trace.SpanContext) Fields {
	if !sc.IsValid() {
		return Fields{}
	}
	return FieldsOfContext(trace.ContextWithSpanContext(context.Background(), sc))
}
