package middleware

import (
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
			t.publish(r, telemetry.HandlerInvoked, r.invoked, 0)
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
		t.publish(r, kind, t.b.Now(), r.invoked)
		r.invoked = 0
	}
	return Result(err)
}

func (t *Telemetry) publish(r *Run, kind telemetry.Kind, at, start int64) {
	e := telemetry.Event{Kind: kind, At: at, Start: start, Failure: r.demand == Failure}
	switch ev := r.ev.(type) {
	case *event.Message:
		e.Topic, e.Partition, e.Key = ev.Topic, ev.Partition, ev.Key
	case *event.Timer:
		e.Topic, e.Partition, e.Key, e.Timer = ev.Topic, ev.Partition, ev.Key, true
	default:
		return
	}
	t.b.Publish(e)
}
