// Package telemetry carries what happens to handlers inside a consumer to
// whoever watches it: the failure-rate gate of deferral and the
// monopolization tracker subscribe to a consumer's Broadcast, and so will
// the telemetry emitter and metrics.
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
)

func (k Kind) String() string {
	switch k {
	case HandlerInvoked:
		return "invoked"
	case HandlerSucceeded:
		return "succeeded"
	case HandlerFailed:
		return "failed"
	}
	return "unknown"
}

// Event is one handler event. It is passed by value: a pointer through an
// interface call would cost an allocation per event.
type Event struct {
	Kind      Kind
	At        time.Time
	Topic     string
	Partition int32
	Key       string
	// Timer: the call handled a timer, not a message.
	Timer bool
	// Failure: the call was failure demand (a retry or a deferred retry),
	// not an event's first attempt.
	Failure bool
}

// Observer receives events. Observe is called on the handler's goroutine
// and must not block.
type Observer interface {
	Observe(e Event)
}

// Broadcast fans events out to its observers. The zero value has none.
type Broadcast struct {
	mu   sync.Mutex
	subs atomic.Pointer[[]Observer]
}

// Subscribe adds o and returns the function that removes it.
func (b *Broadcast) Subscribe(o Observer) (cancel func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var cur []Observer
	if p := b.subs.Load(); p != nil {
		cur = *p
	}
	next := append(slices.Clip(cur), o)
	b.subs.Store(&next)
	var once sync.Once
	return func() { once.Do(func() { b.remove(o) }) }
}

func (b *Broadcast) remove(o Observer) {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.subs.Load()
	if p == nil {
		return
	}
	next := slices.DeleteFunc(slices.Clone(*p), func(s Observer) bool { return s == o })
	b.subs.Store(&next)
}

// Active reports whether anyone listens, so that a publisher can skip
// building an event.
func (b *Broadcast) Active() bool {
	p := b.subs.Load()
	return p != nil && len(*p) > 0
}

// Publish hands e to every observer.
func (b *Broadcast) Publish(e Event) {
	p := b.subs.Load()
	if p == nil {
		return
	}
	for _, o := range *p {
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
