// Package tracing carries OpenTelemetry context across Kafka records: the
// W3C trace context (traceparent, tracestate) and baggage headers, as the
// original core writes and reads them.
package tracing

import (
	"context"
	"unicode/utf8"

	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/prosody-events/prosody-go/core/event"
)

// Header names.
const (
	TraceParent = "traceparent"
	TraceState  = "tracestate"
	Baggage     = "baggage"
)

// Fields is a trace context in its wire form; an empty field is absent.
type Fields struct {
	TraceParent, TraceState, Baggage string
}

// Map is f as a stored timer keeps it: the fields present, by header name
// (tracestate beside a traceparent only, as on the wire); nil when f is
// empty.
func (f Fields) Map() map[string]string {
	if f == (Fields{}) {
		return nil
	}
	m := make(map[string]string, 3)
	if f.TraceParent != "" {
		m[TraceParent] = f.TraceParent
		m[TraceState] = f.TraceState
	}
	if f.Baggage != "" {
		m[Baggage] = f.Baggage
	}
	return m
}

// FieldsOf reads back a map made by Map.
func FieldsOf(m map[string]string) Fields {
	return Fields{TraceParent: m[TraceParent], TraceState: m[TraceState], Baggage: m[Baggage]}
}

// propagator reads the context a host (or a remote producer) hands us.
var propagator = propagation.NewCompositeTextMapPropagator(propagation.Baggage{}, propagation.TraceContext{})

// Context returns parent carrying the span context and baggage of f, so that
// a send made with it is a child of the host's current span. Malformed
// fields are ignored, as the W3C propagator does.
func (f Fields) Context(parent context.Context) context.Context {
	if f == (Fields{}) {
		return parent
	}
	carrier := propagation.MapCarrier{}
	if f.TraceParent != "" {
		carrier[TraceParent] = f.TraceParent
		carrier[TraceState] = f.TraceState
	}
	if f.Baggage != "" {
		carrier[Baggage] = f.Baggage
	}
	return propagator.Extract(parent, carrier)
}

// Inject returns the headers that carry ctx's trace context, in the order
// of the original producer: baggage when non-empty, then traceparent and
// tracestate when the span context is valid (tracestate even when empty).
// It returns nil when there is nothing to carry, which is the common case
// and allocates nothing.
func Inject(ctx context.Context) []event.Header {
	sc := trace.SpanContextFromContext(ctx)
	bag := baggage.FromContext(ctx)
	if !sc.IsValid() && bag.Len() == 0 {
		return nil
	}
	var hs []event.Header
	if bag.Len() > 0 {
		hs = append(hs, event.Header{Key: Baggage, Value: []byte(bag.String())})
	}
	if sc.IsValid() {
		carrier := propagation.MapCarrier{}
		propagation.TraceContext{}.Inject(ctx, carrier)
		hs = append(hs,
			event.Header{Key: TraceParent, Value: []byte(carrier[TraceParent])},
			event.Header{Key: TraceState, Value: []byte(sc.TraceState().String())})
	}
	return hs
}

// FromHeaders reads a record's trace context: the first header of each
// name, ignoring values that are not UTF-8 (as the original's extraction
// does).
func FromHeaders(hs []event.Header) Fields {
	var f Fields
	var seenParent, seenState, seenBaggage bool
	for _, h := range hs {
		var dst *string
		switch h.Key {
		case TraceParent:
			if seenParent {
				continue
			}
			seenParent, dst = true, &f.TraceParent
		case TraceState:
			if seenState {
				continue
			}
			seenState, dst = true, &f.TraceState
		case Baggage:
			if seenBaggage {
				continue
			}
			seenBaggage, dst = true, &f.Baggage
		default:
			continue
		}
		if utf8.Valid(h.Value) {
			*dst = string(h.Value)
		}
	}
	return f
}
