package middleware

import (
	"go.opentelemetry.io/otel/trace"

	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/telemetry"
)

// Telemetry is the innermost layer: it tells the consumer's broadcast
// when a handler call starts and how it ends, for messages and timers,
// both demand classes, every partition. Being innermost, the time between
// the two is handler time inside the concurrency permit, which is what
// the monopolization tracker must measure; the failure-rate gate counts
// the outcomes. With nobody subscribed it costs an atomic load.
type Telemetry struct {
	b *telemetry.Broadcast
	// spans: the events carry the span of their call (the Spans layer
	// is in the stack).
	spans bool
}

// NewTelemetry returns the layer publishing to b.
func NewTelemetry(b *telemetry.Broadcast) *Telemetry { return &Telemetry{b: b} }

// Before implements Layer. The call's start is kept in the run for its
// outcome, which carries it (an observer of outcomes alone then needs no
// HandlerInvoked event, nor a lookup for it).
func (t *Telemetry) Before(r *Run) Step {
	if t.b.Active() {
		r.invoked = t.b.Now()
		if t.b.WantsInvoked() {
			t.publish(r, telemetry.HandlerInvoked, r.invoked, 0, nil)
		}
	}
	return Continue
}

// After implements Layer.
func (t *Telemetry) After(r *Run, err error) Step {
	if t.b.Active() && r.invoked != 0 {
		kind := telemetry.HandlerSucceeded
		if err != nil {
			kind = telemetry.HandlerFailed
		}
		t.publish(r, kind, t.b.Now(), r.invoked, err)
		r.invoked = 0
	}
	return Result(err)
}

func (t *Telemetry) publish(r *Run, kind telemetry.Kind, at, start int64, err error) {
	e := telemetry.Event{Kind: kind, At: at, Start: start, Failure: r.demand == Failure, Subject: r.ev, Err: err}
	if t.spans {
		e.Span = trace.SpanContextFromContext(r.call)
	}
	var ok bool
	if e.Topic, e.Partition, e.Key, e.Timer, ok = handled(r.ev); ok {
		t.b.Publish(e)
	}
}

// handled is where ev, an event a handler takes (a message or a timer),
// comes from; ok is false for any other event.
func handled(ev event.Event) (topic string, partition int32, key string, timer, ok bool) {
	switch e := ev.(type) {
	case *event.Message:
		return e.Topic, e.Partition, e.Key, false, true
	case *event.Timer:
		return e.Topic, e.Partition, e.Key, true, true
	}
	return "", 0, "", false, false
}
