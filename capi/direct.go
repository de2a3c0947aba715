package main

/*
#include "shims.h"
*/
import "C"

import (
	"errors"
	"unsafe"

	"github.com/prosody-events/prosody-go/core/event"
)

// directHandler is the event.Handler of a subscription with an on_event
// callback: the engine's goroutine that runs an event calls the host's C
// function itself and takes its return value as the outcome. Nothing is
// queued and nobody waits for a completion call, so an event costs the
// engine's own path plus one C call and the copy of its bytes.
//
// The event is still registered under its handle for the call's duration,
// for prosody_event_should_cancel and the timer operations.
type directHandler struct {
	d  *dispatcher
	fn C.uintptr_t // the prosody_event_fn
	ud C.uintptr_t
}

// The call's frame (shims.h) sits at the front of the event's C buffer, so
// nothing is lent from Go memory and nothing more is allocated.
const frameSize = int(unsafe.Sizeof(C.prosodyInt_call_frame{}))

// errDirectOutcome is why an event handled by on_event cannot be completed
// by a call.
var errDirectOutcome = errorf(C.PROSODY_ERR_STATE,
	"the event is being handled by the on_event callback, whose return value is its outcome")

// OnMessage implements event.Handler.
func (h *directHandler) OnMessage(ctx *event.Context, m *event.Message) error {
	return h.call(h.d.messageEvent(frameSize, ctx, m))
}

// OnTimer implements event.Handler.
func (h *directHandler) OnTimer(ctx *event.Context, t *event.Timer) error {
	return h.call(h.d.timerEvent(frameSize, ctx, t))
}

// call runs the host's callback for ev and returns its outcome.
func (h *directHandler) call(ev *pendingEvent) error {
	ev.direct = true
	events.add(ev)
	f := (*C.prosodyInt_call_frame)(ev.buf)
	ev.fill(&f.view)
	f.message = nil
	outcome := C.prosodyInt_call_event(h.fn, h.ud, C.uintptr_t(uintptr(ev.buf)))
	result, err := outcomeError(C.int(outcome), f.message)
	if err != nil {
		// Not one of the outcomes: the header counts it as transient.
		result = errors.New("on_event returned an invalid outcome")
	}
	// Only this call takes a direct event out of the table: complete,
	// release and the client's release leave it.
	_, _ = events.take(ev.id)
	ev.free()
	return result
}
