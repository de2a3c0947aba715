package consumer

import (
	"context"
	"log/slog"
	"time"

	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/internal/invocation"
	"github.com/prosody-events/prosody-go/core/middleware"
	"github.com/prosody-events/prosody-go/core/offsets"
	"github.com/prosody-events/prosody-go/core/timers"
	"github.com/prosody-events/prosody-go/core/timerstore"
	"github.com/prosody-events/prosody-go/core/tracing"
)

// The bridge between a partition and its durable timers: the timer
// manager fires due timers into the key queue (fireTimer), and a timer's
// turn runs it through the stack and settles it in the store (runTimer).
// A timer item keeps its type, which decides who handles it: application
// timers go to the handler; the deferral layers will own the types they
// store.

// runTimer handles a timer item on the calling goroutine, whose run is r.
// A timer unscheduled while it waited for its key is skipped. It takes no
// leased permit (runOne ends the driver's lease first): a kept permit would
// stay held through the store writes of Commit, which retry while the
// store is down.
func (p *partition) runTimer(it item, env *invocation.Env, r *middleware.Run) {
	t := it.ev.(*timerItem)
	id := t.id()
	if !p.timers.Begin(id) {
		return
	}
	if t.typ != timerstore.Application {
		// Deferred messages and timers, written by a version that defers
		// (the deferral layers come with their own issue): no layer here
		// owns them, and no handler may see them. They stay stored.
		p.log.Warn("a stored timer of a type this version does not handle is left in the store; it fires again with the partition's next owner",
			slog.String("key", t.Key), slog.Time("time", t.Time), slog.Int("type", int(t.typ)))
		p.timers.Forget(id)
		return
	}
	if p.complete(it, p.invoke(p.c.opts.Stacks.Events, &t.Timer, env, nil, r)) {
		p.timers.Commit(id)
	} else {
		p.timers.Abort(id)
	}
}

// timerItem is a due timer in its key's queue: the event its handler gets,
// and its type in the store, which decides who handles it.
type timerItem struct {
	event.Timer
	typ timerstore.Type
}

// id is the timer's identity in the partition's timers.
func (t *timerItem) id() timers.ID {
	return timers.ID{Key: t.Key, Time: timerstore.TimeOf(t.Time), Type: t.typ}
}

// fireTimer puts a due timer in its key's queue, behind the key's messages,
// with its type and the trace context stored with it. The timer manager
// calls it; it never blocks.
func (p *partition) fireTimer(t timerstore.Trigger) {
	ev := &timerItem{Timer: event.Timer{Topic: p.topic, Partition: p.id, Key: t.Key, Time: t.Time.Std(), TraceContext: t.Span}, typ: t.Type}
	it := item{ev: ev, offset: offsets.None, hash: p.keys.Hash(t.Key)}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.draining {
		return // it stays stored; the next owner fires it
	}
	if p.keys.Push(it.hash, it) {
		p.running++
		p.c.exec.submit(task{p: p, it: it})
	}
}

// openTimers opens the partition's timer segment, retrying every second
// while the store fails, and starts its timer manager. Records are admitted
// only once it has succeeded. It gives up when stop closes (the partition
// was released first).
func (p *partition) openTimers(stop <-chan struct{}) {
	for attempt := 0; ; attempt++ {
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			select {
			case <-stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		seg, err := p.c.opts.Timers.Segment(ctx, p.c.opts.GroupID, p.topic, p.id, uint32(p.c.opts.SlabSize/time.Second))
		cancel()
		if err == nil {
			m := timers.Start(timers.Options{
				Segment:     seg,
				Fire:        p.fireTimer,
				MaxInFlight: p.c.opts.MaxUncommitted,
				Logger:      p.log,
			})
			p.mu.Lock()
			p.timers = m
			p.env.Timers = timers.Application{M: m}
			p.inlineEnv.Timers = p.env.Timers
			p.timersReady = true
			signal := p.roomLocked()
			p.mu.Unlock()
			if signal {
				p.signalRoom()
			}
			return
		}
		p.log.Warn("opening the partition's timers failed; retrying", slog.Int("attempt", attempt+1), slog.Any("error", err))
		select {
		case <-stop:
			return
		case <-time.After(time.Second):
		}
	}
}

// stopTimers ends the timer manager once the partition has drained. Timers
// not yet fired stay stored for the next owner.
func (p *partition) stopTimers() {
	p.mu.Lock()
	m := p.timers
	p.mu.Unlock()
	if m != nil {
		m.Stop()
	}
}

// traceOf is the trace context of an event, as timers scheduled by its
// handler store it.
func traceOf(ev event.Event) invocation.Trace {
	switch e := ev.(type) {
	case *event.Message:
		return (*messageTrace)(e)
	case *event.Timer:
		return timerTrace(e.TraceContext)
	}
	return nil
}

// messageTrace reads a message's trace context from its headers, only when
// a timer is scheduled.
type messageTrace event.Message

func (m *messageTrace) TraceSpan() map[string]string { return tracing.FromHeaders(m.Headers).Map() }

// timerTrace is the trace context stored with a timer, which a timer it
// schedules keeps.
type timerTrace map[string]string

func (t timerTrace) TraceSpan() map[string]string { return t }
