//go:build capitest

package main

/*
#include "shims.h"
extern void prosodyTest_reentrant_notify(void *ud);
extern void prosodyTest_slow_notify(void *ud);
*/
import "C"

import (
	"context"
	"sync/atomic"
	"time"
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

// reentry is the state of a notify callback that does what a host may do
// there: poll and complete, which continues the key on the same thread and
// queues its next event (so the library wakes the host again from inside
// the callback), while another thread removes the callback.
var reentry struct {
	d     *dispatcher
	depth int
}

//export prosodyTest_reentrant_notify
func prosodyTest_reentrant_notify(unsafe.Pointer) {
	reentry.depth++
	defer func() { reentry.depth-- }()
	if reentry.depth > 1 {
		return
	}
	d := reentry.d
	go d.setNotify(nil, 0) // an unsubscribe or release on another thread
	time.Sleep(20 * time.Millisecond)
	for _, it := range testPoll(d) {
		_ = complete(it.id, C.PROSODY_OUTCOME_OK, nil)
	}
}

// startNext is the completion of an event whose key has a next event: it
// starts that one, as the engine's continuation does.
type startNext struct {
	d    *dispatcher
	next *pendingEvent
}

func (s startNext) Done(error) {
	if s.next != nil {
		s.d.start(s.next, startNext{d: s.d})
	}
}

// testReentrantNotify installs the reentrant notify on d and returns a
// key's first event and a completion that starts its second.
func testReentrantNotify(d *dispatcher) (*pendingEvent, event.Done) {
	reentry.d = d
	d.setNotify(C.prosody_notify_fn(unsafe.Pointer(C.prosodyTest_reentrant_notify)), 0)
	first := testEvent(d, event.NewContext(context.Background(), "k"))
	second := testEvent(d, event.NewContext(context.Background(), "k"))
	return first, startNext{d: d, next: second}
}

// slowNotify records a notify call that takes a while.
var slowNotify struct {
	entered chan struct{}
	left    atomic.Bool
}

//export prosodyTest_slow_notify
func prosodyTest_slow_notify(unsafe.Pointer) {
	close(slowNotify.entered)
	time.Sleep(50 * time.Millisecond)
	slowNotify.left.Store(true)
}

// testSlowNotify installs the slow notify on d.
func testSlowNotify(d *dispatcher) {
	slowNotify.entered = make(chan struct{})
	slowNotify.left.Store(false)
	d.setNotify(C.prosody_notify_fn(unsafe.Pointer(C.prosodyTest_slow_notify)), 0)
}
