package state

import (
	"errors"
	"fmt"

	"github.com/prosody-events/prosody-go/core/fault"
)

// The state error classes. Every error a state operation returns is one of
// these (errors.Is), besides the attempt's own cancellation cause, and is
// classified by package fault: a caller's mistake is transient, like a
// store failure, so that the event is retried rather than lost; only what a
// retry cannot fix in this process is permanent.
var (
	// ErrNullValue: a write of JSON null (absence cannot be stored; clear
	// or remove instead). Transient.
	ErrNullValue = fault.Transient(errors.New("prosody: keyed state cannot store null; use clear() or remove() to delete"))
	// ErrInvalidItem: an item that is not what the collection stores (not
	// JSON, or not a message in a message collection). Transient.
	ErrInvalidItem = fault.Transient(errors.New("prosody: invalid keyed-state item"))
	// ErrExpired: a handle, scan or context used after its attempt ended.
	// Transient.
	ErrExpired = fault.Transient(errors.New("prosody: the keyed-state handle is no longer valid because its event attempt has ended"))
	// ErrTooLarge: an item larger than statestore.MaxItemSize. Permanent:
	// no retry makes it fit.
	ErrTooLarge = fault.Permanent(errors.New("prosody: keyed-state item too large"))
	// ErrStore: the store failed; the operation may succeed if retried.
	// Transient, unless the store's own error is permanent (a write it
	// refuses whatever the retry), whose class it keeps.
	ErrStore = fault.Transient(errors.New("prosody: keyed-state store failure"))
	// ErrUnregistered: the collection was not registered on the client, or
	// its definition disagrees with the registered one. Permanent.
	ErrUnregistered = fault.Permanent(errors.New("prosody: keyed-state collection not registered"))
	// ErrNoState: the context has no keyed state (outside the engine, or
	// a client without state collections). Permanent.
	ErrNoState = fault.Permanent(errors.New("prosody: keyed state is not available in this context"))
)

// stateError is an error of one of the classes above with a message of its
// own.
type stateError struct {
	class error
	msg   string
	cause error
	// causeFirst: the cause's own fault class is the error's (storeError).
	causeFirst bool
}

func (e *stateError) Error() string { return e.msg }

// Is makes errors.Is(err, ErrX) true for the class, and fault.ClassOf
// (which walks Unwrap) find the class's fault mark.
func (e *stateError) Is(target error) bool { return target == e.class }

func (e *stateError) Unwrap() []error {
	switch {
	case e.cause == nil:
		return []error{e.class}
	case e.causeFirst:
		return []error{e.cause, e.class}
	}
	return []error{e.class, e.cause}
}

func newError(class error, format string, args ...any) error {
	return &stateError{class: class, msg: fmt.Sprintf(format, args...)}
}

// storeError wraps a store failure as ErrStore, unless the store's error
// is the attempt's cancellation, which keeps its own class.
func storeError(op string, err error) error {
	if err == nil {
		return nil
	}
	if fault.IsCancellation(err) {
		return err
	}
	// A write the store refuses whatever the retry (too large) stays
	// permanent: as a transient failure, the event would be retried, or
	// deferred, for ever. A terminal one (a row that does not decode, a
	// refused query) stays transient, as before: terminal, it would stop
	// the partition's commits at this event for good.
	return &stateError{class: ErrStore, msg: fmt.Sprintf("keyed state: %s: %v", op, err), cause: err,
		causeFirst: fault.ClassOf(err) == fault.ClassPermanent}
}
