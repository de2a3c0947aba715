package deferstore

import (
	"context"
	"maps"

	"github.com/prosody-events/prosody-go/core/timerstore"
)

// Store opens the defer segments of partitions.
type Store interface {
	// Messages opens the deferred-message segment of one partition.
	Messages(ctx context.Context, group, topic string, partition int32) (MessageSegment, error)
	// Timers opens the deferred-timer segment of one partition.
	Timers(ctx context.Context, group, topic string, partition int32) (TimerSegment, error)
}

// MessageSegment holds, per key, a FIFO of deferred offsets and one shared
// retry count.
type MessageSegment interface {
	// Next is the key's head (smallest) offset and its retry count; ok is
	// false when the key has no deferred offset.
	Next(ctx context.Context, key string) (offset int64, retries uint32, ok bool, err error)
	// DeferFirst makes offset the key's only entry with retry count 0 (the
	// first deferral of a key).
	DeferFirst(ctx context.Context, key string, offset int64) error
	// Append adds offset behind the key's queue, leaving the retry count as
	// it is.
	Append(ctx context.Context, key string, offset int64) error
	// SetRetries stores the key's retry count. It does nothing when the key
	// has no deferred offset, as in the original.
	SetRetries(ctx context.Context, key string, retries uint32) error
	// Complete removes offset from the key's queue. When offsets remain it
	// sets the retry count to 0 and returns the new head (more = true); when
	// none remain the key is deleted.
	Complete(ctx context.Context, key string, offset int64) (next int64, more bool, err error)
	// Delete removes the key entirely (an orphan retry timer found nothing).
	Delete(ctx context.Context, key string) error
}

// DeferredTimer is an application timer parked behind a failing one.
type DeferredTimer struct {
	Time timerstore.Time   // its original time
	Span map[string]string // the trace context stored with it (nil when none)
}

// TimerSegment holds, per key, deferred application timers ordered by
// original time, and one shared retry count.
type TimerSegment interface {
	// Next is the key's head (earliest) timer and its retry count; ok is
	// false when the key has no deferred timer.
	Next(ctx context.Context, key string) (t DeferredTimer, retries uint32, ok bool, err error)
	// DeferFirst makes t the key's only entry with retry count 0.
	DeferFirst(ctx context.Context, key string, t DeferredTimer) error
	// Append adds t to the key's queue (at its place by time), leaving the
	// retry count as it is. A timer already queued at t.Time gets t's span.
	Append(ctx context.Context, key string, t DeferredTimer) error
	// SetRetries stores the key's retry count; nothing when the key has no
	// deferred timer.
	SetRetries(ctx context.Context, key string, retries uint32) error
	// Complete removes the entry at `at`; as MessageSegment.Complete.
	Complete(ctx context.Context, key string, at timerstore.Time) (next DeferredTimer, more bool, err error)
	// Remove deletes one entry (a handler unscheduled that time while the
	// key is deferred), leaving the retry count as it is; removing the last
	// one deletes the key.
	Remove(ctx context.Context, key string, at timerstore.Time) error
	// Times lists the key's deferred times, ascending.
	Times(ctx context.Context, key string) ([]timerstore.Time, error)
	// Delete removes the key entirely.
	Delete(ctx context.Context, key string) error
}

// cloneSpan copies a span so callers cannot mutate stored state; empty spans
// become nil so both stores answer alike (Cassandra stores an empty frozen
// map as null).
func cloneSpan(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return maps.Clone(m)
}

func cloneTimer(t DeferredTimer) DeferredTimer {
	return DeferredTimer{Time: t.Time, Span: cloneSpan(t.Span)}
}
