package main

/*
#include "shims.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/prosody-events/prosody-go/core/admin"
	"github.com/prosody-events/prosody-go/core/client"
	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/fault"
)

// apiError is a failure with the status code the host sees.
type apiError struct {
	status C.int
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func errorf(status C.int, format string, args ...any) *apiError {
	return &apiError{status: status, msg: fmt.Sprintf(format, args...)}
}

// fail stores a failure in *errOut (when the host asked for messages) and
// returns its status. The C shim has already set *errOut to NULL.
func fail(errOut **C.char, err error) C.int {
	status := statusOf(err)
	if errOut != nil {
		*errOut = C.CString(err.Error())
	}
	return status
}

// statusOf maps an error from the core to a status code. Specific errors
// first; then the fault class, whose default (transient) is also the safe
// default for an unknown failure.
func statusOf(err error) C.int {
	var ae *apiError
	var oe *config.OptionError
	switch {
	case err == nil:
		return C.PROSODY_OK
	case errors.As(err, &ae):
		return ae.status
	case errors.Is(err, client.ErrAlreadySubscribed), errors.Is(err, client.ErrNotSubscribed):
		return C.PROSODY_ERR_STATE
	case errors.Is(err, client.ErrClosed), errors.Is(err, admin.ErrClosed), errors.Is(err, errReleased):
		return C.PROSODY_ERR_CLOSED
	case errors.As(err, &oe):
		return C.PROSODY_ERR_CONFIG
	case fault.IsCancellation(err):
		return C.PROSODY_ERR_CANCELLED
	}
	switch fault.ClassOf(err) {
	case fault.ClassPermanent:
		return C.PROSODY_ERR_PERMANENT
	case fault.ClassTerminal:
		return C.PROSODY_ERR_TERMINAL
	}
	return C.PROSODY_ERR_TRANSIENT
}

// guard is deferred by every export: a panic becomes PROSODY_ERR_INTERNAL
// and a log record instead of taking the host process down.
func guard(fn string, status *C.int, errOut **C.char) {
	if r := recover(); r != nil {
		*status = fail(errOut, internalError(fn, r))
	}
}

// internalError logs a recovered panic and returns the error to report.
func internalError(fn string, r any) error {
	err := errorf(C.PROSODY_ERR_INTERNAL, "%s: internal error: %v", fn, r)
	rootLogger().Error(err.msg, "stack", string(debug.Stack()))
	return err
}

// Common argument errors.
func nullArg(fn, name string) error {
	return errorf(C.PROSODY_ERR_INVALID_ARGUMENT, "%s: %s must not be NULL", fn, name)
}
