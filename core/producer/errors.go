package producer

import (
	"errors"
	"fmt"
	"strings"

	"github.com/IBM/sarama"

	"github.com/prosody-events/prosody-go/core/fault"
	"github.com/prosody-events/prosody-go/core/payload"
)

var (
	// ErrClosed is returned by Send once Close has started. It is marked
	// terminal (fault.ClassTerminal): this producer will never send again.
	ErrClosed = fault.Terminal(errors.New("producer: closed"))

	// ErrSendTimeout is wrapped by the error Send returns when
	// Options.SendTimeout expires before the delivery report arrives. It is
	// marked transient (fault.ClassTransient). The record may still have
	// been handed to Kafka and may be delivered later, so a retry can
	// produce a duplicate: delivery is at least once, and handlers must
	// tolerate a record twice (the consumer's deduplication layer is
	// specified and not built yet).
	ErrSendTimeout = fault.Transient(errors.New("producer: send timed out"))
)

// kafkaFault marks err, which is or wraps an error reported by sarama, with
// the fault class of that cause (see kafkaClass), so that fault.ClassOf on
// the returned error gives the class without knowing about sarama.
func kafkaFault(err error) error {
	switch kafkaClass(err) {
	case fault.ClassPermanent:
		return fault.Permanent(err)
	case fault.ClassTerminal:
		return fault.Terminal(err)
	default:
		return fault.Transient(err)
	}
}

// kafkaClass classifies an error reported by sarama (core-behavior.md §7).
// Kafka error codes follow the original's table; anything not recognised is
// transient, because retrying an unknown failure is the safe default.
//
// The original's list also names librdkafka-internal codes (Fatal, Fenced,
// BadMessage, BadCompression, CriticalSystemResource, InvalidDifferentRecord)
// that have no Kafka wire code; sarama reports those situations through the
// non-KError cases below instead.
func kafkaClass(err error) fault.Class {
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
	if _, ok := errors.AsType[sarama.ConfigurationError](err); ok {
		return fault.ClassTerminal
	}
	if errors.Is(err, sarama.ErrShuttingDown) || errors.Is(err, sarama.ErrClosedClient) {
		return fault.ClassTerminal
	}
	return fault.ClassTransient
}

// argError is an error in an argument to Send. Its text names the argument;
// it unwraps to the underlying cause so errors.Is still finds it.
type argError struct {
	msg string
	err error
}

func (e *argError) Error() string { return e.msg }
func (e *argError) Unwrap() error { return e.err }

// checkPayload validates the payload argument of a send to topic as one JSON
// document and returns its top-level fields. The error names the argument
// and is permanent: the same bytes will never be valid.
func checkPayload(topic string, b []byte) (payload.Fields, error) {
	f, err := payload.Meta(b)
	if err != nil {
		return payload.Fields{}, payloadError(topic, err)
	}
	return f, nil
}

// payloadError builds Send's error for a payload that payload.Meta
// rejected. It is permanent: the same bytes will never be valid JSON.
func payloadError(topic string, err error) error {
	var msg string
	if errors.Is(err, payload.ErrNull) {
		msg = fmt.Sprintf("producer: send to %q: payload: is nil, want one JSON document", topic)
	} else {
		// Meta's text starts with ErrInvalid's; say it once, in our words.
		detail := strings.TrimPrefix(err.Error(), payload.ErrInvalid.Error())
		detail = strings.TrimPrefix(detail, ": ")
		msg = fmt.Sprintf("producer: send to %q: payload: not valid JSON: %s", topic, detail)
	}
	return fault.Permanent(&argError{msg: msg, err: err})
}
