package producer

import (
	"errors"
	"fmt"
	"strings"

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
