package main

/*
#include "shims.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/prosody-events/prosody-go/core/fault"
)

// outcomeError turns the host's outcome into the handler's result: OK is
// nil, TRANSIENT an unmarked error (the core treats unmarked errors as
// transient), PERMANENT a fault.Permanent error, ABORT a fault.Terminal
// one.
func outcomeError(outcome C.int, msg *C.char) (error, error) {
	text := func(def string) string {
		if msg == nil {
			return def
		}
		return C.GoString(msg)
	}
	switch outcome {
	case C.PROSODY_OUTCOME_OK:
		return nil, nil
	case C.PROSODY_OUTCOME_TRANSIENT:
		return errors.New(text("the handler reported a transient failure")), nil
	case C.PROSODY_OUTCOME_PERMANENT:
		return fault.Permanent(errors.New(text("the handler reported a permanent failure"))), nil
	case C.PROSODY_OUTCOME_ABORT:
		// Terminal: not retried here, not committed.
		return fault.Terminal(errors.New(text("the host aborted the event"))), nil
	}
	return nil, errorf(C.PROSODY_ERR_INVALID_ARGUMENT,
		"invalid outcome %d (want PROSODY_OUTCOME_OK, _TRANSIENT, _PERMANENT or _ABORT)", int(outcome))
}

// minCompletionSize is sizeof(prosody_completion) in the first header that
// passes it: the smallest item size prosody_events_complete accepts.
const minCompletionSize = C.size_t(C.sizeof_prosody_completion)

func complete(id uint64, outcome C.int, msg *C.char) error {
	result, err := outcomeError(outcome, msg)
	if err != nil {
		return err // the event stays pending
	}
	ev, err := events.takeUnless(id, refuseUnheld)
	if err != nil {
		return err
	}
	ev.finish(result)
	return nil
}

// refuseUnheld keeps a call from completing or releasing an event the host
// does not hold. An on_event call's return value is its event's outcome.
// A polled event is the host's only once poll has written it out: a
// handle guessed before that is unknown to the host, and taking the event
// then would free its bytes while poll may still be copying them.
func refuseUnheld(ev *pendingEvent) error {
	if ev.direct {
		return errDirectOutcome
	}
	if !ev.delivered.Load() {
		return invalidHandle(kindEvent, ev.id)
	}
	return nil
}

//export prosodyGo_event_complete
func prosodyGo_event_complete(id C.uint64_t, outcome C.int, msg *C.char, errOut **C.char) (status C.int) {
	defer guard("prosody_event_complete", &status, errOut)
	if err := complete(uint64(id), outcome, msg); err != nil {
		return fail(errOut, fmt.Errorf("prosody_event_complete: %w", err))
	}
	return C.PROSODY_OK
}

//export prosodyGo_events_complete
func prosodyGo_events_complete(items *C.prosody_completion, n, itemSize C.size_t, errOut **C.char) (status C.int) {
	const fn = "prosody_events_complete"
	defer guard(fn, &status, errOut)
	if itemSize < minCompletionSize {
		return fail(errOut, errorf(C.PROSODY_ERR_INVALID_ARGUMENT,
			"%s: item_size is %d: pass sizeof(prosody_completion) (at least %d)", fn, uint64(itemSize), uint64(minCompletionSize)))
	}
	if n == 0 {
		return C.PROSODY_OK
	}
	if items == nil {
		return fail(errOut, nullArg(fn, "items"))
	}
	var first error
	for i := range int(n) {
		// The host's items may be larger than ours (a newer header): read
		// the fields this library knows.
		it := (*C.prosody_completion)(unsafe.Add(unsafe.Pointer(items), uintptr(i)*uintptr(itemSize)))
		if err := complete(uint64(it.event), C.int(it.outcome), it.message); err != nil && first == nil {
			first = fmt.Errorf("prosody_events_complete: item %d: %w", i, err)
		}
	}
	if first != nil {
		return fail(errOut, first)
	}
	return C.PROSODY_OK
}

//export prosodyGo_event_should_cancel
func prosodyGo_event_should_cancel(id C.uint64_t, out *C.int, errOut **C.char) (status C.int) {
	defer guard("prosody_event_should_cancel", &status, errOut)
	if out == nil {
		return fail(errOut, nullArg("prosody_event_should_cancel", "cancelled"))
	}
	ev, err := events.get(uint64(id))
	if err != nil {
		return fail(errOut, fmt.Errorf("prosody_event_should_cancel: %w", err))
	}
	*out = 0
	if ev.ctx.ShouldCancel() {
		*out = 1
	}
	return C.PROSODY_OK
}

//export prosodyGo_event_release
func prosodyGo_event_release(id C.uint64_t, errOut **C.char) (status C.int) {
	defer guard("prosody_event_release", &status, errOut)
	ev, err := events.takeUnless(uint64(id), refuseUnheld)
	if err != nil {
		return fail(errOut, fmt.Errorf("prosody_event_release: %w", err))
	}
	ev.finish(errors.New("prosody: the event was released without completion"))
	return C.PROSODY_OK
}
