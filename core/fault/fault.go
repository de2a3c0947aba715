// Package fault classifies errors from handlers and from the library itself
// into the three classes that decide what happens to an event:
//
//   - Transient: a later attempt may succeed (retry, defer).
//   - Permanent: this event will never succeed (log or dead-letter, commit).
//   - Terminal: the partition or client is going away (abort, do not commit;
//     the next owner sees the event again).
//
// An error carries its class by wrapping: Permanent(err) marks err
// permanent, and errors.As finds the mark anywhere in a wrapped chain, so
// fmt.Errorf("saving order: %w", fault.Permanent(err)) stays permanent.
// Errors without a mark are transient: retrying is the safe default for an
// unknown failure, because dropping work silently is worse than retrying.
package fault

import (
	"context"
	"errors"
	"fmt"
)

// Class is the category of a failure.
type Class uint8

const (
	// ClassTransient is first so that the zero value is the safe default.
	ClassTransient Class = iota
	ClassPermanent
	ClassTerminal
)

func (c Class) String() string {
	switch c {
	case ClassTransient:
		return "transient"
	case ClassPermanent:
		return "permanent"
	case ClassTerminal:
		return "terminal"
	default:
		return fmt.Sprintf("Class(%d)", uint8(c))
	}
}

// classified is an error with an explicit class.
type classified struct {
	class Class
	err   error
}

func (e *classified) Error() string { return e.err.Error() }
func (e *classified) Unwrap() error { return e.err }

// Transient marks err as transient. A nil err stays nil.
func Transient(err error) error { return mark(ClassTransient, err) }

// Permanent marks err as permanent. A nil err stays nil.
func Permanent(err error) error { return mark(ClassPermanent, err) }

// Terminal marks err as terminal. A nil err stays nil.
func Terminal(err error) error { return mark(ClassTerminal, err) }

func mark(c Class, err error) error {
	if err == nil {
		return nil
	}
	return &classified{class: c, err: err}
}

// Classifier lets an error type report its own class without wrapping, for
// errors defined in other packages (for example Kafka error codes).
type Classifier interface {
	FaultClass() Class
}

// ClassOf returns the class of err: the outermost explicit mark in its
// chain, else what a Classifier in the chain reports, else Transient.
// Cancellation is no exception: a handler that gave up because its context
// was cancelled has not succeeded, and whether that is retried is decided by
// the layer that cancelled it.
func ClassOf(err error) Class {
	var c *classified
	if errors.As(err, &c) {
		return c.class
	}
	var cl Classifier
	if errors.As(err, &cl) {
		return cl.FaultClass()
	}
	return ClassTransient
}

// IsPermanent reports whether err classifies as permanent.
func IsPermanent(err error) bool { return err != nil && ClassOf(err) == ClassPermanent }

// IsTerminal reports whether err classifies as terminal.
func IsTerminal(err error) bool { return err != nil && ClassOf(err) == ClassTerminal }

// ErrShutdown is returned when work is refused because its partition or the
// client is shutting down. It is terminal: the event must not be committed.
var ErrShutdown = Terminal(errors.New("prosody: shutting down"))

// IsCancellation reports whether err is, or wraps, a context cancellation or
// deadline.
func IsCancellation(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
