package producer

import (
	"errors"

	"github.com/IBM/sarama"
)

// Class says what a caller should do about a failed operation
// (core-behavior.md §7). It lives here until a shared errors package exists.
type Class int

const (
	// Transient failures may succeed when retried.
	Transient Class = iota
	// Permanent failures will never succeed for this event; drop it or send
	// it to the dead-letter topic.
	Permanent
	// Terminal failures mean the client (or partition) is going away; the
	// caller should abort without committing.
	Terminal
)

// String returns the class name in lower case.
func (c Class) String() string {
	switch c {
	case Transient:
		return "transient"
	case Permanent:
		return "permanent"
	case Terminal:
		return "terminal"
	default:
		return "unknown"
	}
}

// classified attaches a class to an error this package creates itself, so
// Classify does not have to recognise every call site's error by value.
type classified struct {
	class Class
	err   error
}

func (e *classified) Error() string { return e.err.Error() }
func (e *classified) Unwrap() error { return e.err }

// withClass marks err as belonging to class c.
func withClass(c Class, err error) error { return &classified{class: c, err: err} }

// Classify maps an error returned by this package (or by sarama) to its
// Class. Kafka error codes follow the original's table; anything not
// recognised is Transient, because retrying an unknown failure is the safe
// default. Classify(nil) is Transient too, but callers should not ask.
func Classify(err error) Class {
	if err == nil {
		return Transient
	}
	// Our own markers come first: they are the most specific statement
	// about an error, and a timeout that happens to wrap a Kafka error text
	// must still read as a timeout.
	switch {
	case errors.Is(err, ErrClosed):
		return Terminal
	case errors.Is(err, ErrSendTimeout):
		return Transient
	}
	if c, ok := errors.AsType[*classified](err); ok {
		return c.class
	}
	if k, ok := errors.AsType[sarama.KError](err); ok {
		return classifyKafka(k)
	}
	if _, ok := errors.AsType[sarama.PacketEncodingError](err); ok {
		// The record cannot be encoded; sending it again changes nothing.
		return Permanent
	}
	if _, ok := errors.AsType[sarama.ConfigurationError](err); ok {
		return Terminal
	}
	switch {
	case errors.Is(err, sarama.ErrShuttingDown), errors.Is(err, sarama.ErrClosedClient):
		return Terminal
	}
	return Transient
}

// classifyKafka classifies a broker error code. The original's list also
// names librdkafka-internal codes (Fatal, Fenced, BadMessage, BadCompression,
// CriticalSystemResource, InvalidDifferentRecord) that have no Kafka wire
// code; sarama reports those situations through the non-KError cases in
// Classify instead.
func classifyKafka(k sarama.KError) Class {
	switch k {
	case sarama.ErrProducerFenced, sarama.ErrFencedInstancedId:
		return Terminal
	case sarama.ErrInvalidMessage, // CORRUPT_MESSAGE
		sarama.ErrInvalidMessageSize,
		sarama.ErrMessageSizeTooLarge,
		sarama.ErrInvalidRecord,
		sarama.ErrInvalidTimestamp,
		sarama.ErrUnsupportedCompressionType:
		return Permanent
	default:
		return Transient
	}
}
