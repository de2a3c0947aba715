package main

/*
#include "shims.h"
*/
import "C"

import (
	"unsafe"
)

// completion is the host's callback for one asynchronous operation. The
// function pointer and user_data are C values; holding them in Go memory is
// allowed (the reverse, C holding Go pointers, is what cgo forbids).
type completion struct {
	fn C.prosody_completion_fn
	ud C.uintptr_t
}

func newCompletion(fn, name string, cb C.prosody_completion_fn, ud C.uintptr_t) (completion, error) {
	if cb == nil {
		return completion{}, nullArg(fn, name)
	}
	return completion{fn: cb, ud: ud}, nil
}

// call reports err to the host. The message is valid only during the
// callback, so it is freed right after.
func (c completion) call(err error) {
	if c.fn == nil {
		return
	}
	var msg *C.char
	if err != nil {
		msg = C.CString(err.Error())
		defer C.free(unsafe.Pointer(msg))
	}
	C.prosodyInt_call_completion(c.fn, c.ud, statusOf(err), msg)
}

// async runs op on its own goroutine and reports its result through done
// exactly once; a panic in op is reported as PROSODY_ERR_INTERNAL.
func async(fn string, done completion, op func() error) { asyncThen(fn, done, nil, op) }

// asyncThen is async, and calls then (if not nil) once done has been
// called: a client's subscribes, unsubscribes and release use it so that
// the next one runs, and completes, only after this one has completed.
func asyncThen(fn string, done completion, then func(), op func() error) {
	go func() {
		var err error
		defer func() {
			if r := recover(); r != nil {
				err = internalError(fn, r)
			}
			done.call(err)
			if then != nil {
				then()
			}
		}()
		err = op()
	}()
}
