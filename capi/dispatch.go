package main

/*
#include "shims.h"
*/
import "C"

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/fault"
	"github.com/prosody-events/prosody-go/core/tracing"
)

// errReleased fails the events of a client the host released.
var errReleased = fault.Terminal(errors.New("prosody: the client was released"))

// errExpired is the outcome of an attempt the dispatcher stopped waiting
// for after its timeout. The timeout layer reports it as the timeout (a
// transient failure), the attempt's context being cancelled by it.
var errExpired = fault.Transient(errors.New("the handler did not finish and was cancelled"))

// dispatcher is a client's host side of event handling. It implements
// event.Handler: each call parks the event in the ready queue and waits for
// the host's completion. The host learns that the queue is non-empty from
// the wake fd (wakefd_*.go) or the notify callback, both signalled only
// when the queue goes from empty to non-empty, and drains it with poll: one wake-up and
// one cgo call for many events.
type dispatcher struct {
	wfd wakeFD

	mu     sync.Mutex
	queue  []readyItem
	head   int // queue[head:] is waiting
	closed bool

	notify notifiers // the host's notify callback (notify.go)

	// fdMu orders the wake fd's signals, made after mu is released, with the
	// closing of the fd (closeFd takes it exclusively), so that no write
	// reaches the fd number after it is closed and perhaps reused. Only the
	// write holds it: the notify callback may call back into the library.
	fdMu     sync.RWMutex
	fdClosed bool

	// inFlight counts the events handed to the host and not finished; the
	// cancellation watch runs while it is above zero.
	inFlight atomic.Int64
	watching atomic.Bool

	// owned are the client's state handles, cursors and readers
	// (state.go, reader.go), released with it.
	owned owned
}

// readyItem is a queued event, or a notice about it.
type readyItem struct {
	ev *pendingEvent
	// notice is PROSODY_EVENT_CANCELLED or _EXPIRED for a notice, 0 for
	// the event itself.
	notice C.int32_t
}

func newDispatcher() (*dispatcher, error) {
	fd, err := openWakeFD()
	if err != nil {
		return nil, errorf(C.PROSODY_ERR_INTERNAL, "creating the event fd: %v", err)
	}
	d := &dispatcher{wfd: fd}
	d.notify.init()
	return d, nil
}

// closeFd closes the event fd once no write is using it; later writes do
// nothing. Call it after close.
func (d *dispatcher) closeFd() {
	d.fdMu.Lock()
	defer d.fdMu.Unlock()
	if !d.fdClosed {
		d.fdClosed = true
		d.wfd.close()
	}
}

// push queues an item and wakes the host if the queue was empty.
func (d *dispatcher) push(it readyItem) {
	d.mu.Lock()
	w := d.pushLocked(it)
	d.mu.Unlock()
	w.call()
}

// pushLocked queues an item. When the queue was empty it returns the
// wake-up to make once d.mu is released: the wake fd's write is a system
// call, and the engine's goroutines and the host's threads all queue here.
// The caller holds d.mu.
//
// Writing the fd after unlocking can leave it readable with nothing queued
// (the host polled the item in between); the host's next poll returns
// nothing and resets it. It never leaves an item queued behind an unreadable
// fd: the poll that resets the fd takes every item queued before it.
func (d *dispatcher) pushLocked(it readyItem) wake {
	wasEmpty := d.head == len(d.queue)
	d.queue = append(d.queue, it)
	if !wasEmpty {
		return wake{}
	}
	return wake{d: d}
}

// wake is a wake-up of the host to make once d.mu is released: the wake
// fd's signal and the notify callback.
type wake struct {
	d *dispatcher // nil: no wake-up
}

func (w wake) call() {
	d := w.d
	if d == nil {
		return
	}
	d.fdMu.RLock()
	if !d.fdClosed {
		d.wfd.signal()
	}
	d.fdMu.RUnlock()
	d.notify.call()
}

// wakeIfPending wakes the host if items are queued: a new subscription's
// notify callback is otherwise first called only when the queue next goes
// from empty to non-empty.
func (d *dispatcher) wakeIfPending() {
	d.mu.Lock()
	pending := d.head < len(d.queue)
	d.mu.Unlock()
	if pending {
		wake{d: d}.call()
	}
}

