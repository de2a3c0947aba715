package main

/*
#include "shims.h"
*/
import "C"

import (
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/prosody-events/prosody-go/core/event"
)

// Event states.
const (
	statePending int32 = iota
	stateCancelNotified
	stateDone
)

// events holds the events the host has not completed yet.
var events = newTable[*pendingEvent](kindEvent)

// pendingEvent is an event handed to the host. Its bytes live in one C
// allocation (buf), so the host reads them in place, without a copy per
// field; buf is freed when the event is finished.
type pendingEvent struct {
	id    uint64
	disp  *dispatcher
	ctx   *event.Context
	kind  C.int32_t
	buf   unsafe.Pointer
	state atomic.Int32
	done  chan error

	// The event's queue of timer operations (timers.go).
	opMu   sync.Mutex
	ops    []func()
	opBusy bool

	partition             int32
	offset, timestampMs   int64
	timeMs                int64
	topicLen, keyLen      int
	payloadLen, sourceLen int
}

func newPendingEvent(d *dispatcher, ctx *event.Context, k C.int32_t, topic, key string, payload []byte, source string) *pendingEvent {
	ev := &pendingEvent{
		id: newID(kindEvent), disp: d, ctx: ctx, kind: k, done: make(chan error, 1),
		topicLen: len(topic), keyLen: len(key), payloadLen: len(payload), sourceLen: len(source),
	}
	size := len(topic) + len(key) + len(payload) + len(source)
	ev.buf = C.malloc(C.size_t(max(size, 1)))
	b := unsafe.Slice((*byte)(ev.buf), size)
	n := copy(b, topic)
	n += copy(b[n:], key)
	n += copy(b[n:], payload)
	copy(b[n:], source)
	return ev
}

// fill writes the host's view of ev.
func (ev *pendingEvent) fill(out *C.prosody_event) {
	at := func(off int) unsafe.Pointer { return unsafe.Add(ev.buf, off) }
	*out = C.prosody_event{
		event:             C.uint64_t(ev.id),
		kind:              ev.kind,
		partition:         C.int32_t(ev.partition),
		offset:            C.int64_t(ev.offset),
		timestamp_ms:      C.int64_t(ev.timestampMs),
		time_ms:           C.int64_t(ev.timeMs),
		topic:             (*C.char)(at(0)),
		topic_len:         C.size_t(ev.topicLen),
		key:               (*C.char)(at(ev.topicLen)),
		key_len:           C.size_t(ev.keyLen),
		payload:           (*C.uint8_t)(at(ev.topicLen + ev.keyLen)),
		payload_len:       C.size_t(ev.payloadLen),
		source_system:     (*C.char)(at(ev.topicLen + ev.keyLen + ev.payloadLen)),
		source_system_len: C.size_t(ev.sourceLen),
	}
}

func (ev *pendingEvent) free() {
	C.free(ev.buf)
	ev.buf = nil
}

// finish frees ev's memory and returns err to its handler. Only the caller
// that took ev from the table may call it, so it runs once.
func (ev *pendingEvent) finish(err error) {
	ev.state.Store(stateDone)
	ev.free()
	ev.done <- err
}
