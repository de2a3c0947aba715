// Package event defines what a handler receives: messages and timers, the
// per-invocation Context, and the Handler interface.
//
// Messages and timers are both events of one key, and both travel through
// the same per-key queue, so a key never has a message handler and a timer
// handler running at the same time.
package event

import "time"

// Event is a Message or a Timer.
type Event interface {
	// EventKey is the key whose queue orders this event.
	EventKey() string
}

// Header is one Kafka record header. Names may repeat.
type Header struct {
	Key   string
	Value []byte
}

// Message is one consumed Kafka record whose key is UTF-8 text and whose
// value is JSON.
type Message struct {
	Topic     string
	Partition int32
	Offset    int64
	Key       string
	Timestamp time.Time
	Headers   []Header
	// Payload holds the record value unchanged: the core decodes only the
	// top-level "id" and "type" and leaves the rest to the host's own JSON
	// decoder, which avoids decoding every message twice.
	Payload []byte
	// ID and Type are the payload's top-level "id" and "type" when they are
	// JSON strings; HasID and HasType tell an absent field from an empty one.
	ID, Type       string
	HasID, HasType bool
	// SourceSystem is the `source-system` header, empty when absent.
	SourceSystem string
	// DedupID is the message's deduplication id once the deduplication
	// layer has worked it out (as the message is admitted, so that the
	// layer's steps before and after the handler need not hash it again),
	// all zero before: an id never is (its version nibble is set). The id
	// depends on the client's consumer group and idempotence_version, so
	// it belongs to the one client whose stack the message runs through.
	DedupID [16]byte
}

// EventKey implements Event.
func (m *Message) EventKey() string { return m.Key }

// Timer is a due timer of one key.
type Timer struct {
	Topic     string
	Partition int32
	Key       string
	// Time is when the timer was due, at whole-second precision.
	Time time.Time
	// TraceContext is the W3C trace context (traceparent, tracestate,
	// baggage, as present) of the event whose handler scheduled the timer;
	// nil when it had none. Hosts run the timer's handler in it.
	TraceContext map[string]string
}

// EventKey implements Event.
func (t *Timer) EventKey() string { return t.Key }

// Handler is what users implement. A nil error means the event is done; an
// error is classified by package fault (transient unless marked otherwise)
// and the client's mode decides what follows: pipeline mode retries a
// transient failure until it succeeds (deferring the key, so that the
// partition's other keys move on, unless deferral is off or most recent
// calls fail), low-latency mode retries it max_retries times and then
// writes the message to the failure topic, best-effort mode logs it and
// moves on (see the client package).
//
// Calls for one key never overlap; calls for different keys run
// concurrently, so a Handler must be safe for concurrent use.
type Handler interface {
	OnMessage(ctx *Context, msg *Message) error
	OnTimer(ctx *Context, timer *Timer) error
}

// AsyncHandler is a Handler whose messages finish away from the goroutine
// that starts them: in a host language behind the C ABI, which completes
// events in batches from its own thread. The engine then holds no goroutine
// per message in flight. Timers still go through OnTimer.
//
// Each attempt of a message is prepared, then started. PrepareMessage does
// the work that needs no context (copying the message for the host, say)
// early, on the goroutine that admits the message, so that StartMessage,
// which may run on the host's own thread as it completes another event, is
// cheap. StartMessage must not block; it calls done.Done exactly once with
// the attempt's outcome, from any goroutine or thread, possibly before it
// returns. A prepared attempt that never starts (its invocation was
// cancelled first) is discarded.
type AsyncHandler interface {
	Handler
	PrepareMessage(msg *Message) Prepared
	StartMessage(ctx *Context, msg *Message, prepared Prepared, done Done)
}

// Prepared is an attempt readied by AsyncHandler.PrepareMessage.
type Prepared interface {
	// Discard releases an attempt that will not start.
	Discard()
}

// Done receives the outcome of an event handled asynchronously. It is an
// interface rather than a func so that the engine's per-event state can be
// the receiver, without a closure allocated per event.
type Done interface {
	Done(err error)
}

// HandlerFuncs adapts plain functions to Handler. A nil function accepts its
// events without doing anything.
type HandlerFuncs struct {
	Message func(ctx *Context, msg *Message) error
	Timer   func(ctx *Context, timer *Timer) error
}

// OnMessage implements Handler.
func (h HandlerFuncs) OnMessage(ctx *Context, msg *Message) error {
	if h.Message == nil {
		return nil
	}
	return h.Message(ctx, msg)
}

// OnTimer implements Handler.
func (h HandlerFuncs) OnTimer(ctx *Context, timer *Timer) error {
	if h.Timer == nil {
		return nil
	}
	return h.Timer(ctx, timer)
}