// poll moves up to len(out) items into out and returns how many. It resets
// the wake fd when it empties the queue; both happen under d.mu, so the fd
// is readable exactly while the queue holds something.
func (d *dispatcher) poll(out eventArray) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		// Released: the fd may be closed (and its number reused) by now.
		return 0
	}
	n := 0
	for n < out.n && d.head < len(d.queue) {
		it := d.queue[d.head]
		d.queue[d.head] = readyItem{}
		d.head++
		if it.notice == 0 && it.ev.state.Load() == stateExpired {
			// Expired before the host saw it: its outcome is given
			// already, and the host must not start a handler for a
			// failed attempt. Nobody will complete it (a call is refused
			// an event not yet delivered): it ends here, and its EXPIRED
			// notice, behind it, is dropped as done.
			if ev, err := events.take(it.ev.id); err == nil {
				ev.finish(nil)
			}
			continue
		}
		if it.notice != 0 {
			if it.ev.state.Load() == stateDone {
				continue // the host already completed it
			}
			*out.at(n) = C.prosody_event{size: C.size_t(unsafe.Sizeof(C.prosody_event{})), event: C.uint64_t(it.ev.id), kind: it.notice}
		} else {
			it.ev.fill(out.at(n))
			// Only now may a call take it (refuseUnheld): fill reads
			// the bytes that taking it frees.
			it.ev.delivered.Store(true)
		}
		n++
	}
	switch {
	case d.head == len(d.queue):
		d.queue, d.head = d.queue[:0], 0
		d.wfd.reset()
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
	d.queue, d.head = nil, 0
	d.mu.Unlock()
	d.notify.close()
	// Not the events of on_event calls under way: each call ends its own
	// event, and the host is still reading its bytes.
	for _, ev := range events.takeWhere(func(ev *pendingEvent) bool { return ev.disp == d && !ev.direct }) {
		ev.finish(errReleased)
	}
}

// StartMessage implements event.AsyncHandler: the message is queued for
// the host and the engine goes on; the host's completion calls done on the
// host's thread, which continues the key right there. No goroutine waits
// for the host.
func (d *dispatcher) StartMessage(ctx *event.Context, _ *event.Message, prepared event.Prepared, done event.Done) {
	ev := prepared.(*pendingEvent)
	ev.ctx = ctx
	if f, ok := hostTrace(ctx, tracing.Fields{}); ok {
		// Prepared before its receive span began: the host runs the
		// handler in the span.
		ev.retrace(f)
	}
	d.start(ev, done)
}

// PrepareMessage implements event.AsyncHandler: the message's copy for the
// host is made here, on the goroutine that admits it, rather than on the
// host's thread when a slot frees up.
func (d *dispatcher) PrepareMessage(m *event.Message) event.Prepared {
	return d.messageEvent(0, nil, m)
}

// OnMessage implements event.Handler, for callers that run the
// synchronous chain.
func (d *dispatcher) OnMessage(ctx *event.Context, m *event.Message) error {
	return d.wait(d.messageEvent(0, ctx, m))
}

// OnTimer implements event.Handler.
func (d *dispatcher) OnTimer(ctx *event.Context, t *event.Timer) error {
	return d.wait(d.timerEvent(0, ctx, t))
}

// messageEvent and timerEvent copy an event for the host, after front free
// bytes of its C buffer (newPendingEvent).
func (d *dispatcher) messageEvent(front int, ctx *event.Context, m *event.Message) *pendingEvent {
	trace, _ := hostTrace(ctx, tracing.FromHeaders(m.Headers))
	ev := newPendingEvent(front, d, ctx, C.PROSODY_EVENT_MESSAGE, m.Topic, m.Key, m.Payload, m.SourceSystem, trace)
	ev.partition, ev.offset = m.Partition, m.Offset
	if !m.Timestamp.IsZero() {
		ev.timestampMs = m.Timestamp.UnixMilli()
	}
	return ev
}

func (d *dispatcher) timerEvent(front int, ctx *event.Context, t *event.Timer) *pendingEvent {
	// The timer's handler runs in the trace context stored when it was
	// scheduled.
	trace, _ := hostTrace(ctx, tracing.FieldsOf(t.TraceContext))
	ev := newPendingEvent(front, d, ctx, C.PROSODY_EVENT_TIMER, t.Topic, t.Key, nil, "", trace)
	ev.partition, ev.timeMs = t.Partition, t.Time.UnixMilli()
	return ev
}

