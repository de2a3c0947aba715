package main

/*
#include "shims.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"time"
	"unsafe"

	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/fault"
	"github.com/prosody-events/prosody-go/core/timerstore"
)

// Timer operations on an event (prosody_event_schedule and friends). Each
// checks its arguments and the handle at once, then runs on a goroutine
// with the event's *event.Context, so the core decides validity: once the
// host completed the event the context is invalid (ErrInvalidContext), and
// once it is cancelled the operation fails with the cancellation cause.
//
// The operations of one event run one at a time, in the order the host
// called them, and complete in that order (pendingEvent.enqueue): a host
// may call clear_scheduled then schedule without waiting in between.

// timerError gives err the status of its fault class: permanent, terminal,
// or else transient. A context error from the store means the event's
// context was cancelled or invalidated during the operation; its cause (a
// classified core error) then says why.
func timerError(fn string, ctx *event.Context, err error) error {
	if err == nil {
		return nil
	}
	var ae *apiError
	if errors.As(err, &ae) {
		return err
	}
	if fault.IsCancellation(err) {
		if cause := ctx.Check(); cause != nil {
			err = cause
		}
	}
	status := C.int(C.PROSODY_ERR_TRANSIENT)
	switch fault.ClassOf(err) {
	case fault.ClassPermanent:
		status = C.PROSODY_ERR_PERMANENT
	case fault.ClassTerminal:
		status = C.PROSODY_ERR_TERMINAL
	}
	return &apiError{status: status, msg: fn + ": " + err.Error()}
}

// eventFor checks a timer operation's event handle.
func eventFor(fn string, id C.uint64_t) (*pendingEvent, error) {
	ev, err := events.get(uint64(id))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fn, err)
	}
	return ev, nil
}

// timerOp is a timer operation that completes through a
// prosody_completion_fn.
func timerOp(fn string, id C.uint64_t, cb C.prosody_completion_fn, ud C.uintptr_t, errOut **C.char,
	op func(*event.Context) error) C.int {
	done, err := newCompletion(fn, "cb", cb, ud)
	if err != nil {
		return fail(errOut, err)
	}
	ev, err := eventFor(fn, id)
	if err != nil {
		return fail(errOut, err)
	}
	ctx := ev.ctx
	ev.enqueue(func() {
		var err error
		defer func() {
			if r := recover(); r != nil {
				err = internalError(fn, r)
			}
			done.call(err)
		}()
		if err = ev.givenUp(); err == nil {
			err = op(ctx)
		}
		err = timerError(fn, ctx, err)
	})
	return C.PROSODY_OK
}

//export prosodyGo_event_schedule
func prosodyGo_event_schedule(id C.uint64_t, ms C.int64_t, cb C.prosody_completion_fn, ud C.uintptr_t,
	errOut **C.char) (status C.int) {
	const fn = "prosody_event_schedule"
	defer guard(fn, &status, errOut)
	at := time.UnixMilli(int64(ms))
	if err := timerstore.CheckTime(at); err != nil {
		return fail(errOut, errorf(C.PROSODY_ERR_INVALID_ARGUMENT, "%v", err))
	}
	return timerOp(fn, id, cb, ud, errOut, func(ctx *event.Context) error { return ctx.Schedule(at) })
}

//export prosodyGo_event_clear_and_schedule
func prosodyGo_event_clear_and_schedule(id C.uint64_t, ms C.int64_t, cb C.prosody_completion_fn, ud C.uintptr_t,
	errOut **C.char) (status C.int) {
	const fn = "prosody_event_clear_and_schedule"
	defer guard(fn, &status, errOut)
	at := time.UnixMilli(int64(ms))
	if err := timerstore.CheckTime(at); err != nil {
		return fail(errOut, errorf(C.PROSODY_ERR_INVALID_ARGUMENT, "%v", err))
	}
	return timerOp(fn, id, cb, ud, errOut, func(ctx *event.Context) error { return ctx.ClearAndSchedule(at) })
}

//export prosodyGo_event_unschedule
func prosodyGo_event_unschedule(id C.uint64_t, ms C.int64_t, cb C.prosody_completion_fn, ud C.uintptr_t,
	errOut **C.char) (status C.int) {
	const fn = "prosody_event_unschedule"
	defer guard(fn, &status, errOut)
	at := time.UnixMilli(int64(ms))
	if err := timerstore.CheckTime(at); err != nil {
		return fail(errOut, errorf(C.PROSODY_ERR_INVALID_ARGUMENT, "%v", err))
	}
	return timerOp(fn, id, cb, ud, errOut, func(ctx *event.Context) error { return ctx.Unschedule(at) })
}

//export prosodyGo_event_clear_scheduled
func prosodyGo_event_clear_scheduled(id C.uint64_t, cb C.prosody_completion_fn, ud C.uintptr_t,
	errOut **C.char) (status C.int) {
	const fn = "prosody_event_clear_scheduled"
	defer guard(fn, &status, errOut)
	return timerOp(fn, id, cb, ud, errOut, (*event.Context).ClearScheduled)
}

//export prosodyGo_event_scheduled
func prosodyGo_event_scheduled(id C.uint64_t, cb C.prosody_times_fn, ud C.uintptr_t, errOut **C.char) (status C.int) {
	const fn = "prosody_event_scheduled"
	defer guard(fn, &status, errOut)
	if cb == nil {
		return fail(errOut, nullArg(fn, "cb"))
	}
	ev, err := eventFor(fn, id)
	if err != nil {
		return fail(errOut, err)
	}
	ctx := ev.ctx
	ev.enqueue(func() {
		var ms []C.int64_t
		var err error
		defer func() {
			if r := recover(); r != nil {
				ms, err = nil, internalError(fn, r)
			}
			callTimes(cb, ud, ms, err)
		}()
		var ts []time.Time
		if err = ev.givenUp(); err == nil {
			ts, err = ctx.Scheduled()
		}
		err = timerError(fn, ctx, err)
		if err == nil {
			ms = make([]C.int64_t, len(ts))
			for i, t := range ts {
				ms[i] = C.int64_t(t.UnixMilli())
			}
		}
	})
	return C.PROSODY_OK
}

// callTimes reports a list of times (or err) to the host. The array is Go
// memory lent to C for the duration of the call, which cgo allows (it holds
// no Go pointers); it is NULL when empty.
func callTimes(cb C.prosody_times_fn, ud C.uintptr_t, ms []C.int64_t, err error) {
	var msg *C.char
	if err != nil {
		msg = C.CString(err.Error())
		defer C.free(unsafe.Pointer(msg))
	}
	var p *C.int64_t
	if len(ms) > 0 {
		p = &ms[0]
	}
	C.prosodyInt_call_times(cb, ud, statusOf(err), p, C.size_t(len(ms)), msg)
}

// enqueue runs f after the event's earlier timer operations.
func (ev *pendingEvent) enqueue(f func()) { ev.ops.enqueue(f) }

// opQueue runs functions one at a time, in the order they were queued, on
// a goroutine started when the queue was idle: the operations of one event
// (its timer operations), or of one state handle and its cursors.
type opQueue struct {
	mu   sync.Mutex
	ops  []func()
	busy bool
}

// enqueue runs f after the functions queued before it.
func (q *opQueue) enqueue(f func()) {
	q.mu.Lock()
	q.ops = append(q.ops, f)
	busy := q.busy
	q.busy = true
	q.mu.Unlock()
	if busy {
		return
	}
	go func() {
		for {
			q.mu.Lock()
			if len(q.ops) == 0 {
				q.ops, q.busy = nil, false
				q.mu.Unlock()
				return
			}
			f := q.ops[0]
			q.ops[0] = nil
			q.ops = q.ops[1:]
			q.mu.Unlock()
			f()
		}
	}()
}
