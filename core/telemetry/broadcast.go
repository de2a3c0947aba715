// Package telemetry carries what happens inside a consumer to whoever
// watches it: the failure-rate gate of deferral and the monopolization
// tracker subscribe to a consumer's Broadcast for handler outcomes, and
// the telemetry emitter (package emitter) for everything.
//
// The innermost layer of every stack publishes three events per handler
// call (invoked, and succeeded or failed) for messages and timers of every
// partition, so publishing is on the hot path: it costs one atomic load
// when nobody listens, and a subscriber is called synchronously and must
// not block (an Observer does O(1) work under a short lock; a slow reader
// uses a Buffered subscriber, which drops and counts what it has no room
// for rather than holding the handler back).
package telemetry

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/prosody-events/prosody-go/core/event"
)

// Kind is what happened.
type Kind uint8

const (
	// HandlerInvoked: a handler call starts (inside its concurrency permit).
	HandlerInvoked Kind = iota
	// HandlerSucceeded: the call returned success.
	HandlerSucceeded
	// HandlerFailed: the call returned an error (of any class).
	HandlerFailed
	// TimerScheduled: a timer was written to the store (Subject is its
	// *event.Timer, TimerType its type).
	TimerScheduled
	// TimerCancelled: a timer was removed from the store.
	TimerCancelled
	// MessageSent: the producer's record was acknowledged (Subject is an
	// *event.Message with the delivery's partition and offset).
	MessageSent
)

// Outcome reports whether k ends a handler call.
func (k Kind) Outcome() bool { return k == HandlerSucceeded || k == HandlerFailed }

func (k Kind) String() string {
	switch k {
	case HandlerInvoked:
		return "invoked"
	case HandlerSucceeded:
		return "succeeded"
	case HandlerFailed:
		return "failed"
	case TimerScheduled:
		return "timer scheduled"
	case TimerCancelled:
		return "timer cancelled"
	case MessageSent:
		return "message sent"
	}
	return "unknown"
}

// Event is one handler event. It is passed by value: a pointer through an
// interface call would cost an allocation per event.
type Event struct {
	Kind Kind
	// At is when it happened, on the broadcast's clock (Broadcast.Now,
	// of ClockTick resolution for a broadcast made by NewBroadcast).
	At        int64
	Topic     string
	Partition int32
	Key       string
	// Timer: the call handled a timer, not a message.
	Timer bool
	// Failure: the call was failure demand (a retry or a deferred retry),
	// not an event's first attempt.
	Failure bool
	// Start is when the call was invoked, on an outcome (succeeded or
	// failed), on the broadcast's clock; zero on HandlerInvoked.
	Start int64
	// Subject is the *event.Message or *event.Timer the event is about,
	// for observers that report more than its key (the emitter). It is
	// shared with the handler: read it, never change it.
	Subject event.Event
	// Err is the error of a HandlerFailed call.
	Err error
	// TimerType names the type of a scheduled or cancelled timer's
	// (TimerApplication and the internal types of deferral); handler
	// events of timers are of application timers.
	TimerType string
	// Span is the span the handler call runs in, when the core's spans
	// are recorded; invalid otherwise.
	Span trace.SpanContext
}

// Timer types as the telemetry topic names them.
const (
	TimerApplication     = "application"
	TimerDeferredMessage = "deferredMessage"
	TimerDeferredTimer   = "deferredTimer"
)

// Now is the time on the broadcast's clock: monotonic nanoseconds, from a
// start far enough from zero that no time is zero or negative. It reads
// one clock where time.Now reads two, which at three events per message
// showed in the engine's throughput.
func Now() int64 { return int64(time.Since(clockBase)) + clockOffset }

var clockBase = time.Now()

// At is t on the clock of Now (the inverse of Wall).
func At(t time.Time) int64 { return int64(t.Sub(clockBase)) + clockOffset }

// Wall is the wall-clock time of at, a time on a broadcast's clock.
func Wall(at int64) time.Time { return clockBase.Add(time.Duration(at - clockOffset)) }

const clockOffset = 1 << 42 // about 73 minutes