// giveUp reports an expired attempt's outcome. It runs the layers' after
// steps and the engine's completion on the watch's goroutine, where a
// panic would end the process. The run contains its own (a layer's ends
// the event as a middleware.LayerPanic, any other is logged); this
// recover is for an outcome receiver that is not a run.
func (d *dispatcher) giveUp(ev *pendingEvent) {
	defer func() {
		if r := recover(); r != nil {
			_ = internalError("expiring an event", r)
		}
	}()
	ev.done.Done(errExpired)
}

// doneChan receives an outcome for a goroutine waiting on it.
type doneChan chan error

func (c doneChan) Done(err error) { c <- err }

// wait hands ev to the host and waits for its outcome.
func (d *dispatcher) wait(ev *pendingEvent) error {
	ch := make(doneChan, 1)
	d.start(ev, ch)
	// The wait is for the host, outside the Go runtime: tell the executor,
	// so this worker stops counting against its eager pool and other ready
	// runs start now rather than when the starvation watchdog notices.
	resume := ev.ctx.Blocking()
	err := <-ch
	resume()
	return err
}

// start hands ev to the host; done gets the host's outcome. Cancellation
// does not end the event: it queues a notice, and the host's outcome
// decides.
func (d *dispatcher) start(ev *pendingEvent, done event.Done) {
	ev.done = done
	d.mu.Lock()
	if d.closed {
		// The host was released (a consumer may still be starting or
		// draining): the event never reaches a handler, and the next
		// owner of its partition handles it, without an error logged
		// for each one.
		d.mu.Unlock()
		ev.free()
		done.Done(event.ErrNotStarted)
		return
	}
	// Registered and queued under d.mu, so that close, which sets closed
	// first, sees every event it must fail, and so that the cancellation
	// watch, which finds events in the table, cannot queue a notice for an
	// event before the event itself; counted before the host can see it, so
	// a completion never makes inFlight negative.
	events.add(ev)
	d.inFlight.Add(1)
	w := d.pushLocked(readyItem{ev: ev})
	d.mu.Unlock()
	w.call()
	if !d.watching.Load() && d.watching.CompareAndSwap(false, true) {
		d.watchCancellation()
	}
}

// noticeTick is how often events the host holds are checked for
// cancellation while any are held.
const noticeTick = 5 * time.Millisecond

// watchCancellation arranges for the events the host holds to be checked
// for cancellation every noticeTick, for as long as it holds any. Checking
// costs an atomic load or two per held event, where subscribing each event
// to its context's cancellation cost more than the rest of its trip
// through the engine; a notice is a hint to stop soon, so a few
// milliseconds of delay do not matter.
//
// An event whose attempt ran past the client's timeout is not waited for
// any longer: the handler was promised to be stopped there, and a host
// handler that ignores cancellation would otherwise hold its key and its
// concurrency permit until shutdown. The dispatcher ends the attempt
// itself (expire), as a transient failure, and tells the host to stop the
// handler (an EXPIRED notice). Cancellations for revocation and shutdown
// only get a CANCELLED notice: the partition's shutdown budget bounds
// those, and the host's outcome still decides.
func (d *dispatcher) watchCancellation() {
	time.AfterFunc(noticeTick, func() {
		var cancelled, expired []*pendingEvent
		events.each(func(ev *pendingEvent) {
			if ev.disp != d || ev.direct || ev.ctx.Err() == nil {
				return
			}
			if ev.ctx.Cause() == event.ErrTimeout {
				if ev.expire() {
					expired = append(expired, ev)
				}
				return
			}
			if ev.state.CompareAndSwap(statePending, stateCancelNotified) {
				cancelled = append(cancelled, ev)
			}
		})
		for _, ev := range cancelled {
			d.push(readyItem{ev: ev, notice: C.PROSODY_EVENT_CANCELLED})
		}
		for _, ev := range expired {
			// The notice first: the outcome's continuation may start the
			// key's next event, which the host must see after it. Timer
			// operations of the expired event fail from the moment it
			// is marked expired (timerOp), before the notice is queued.
			d.push(readyItem{ev: ev, notice: C.PROSODY_EVENT_EXPIRED})
			d.giveUp(ev)
		}
		if d.inFlight.Load() == 0 {
			d.watching.Store(false)
			// A start that came in between saw watching still true.
			if d.inFlight.Load() == 0 || !d.watching.CompareAndSwap(false, true) {
				return
			}
		}
		d.watchCancellation()
	})
}
