//go:build capitest

package main

/*
#include "shims.h"
*/
import "C"

import (
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
