package timerstore

import "context"

// Type tells which subsystem a timer belongs to; stored as a tinyint.
type Type uint8

const (
	Application     Type = 0 // scheduled by user handlers
	DeferredMessage Type = 1 // retry of a deferred message
	DeferredTimer   Type = 2 // retry of a deferred application timer
)

// Trigger is one stored timer. Its identity is (Key, Time, Type).
type Trigger struct {
	Key  string
	Time Time
	Type Type
	// Span is the W3C trace context of the code that scheduled the timer
	// (traceparent, tracestate, baggage), so firing can continue the trace.
	// It may be nil; stores return nil rather than an empty map.
	Span map[string]string
}

// Store opens timer segments.
type Store interface {
	// Segment opens (creating if absent) the timer segment of one partition, with the configured slab size
	// (whole seconds). If the stored slab size differs, every trigger is re-bucketed into the new size first.
	Segment(ctx context.Context, group, topic string, partition int32, slabSize uint32) (Segment, error)
}

// Segment holds the timers of one (group, topic, partition).
type Segment interface {
	SlabSize() uint32
	Slabs(ctx context.Context) ([]uint32, error)                        // slab ids that may hold timers, ascending
	SlabTriggers(ctx context.Context, slab uint32) ([]Trigger, error)   // every trigger of the slab, all types
	KeyTimes(ctx context.Context, key string, typ Type) ([]Time, error) // the key index, ascending
	Add(ctx context.Context, t Trigger) error                           // slab-list row + slab index + key index (idempotent)
	Remove(ctx context.Context, key string, at Time, typ Type) error    // delete from slab index + key index (idempotent)
	// ClearAndSchedule replaces every timer of (key, typ) with t. The new entry is written BEFORE old ones are deleted,
	// so a crash can duplicate but never lose a timer. It returns the times that were removed.
	ClearAndSchedule(ctx context.Context, t Trigger) ([]Time, error)
	DeleteSlab(ctx context.Context, slab uint32) error // drop a slab-list row (the slab holds no timers)
	// TypeKeys returns every key with at least one timer of type typ in a
	// listed slab that starts at or before through, each once, in no
	// particular order. The deferral layers call it when a partition is
	// assigned: every deferred key has a pending retry timer, due no later
	// than defer_max_delay from when it was set, so the keys it returns up
	// to then are the partition's deferred keys, without reading the slabs
	// of application timers further out.
	TypeKeys(ctx context.Context, typ Type, through Time) ([]string, error)
}

// cloneSpan copies a span so callers cannot mutate stored state; empty spans
// become nil so both stores answer alike.
func cloneSpan(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
