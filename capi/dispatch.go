package main

/*
#include "shims.h"
*/
import "C"

import (
	"errors"
	"sync"
	"syscall"
	"unsafe"

	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/fault"
	"github.com/prosody-events/prosody-go/core/tracing"
)

// errReleased fails the events of a client the host released.
var errReleased = fault.Terminal(errors.New("prosody: the client was released"))

// dispatcher is a client's host side of event handling. It implements
// event.Handler: each call parks the event in the ready queue and waits for
// the host's completion. The host learns that the queue is non-empty from
// the eventfd or the notify callback, both signalled only when the queue
// goes from empty to non-empty, and drains it with poll: one wake-up and
// one cgo call for many events.
type dispatcher struct {
	efd int

	mu     sync.Mutex
	queue  []readyItem
	head   int // queue[head:] is waiting
	closed bool
	notify C.prosody_notify_fn
	ud     unsafe.Pointer
}

// readyItem is a queued event, or a cancellation notice for it.
type readyItem struct {
	ev     *pendingEvent
	cancel bool
}

func newDispatcher() (*dispatcher, error) {
	fd, err := C.prosodyInt_eventfd()
	if fd < 0 {
		return nil, errorf(C.PROSODY_ERR_INTERNAL, "creating the event fd: %v", err)
	}
	return &dispatcher{efd: int(fd)}, nil
}

// setNotify installs the host's notify callback of a new subscription (nil
// to remove it).
func (d *dispatcher) setNotify(fn C.prosody_notify_fn, ud unsafe.Pointer) {
	d.mu.Lock()
	d.notify, d.ud = fn, ud
	d.mu.Unlock()
}

var one = [8]byte{1} // eventfd increments are native-endian uint64

// push queues an item and wakes the host if the queue was empty.
func (d *dispatcher) push(it readyItem) {
	d.mu.Lock()
	wasEmpty := d.head == len(d.queue)
	d.queue = append(d.queue, it)
	var fn C.prosody_notify_fn
	var ud unsafe.Pointer
	if wasEmpty {
		_, _ = syscall.Write(d.efd, one[:])
		fn, ud = d.notify, d.ud
	}
	d.mu.Unlock()
	if fn != nil {
		C.prosodyInt_call_notify(fn, ud)
	}
}

// poll moves up to len(out) items into out and returns how many. It resets
// the eventfd when it empties the queue; both happen under d.mu, so the fd
// is readable exactly while the queue holds something.
func (d *dispatcher) poll(out []C.prosody_event) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for n < len(out) && d.head < len(d.queue) {
		it := d.queue[d.head]
		d.queue[d.head] = readyItem{}
		d.head++
		if it.cancel {
			if it.ev.state.Load() == stateDone {
				continue // the host already completed it
			}
			out[n] = C.prosody_event{event: C.uint64_t(it.ev.id), kind: C.PROSODY_EVENT_CANCELLED}
		} else {
			it.ev.fill(&out[n])
		}
		n++
	}
	switch {
	case d.head == len(d.queue):
		d.queue, d.head = d.queue[:0], 0
		var buf [8]byte
		_, _ = syscall.Read(d.efd, buf[:])
	case d.head > 1024 && d.head > len(d.queue)/2:
		// The host never quite drains the queue: reclaim the consumed prefix.
		d.queue = d.queue[:copy(d.queue, d.queue[d.head:])]
		d.head = 0
	}
	return n
}

// close stops taking events and fails those the host still holds, so the
// handlers waiting for them return; the client is then closed.
func (d *dispatcher) close() {
	d.mu.Lock()
	d.closed = true
	d.notify, d.ud = nil, nil
	d.queue, d.head = nil, 0
	d.mu.Unlock()
	for _, ev := range events.takeWhere(func(ev *pendingEvent) bool { return ev.disp == d }) {
		ev.finish(errReleased)
	}
}

// OnMessage implements event.Handler.
func (d *dispatcher) OnMessage(ctx *event.Context, m *event.Message) error {
	ev := newPendingEvent(d, ctx, C.PROSODY_EVENT_MESSAGE, m.Topic, m.Key, m.Payload, m.SourceSystem,
		tracing.FromHeaders(m.Headers))
	ev.partition, ev.offset = m.Partition, m.Offset
	if !m.Timestamp.IsZero() {
		ev.timestampMs = m.Timestamp.UnixMilli()
	}
	return d.handle(ev)
}

// OnTimer implements event.Handler.
func (d *dispatcher) OnTimer(ctx *event.Context, t *event.Timer) error {
	ev := newPendingEvent(d, ctx, C.PROSODY_EVENT_TIMER, t.Topic, t.Key, nil, "", tracing.Fields{})
	ev.partition, ev.timeMs = t.Partition, t.Time.UnixMilli()
	return d.handle(ev)
}

// handle hands ev to the host and waits for its outcome. Cancellation does
// not end the wait: it queues a notice, and the host's outcome decides.
func (d *dispatcher) handle(ev *pendingEvent) error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		ev.free()
		return errReleased
	}
	// Registered under d.mu so that close, which sets closed first, sees
	// every event it must fail.
	events.add(ev.id, ev)
	d.mu.Unlock()
	d.push(readyItem{ev: ev})
	// AfterFunc rather than a select on Done: no goroutine, and nothing
	// runs unless the context is cancelled.
	stop := ev.ctx.AfterFunc(func() {
		if ev.state.CompareAndSwap(statePending, stateCancelNotified) {
			d.push(readyItem{ev: ev, cancel: true})
		}
	})
	// The wait is for the host, outside the Go runtime: tell the executor,
	// so this worker stops counting against its eager pool and other ready
	// runs start now rather than when the starvation watchdog notices.
	resume := ev.ctx.Blocking()
	err := <-ev.done
	resume()
	stop()
	return err
}