// Observer receives events. Observe is called on the handler's goroutine
// and must not block.
type Observer interface {
	Observe(e Event)
}

// OutcomeObserver is an Observer that needs only handler outcomes
// (succeeded, failed): it is given no other kind, and a broadcast whose
// observers all are skips HandlerInvoked events (an outcome carries its
// call's Start).
type OutcomeObserver interface {
	Observer
	OutcomesOnly()
}

// Broadcast fans events out to its observers. The zero value has none,
// and reads the system clock (Now) for the events' times; NewBroadcast's
// reads a clock of ClockTick resolution, which costs far less.
type Broadcast struct {
	mu    sync.Mutex
	subs  atomic.Pointer[subscribers]
	clock atomic.Pointer[coarseClock]
}

// NewBroadcast returns a broadcast with a clock of ClockTick resolution
// and the goroutine that keeps it. Close it when done.
func NewBroadcast() *Broadcast {
	b := &Broadcast{}
	b.clock.Store(startClock())
	return b
}

// Close stops the broadcast's clock goroutine; its Now reads the system
// clock from then on.
func (b *Broadcast) Close() {
	if c := b.clock.Swap(nil); c != nil {
		c.close()
	}
}

// Now is the time for an event published now, on the broadcast's clock.
func (b *Broadcast) Now() int64 {
	if c := b.clock.Load(); c != nil {
		return c.now()
	}
	return Now()
}

type subscribers struct {
	all []Observer // given outcomes
	// every is the observers of all kinds of events, so some observer
	// wants HandlerInvoked when it is not empty.
	every []Observer
}

// Subscribe adds o and returns the function that removes it.
func (b *Broadcast) Subscribe(o Observer) (cancel func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.storeLocked(append(slices.Clone(b.observersLocked()), o))
	var once sync.Once
	return func() { once.Do(func() { b.remove(o) }) }
}

func (b *Broadcast) remove(o Observer) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.storeLocked(slices.DeleteFunc(slices.Clone(b.observersLocked()), func(s Observer) bool { return s == o }))
}

func (b *Broadcast) observersLocked() []Observer {
	if p := b.subs.Load(); p != nil {
		return p.all
	}
	return nil
}

func (b *Broadcast) storeLocked(all []Observer) {
	s := &subscribers{all: all}
	for _, o := range all {
		if _, ok := o.(OutcomeObserver); !ok {
			s.every = append(s.every, o)
		}
	}
	b.subs.Store(s)
}

// Active reports whether anyone listens, so that a publisher can skip
// building an event.
func (b *Broadcast) Active() bool {
	p := b.subs.Load()
	return p != nil && len(p.all) > 0
}

// WantsInvoked reports whether an observer listens to HandlerInvoked, and
// so to every kind of event.
func (b *Broadcast) WantsInvoked() bool {
	p := b.subs.Load()
	return p != nil && len(p.every) > 0
}

// WantsEvery is WantsInvoked, for the publishers of the other kinds.
func (b *Broadcast) WantsEvery() bool { return b.WantsInvoked() }

// Publish hands e to every observer of its kind.
func (b *Broadcast) Publish(e Event) {
	p := b.subs.Load()
	if p == nil {
		return
	}
	obs := p.every
	if e.Kind.Outcome() {
		obs = p.all
	}
	for _, o := range obs {
		o.Observe(e)
	}
}

// Buffered is an Observer for a reader that cannot keep up with the
// handlers at every moment: it queues up to its capacity and drops (and
// counts) events once full, so the handlers never wait for it.
type Buffered struct {
	ch      chan Event
	dropped atomic.Uint64
}

// NewBuffered returns a Buffered with room for n events (at least 1).
func NewBuffered(n int) *Buffered {
	return &Buffered{ch: make(chan Event, max(n, 1))}
}

// Observe implements Observer.
func (q *Buffered) Observe(e Event) {
	select {
	case q.ch <- e:
	default:
		q.dropped.Add(1)
	}
}

// C is where the queued events are read.
func (q *Buffered) C() <-chan Event { return q.ch }

// Dropped counts the events that found the queue full.
func (q *Buffered) Dropped() uint64 { return q.dropped.Load() }
