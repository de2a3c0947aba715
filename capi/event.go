package main

/*
#include "shims.h"
*/
import "C"

import (
	"sync/atomic"
	"unsafe"

	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/tracing"
)

// Event states.
const (
	statePending int32 = iota
	stateCancelNotified
	// stateExpired: the dispatcher has ended the attempt (its timeout);
	// the event stays in the table, its bytes readable, until the host
	// lets go of it, and the host's outcome is ignored.
	stateExpired
	stateDone
)

// events holds the events the host has not completed yet.
var events = newEventTable()

// pendingEvent is an event handed to the host. Its bytes live in one C
// allocation (buf), so the host reads them in place, without a copy per
// field; buf is freed when the event is finished.
type pendingEvent struct {
	id    uint64
	disp  *dispatcher
	ctx   *event.Context
	kind  C.int32_t
	buf   unsafe.Pointer // the C allocation
	data  unsafe.Pointer // where in buf the byte ranges start
	state atomic.Int32
	// direct: handled by a call of the host's on_event (direct.go), which
	// alone ends it; set before the event is in the table.
	direct bool
	// delivered: a poll has written the event out to the host, so the
	// host holds its handle. Set once fill is done; it never goes back.
	delivered atomic.Bool
	// done receives the outcome (set by dispatcher.start).
	done event.Done

	// The event's queue of timer operations (timers.go).
	ops opQueue

	partition           int32
	offset, timestampMs int64
	timeMs              int64
	// lens are the lengths of the byte ranges laid out one after another
	// in buf, in the order of the fields enum.
	lens [numFields]int
}

// The byte ranges of an event, in their order in buf.
const (
	fieldTopic = iota
	fieldKey
	fieldPayload
	fieldSource
	fieldTraceParent
	fieldTraceState
	fieldBaggage
	numFields
)

// newPendingEvent copies an event into a new C buffer, after front free
// bytes (the room directHandler keeps for the call's view).
func newPendingEvent(front int, d *dispatcher, ctx *event.Context, k C.int32_t, topic, key string,
	payload []byte, source string, trace tracing.Fields) *pendingEvent {
	ev := &pendingEvent{id: newID(kindEvent), disp: d, ctx: ctx, kind: k}
	ev.lens = [numFields]int{len(topic), len(key), len(payload), len(source),
		len(trace.TraceParent), len(trace.TraceState), len(trace.Baggage)}
	size := 0
	for _, n := range ev.lens {
		size += n
	}
	ev.buf = C.malloc(C.size_t(max(front+size, 1)))
	ev.data = unsafe.Add(ev.buf, front)
	b := unsafe.Slice((*byte)(ev.data), size)
	n := copy(b, topic)
	n += copy(b[n:], key)
	n += copy(b[n:], payload)
	n += copy(b[n:], source)
	n += copy(b[n:], trace.TraceParent)
	n += copy(b[n:], trace.TraceState)
	copy(b[n:], trace.Baggage)
	return ev
}

// retrace replaces the trace context of ev, an event prepared before its
// span existed (front 0), with f: its bytes move to a new buffer.
func (ev *pendingEvent) retrace(f tracing.Fields) {
	old, oldLens := ev.data, ev.lens
	oldBuf := ev.buf
	ev.lens[fieldTraceParent], ev.lens[fieldTraceState], ev.lens[fieldBaggage] = len(f.TraceParent), len(f.TraceState), len(f.Baggage)
	kept := oldLens[fieldTopic] + oldLens[fieldKey] + oldLens[fieldPayload] + oldLens[fieldSource]
	size := kept + len(f.TraceParent) + len(f.TraceState) + len(f.Baggage)
	ev.buf = C.malloc(C.size_t(max(size, 1)))
	ev.data = ev.buf
	b := unsafe.Slice((*byte)(ev.data), size)
	n := copy(b, unsafe.Slice((*byte)(old), kept))
	n += copy(b[n:], f.TraceParent)
	n += copy(b[n:], f.TraceState)
	copy(b[n:], f.Baggage)
	C.free(oldBuf)
}

