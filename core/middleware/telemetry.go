package middleware

import (
	"time"

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
	b   *telemetry.Broadcast
	now func() time.Time
}

// NewTelemetry returns the layer publishing to b.
func NewTelemetry(b *telemetry.Broadcast) *Telemetry { return &Telemetry{b: b, now: time.Now} }

// Before implements Layer.
func (t *Telemetry) Before(r *Run) Step {
	if t.b.Active() {
		t.publish(r, telemetry.HandlerInvoked)
	}
	return Continue
}

// After implements Layer.
func (t *Telemetry) After(r *Run, err error) Step {
	if t.b.Active() {
		kind := telemetry.HandlerSucceeded
		if err != nil {
			kind = telemetry.HandlerFailed
		}
		t.publish(r, kind)
	}
	return Result(err)
}

func (t *Telemetry) publish(r *Run, kind telemetry.Kind) {
	e := telemetry.Event{Kind: kind, At: t.now(), Failure: r.demand == Failure}
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
