package producer

import "errors"

var (
	// ErrClosed is returned by Send once Close has started. It classifies
	// as Terminal: this producer will never send again.
	ErrClosed = errors.New("producer: closed")

	// ErrSendTimeout is wrapped by the error Send returns when
	// Options.SendTimeout expires before the delivery report arrives. It
	// classifies as Transient. The record may still have been handed to
	// Kafka and may be delivered later, so a retry can produce a duplicate;
	// consumers deduplicate by event id.
	ErrSendTimeout = errors.New("producer: send timed out")
)
