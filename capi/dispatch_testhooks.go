//go:build capitest

package main

/*
#include "shims.h"
extern void prosodyTest_notify(void *ud);
*/
import "C"

import (
	"unsafe"

	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/tracing"
)

// Test hooks for the dispatcher (go test -tags capitest ./capi): test
// files cannot use cgo themselves.

func testEvent(d *dispatcher, ctx *event.Context) *pendingEvent {
	return newPendingEvent(d, ctx, C.PROSODY_EVENT_MESSAGE, "topic", "key", []byte(`{}`), "", tracing.Fields{})
}

// polled is what the host sees of one polled item.
type polled struct {
	id        uint64
	cancelled bool
}

func testPoll(d *dispatcher) []polled {
	out := make([]C.prosody_event, 64)
	n := d.poll(out)
	items := make([]polled, n)
	for i, e := range out[:n] {
		items[i] = polled{uint64(e.event), e.kind == C.PROSODY_EVENT_CANCELLED}
	}
	return items
}

// testNotifies are the Go functions behind the C notify callback the tests
// install; its user_data is an index into them.
var testNotifies []func()

//export prosodyTest_notify
func prosodyTest_notify(ud unsafe.Pointer) { testNotifies[uintptr(ud)]() }

// installTestNotify installs f as d's notify callback, as a subscribe does.
func installTestNotify(d *dispatcher, f func()) *notifier {
	testNotifies = append(testNotifies, f)
	return d.notify.install(C.prosody_notify_fn(unsafe.Pointer(C.prosodyTest_notify)), C.uintptr_t(len(testNotifies)-1))
}

// testComplete completes an event OK, as prosody_event_complete does.
func testComplete(id uint64) error { return complete(id, C.PROSODY_OUTCOME_OK, nil) }
