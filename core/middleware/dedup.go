package middleware

import (
	"context"

	"github.com/prosody-events/prosody-go/core/dedup"
	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/fault"
	"github.com/prosody-events/prosody-go/core/filter"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Deduplication skips a message handled before (core-behavior.md §4.3):
// its id in the cache or the store ends the attempt as a success that
// the layers inside never see, and a message whose layers inside succeed
// or fail permanently is recorded before its outcome moves on. With a
// store over the network the write goes out behind the outcome
// (dedup.Deduplicator.Record); a partition let go waits for its writes
// before its final commit (Released), so its next owner finds them; a
// crash before a write lands may have the message handled again, as a
// crash before its outcome would. Timers pass through:
// they are never deduplicated. It sits outside the defer layers, so a
// message deferred, or queued behind a deferred key, counts as seen: its
// retry comes back as a timer, which passes.
type Deduplication struct{ d *dedup.Deduplicator }

// NewDeduplication returns the layer over d.
func NewDeduplication(d *dedup.Deduplicator) *Deduplication { return &Deduplication{d: d} }

// Prefetch implements Prefetcher: the store lookups start at admission.
func (l *Deduplication) Prefetch(msgs []*event.Message) { l.d.Prefetch(msgs) }

// Released implements Prefetcher: the partition's prefetched lookups go,
// and the ids recorded so far are written before its final commit.
func (l *Deduplication) Released(ctx context.Context, topic string, partition int32) error {
	l.d.Forget(topic, partition)
	return l.d.FlushPartition(ctx, topic, partition)
}

// Before implements Layer.
func (l *Deduplication) Before(r *Run) Step {
	msg, ok := r.ev.(*event.Message)
	if !ok {
		return Continue
	}
	id := l.d.ID(msg)
	if l.d.Immediate() {
		if l.d.Seen(msg, id) {
			filtered(r)
			return Result(nil)
		}
		return Continue
	}
	l.d.Check(msg, id, func(seen bool) {
		if seen {
			filtered(r)
			r.Resume(Result(nil))
		} else {
			r.Resume(Continue)
		}
	})
	return Wait
}

// filtered has the receive span (when spans are recorded) say why the
// handler did not run.
func filtered(r *Run) {
	if span := trace.SpanFromContext(r.ctx); span.IsRecording() {
		span.AddEvent("message.filtered",
			trace.WithAttributes(attribute.String("reason", filter.ReasonDeduplicated.String())))
	}
}

// After implements Layer. The id is the one Before used, kept in the
// message.
func (l *Deduplication) After(r *Run, err error) Step {
	msg, ok := r.ev.(*event.Message)
	if !ok || (err != nil && fault.ClassOf(err) != fault.ClassPermanent) {
		return Result(err)
	}
	id := l.d.ID(msg)
	if l.d.Immediate() {
		l.d.Recorded(id)
		return Result(err)
	}
	l.d.Record(msg, id, func() { r.Resume(Result(err)) })
	return Wait
}
