package middleware

import (
	"fmt"
	"time"

	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/fault"
)

// Undecodable is a record the engine could not make a message of: no key,
// a key that is not UTF-8, a null value (a tombstone) or a value that is
// not JSON. It never reaches a handler. In low-latency mode it goes
// through the undecodable stack to the failure topic with its bytes
// unchanged (spec §1 (f)); other modes commit it as skipped.
type Undecodable struct {
	Topic     string
	Partition int32
	Offset    int64
	Timestamp time.Time
	Key       []byte // nil: the record had no key
	Value     []byte // nil: the value was null
	Headers   []event.Header
	// Reason says why it could not be decoded.
	Reason error
}

// EventKey implements event.Event: the record's key bytes, so that the
// record keeps its place among the key's messages.
func (u *Undecodable) EventKey() string { return string(u.Key) }

// RejectUndecodable is the target of the undecodable stack: an attempt
// fails permanently with the reason, for the dead-letter layer to write.
type RejectUndecodable struct{}

// Async implements Target.
func (RejectUndecodable) Async(event.Event) bool { return false }

// Start implements Target.
func (RejectUndecodable) Start(r *Run) Step {
	if u, ok := r.ev.(*Undecodable); ok {
		return Result(fault.Permanent(u.Reason))
	}
	return Result(fault.Permanent(fmt.Errorf("prosody: %T is not an undecodable record", r.ev)))
}
