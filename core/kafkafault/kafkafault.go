// Package kafkafault classifies the errors sarama reports
// (core-behavior.md §7), for every part of the core that talks to Kafka:
// the producer, the fetch loop's loader of deferred messages.
package kafkafault

import (
	"errors"

	"github.com/IBM/sarama"

	"github.com/prosody-events/prosody-go/core/fault"
)

// Mark marks err, which is or wraps an error reported by sarama, with the
// fault class of that cause (see Class), so that fault.ClassOf on the
// returned error gives the class without knowing about sarama.
func Mark(err error) error {
	switch Class(err) {
	case fault.ClassPermanent:
		return fault.Permanent(err)
	case fault.ClassTerminal:
		return fault.Terminal(err)
	default:
		return fault.Transient(err)
	}
}

// Class classifies an error reported by sarama. Kafka error codes follow
// the original's table; anything not recognised is transient, because
// retrying an unknown failure is the safe default.
//
// The original's list also names librdkafka-internal codes (Fatal, Fenced,
// BadMessage, BadCompression, CriticalSystemResource, InvalidDifferentRecord)
// that have no Kafka wire code; sarama reports those situations through the
// non-KError cases below instead.
func Class(err error) fault.Class {
	if k, ok := errors.AsType[sarama.KError](err); ok {
		switch k {
		case sarama.ErrProducerFenced, sarama.ErrFencedInstancedId:
			return fault.ClassTerminal
		case sarama.ErrInvalidMessage, // CORRUPT_MESSAGE
			sarama.ErrInvalidMessageSize,
			sarama.ErrMessageSizeTooLarge,
			sarama.ErrInvalidRecord,
			sarama.ErrInvalidTimestamp,
			sarama.ErrUnsupportedCompressionType:
			return fault.ClassPermanent
		default:
			return fault.ClassTransient
		}
	}
	if _, ok := errors.AsType[sarama.PacketEncodingError](err); ok {
		// The record cannot be encoded; sending it again changes nothing.
		return fault.ClassPermanent
	}
	// A response sarama cannot decode (PacketDecodingError) stays
	// transient: it may be a fault of the connection, and a deferred
	// message read back through it must not be dropped for it.
	if _, ok := errors.AsType[sarama.ConfigurationError](err); ok {
		return fault.ClassTerminal
	}
	if errors.Is(err, sarama.ErrShuttingDown) || errors.Is(err, sarama.ErrClosedClient) {
		return fault.ClassTerminal
	}
	return fault.ClassTransient
}