// hostTrace is the trace context a host runs an event's handler in: the
// core's span when its spans are recorded, else what the event carries.
func hostTrace(ctx *event.Context, carried tracing.Fields) (tracing.Fields, bool) {
	if ctx == nil || !tracing.Recording() {
		return carried, false
	}
	f := tracing.FieldsOfContext(ctx)
	if f.TraceParent == "" {
		return carried, false
	}
	if f.Baggage == "" {
		f.Baggage = carried.Baggage
	}
	return f, true
}

// minEventSize is sizeof(prosody_event) in the first header whose events
// carry their size: the smallest item size poll accepts.
const minEventSize = C.size_t(C.sizeof_prosody_event)

// eventArray is the host's poll array: n items of stride bytes, stride
// being sizeof(prosody_event) as the host's header declares it.
type eventArray struct {
	base   unsafe.Pointer
	n      int
	stride uintptr
}

// at returns item i for the library to fill. A host built against a newer
// header has room for fields this library does not know: they are zeroed.
// (poll refuses strides below this library's struct, the first versioned
// one; once the struct grows, an older host's smaller items will need the
// fields that fit copied instead.)
func (a eventArray) at(i int) *C.prosody_event {
	dst := unsafe.Add(a.base, uintptr(i)*a.stride)
	if extra := a.stride - unsafe.Sizeof(C.prosody_event{}); extra > 0 {
		clear(unsafe.Slice((*byte)(unsafe.Add(dst, unsafe.Sizeof(C.prosody_event{}))), extra))
	}
	return (*C.prosody_event)(dst)
}

// fill writes the host's view of ev.
func (ev *pendingEvent) fill(out *C.prosody_event) {
	var at [numFields]unsafe.Pointer
	off := 0
	for i, n := range ev.lens {
		at[i] = unsafe.Add(ev.data, off)
		off += n
	}
	size := func(f int) C.size_t { return C.size_t(ev.lens[f]) }
	*out = C.prosody_event{
		size:              C.size_t(unsafe.Sizeof(*out)),
		event:             C.uint64_t(ev.id),
		kind:              ev.kind,
		partition:         C.int32_t(ev.partition),
		offset:            C.int64_t(ev.offset),
		timestamp_ms:      C.int64_t(ev.timestampMs),
		time_ms:           C.int64_t(ev.timeMs),
		topic:             (*C.char)(at[fieldTopic]),
		topic_len:         size(fieldTopic),
		key:               (*C.char)(at[fieldKey]),
		key_len:           size(fieldKey),
		payload:           (*C.uint8_t)(at[fieldPayload]),
		payload_len:       size(fieldPayload),
		source_system:     (*C.char)(at[fieldSource]),
		source_system_len: size(fieldSource),
		traceparent:       (*C.char)(at[fieldTraceParent]),
		traceparent_len:   size(fieldTraceParent),
		tracestate:        (*C.char)(at[fieldTraceState]),
		tracestate_len:    size(fieldTraceState),
		baggage:           (*C.char)(at[fieldBaggage]),
		baggage_len:       size(fieldBaggage),
	}
}

// Discard implements event.Prepared: the attempt never reached the host.
func (ev *pendingEvent) Discard() { ev.free() }

func (ev *pendingEvent) free() {
	C.free(ev.buf)
	ev.buf, ev.data = nil, nil
}

// finish frees ev's memory and returns err to its handler, unless the
// attempt has expired, whose outcome is given already. Only the caller
// that took ev from the table may call it, so it runs once.
func (ev *pendingEvent) finish(err error) {
	expired := ev.state.Swap(stateDone) == stateExpired
	ev.free()
	ev.disp.inFlight.Add(-1)
	if !expired {
		ev.done.Done(err)
	}
}

// givenUp is ErrInvalidContext once the dispatcher has given the attempt
// up (expired): the attempt's outcome, which invalidates its context, may
// not have been reported yet, and the host's timer operations fail from
// the moment of expiry on.
func (ev *pendingEvent) givenUp() error {
	if ev.state.Load() == stateExpired {
		return event.ErrInvalidContext
	}
	return nil
}

// expire marks an event the host still holds as given up on; true when
// this call did it, and the caller then reports the attempt's outcome.
// It loses to a completion that got there first (finish).
func (ev *pendingEvent) expire() bool {
	for {
		switch st := ev.state.Load(); st {
		case statePending, stateCancelNotified:
			if ev.state.CompareAndSwap(st, stateExpired) {
				return true
			}
		default:
			return false
		}
	}
}
