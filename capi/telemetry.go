package main

/*
#include "shims.h"
*/
import "C"

import (
	"context"
	"errors"
	"time"

	"github.com/prosody-events/prosody-go/core/emitter"
	"github.com/prosody-events/prosody-go/core/tracing"
)

//export prosodyGo_flush_telemetry
func prosodyGo_flush_telemetry(timeoutMs C.int64_t, cb C.prosody_completion_fn, ud C.uintptr_t, errOut **C.char) (status C.int) {
	const fn = "prosody_flush_telemetry"
	defer guard(fn, &status, errOut)
	if timeoutMs <= 0 {
		return fail(errOut, errorf(C.PROSODY_ERR_INVALID_ARGUMENT, "%s: timeout_ms: must be positive, got %d", fn, int64(timeoutMs)))
	}
	done, err := newCompletion(fn, "done", cb, ud)
	if err != nil {
		return fail(errOut, err)
	}
	timeout := time.Duration(timeoutMs) * time.Millisecond
	async(fn, done, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		return errors.Join(emitter.FlushAll(ctx), tracing.Flush(ctx))
	})
	return C.PROSODY_OK
}

//export prosodyGo_tracing_recording
func prosodyGo_tracing_recording(out *C.int, errOut **C.char) (status C.int) {
	const fn = "prosody_tracing_recording"
	defer guard(fn, &status, errOut)
	if out == nil {
		return fail(errOut, nullArg(fn, "recording"))
	}
	*out = 0
	if tracing.Recording() {
		*out = 1
	}
	return C.PROSODY_OK
}
