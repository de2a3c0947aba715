package consumer

import (
	"context"
	"errors"

	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/prosody-events/prosody-go/core/deferral"
	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/fault"
	"github.com/prosody-events/prosody-go/core/internal/invocation"
	"github.com/prosody-events/prosody-go/core/middleware"
	"github.com/prosody-events/prosody-go/core/offsets"
	"github.com/prosody-events/prosody-go/core/payload"
	"github.com/prosody-events/prosody-go/core/scheduler"
	"github.com/prosody-events/prosody-go/core/state"
	"github.com/prosody-events/prosody-go/core/telemetry"
	"github.com/prosody-events/prosody-go/core/timers"
	"github.com/prosody-events/prosody-go/core/timerstore"
	"github.com/prosody-events/prosody-go/core/tracing"
)

// The bridge between a partition and its durable timers: the timer
// manager fires due timers into the key queue (fireTimer), and a timer's
// turn runs it through the stack and settles it in the store (runTimer).
// A timer item keeps its type, which decides who handles it: application
// timers go to the handler, the retry timers of deferred keys to the defer
// layers.

// runTimer handles a timer item on the calling goroutine, whose run is r.
// A timer unscheduled while it waited for its key is skipped. It takes no
// leased permit (runOne ends the driver's lease first): a kept permit would
// stay held through the store writes of Commit, which retry while the
// store is down. A retry that reserved its permit before taking its key's
// turn (fireTimer) lends it to its invocation, and gives it back before
// Commit too.
//
// Application timers go to the handler. The retry timers of deferred keys
// go to the defer layers as a deferral.Retry; without deferral (a mode
// that does not defer) no layer owns them and no handler may see them, so
// they stay stored for an owner that defers.
func (p *partition) runTimer(it item, env *invocation.Env, r *middleware.Run) {
	t := it.ev.(*timerItem)
	var reserved *permitLease
	if t.reserved {
		t.reserved = false
		reserved = &permitLease{scheduler: p.c.opts.Scheduler, held: true, since: t.since}
	}
	id := t.id()
	if !p.timers.Begin(id) {
		reserved.end()
		return
	}
	var ev event.Event = &t.Timer
	if t.typ != timerstore.Application {
		if env.Deferral == nil {
			reserved.end()
			p.log.Warn("a stored retry timer of a deferred key is left in the store: this consumer does not defer; it fires again with the partition's next owner",
				slog.String("key", t.Key), slog.Time("time", t.Time), slog.Int("type", int(t.typ)))
			p.timers.Forget(id)
			return
		}
		ev = &deferral.Retry{Timer: t.Timer, Type: t.typ}
	}
	err := p.invoke(p.c.opts.Stacks.Events, ev, env, reserved, r)
	reserved.end()
	switch {
	case p.complete(it, err):
		p.timers.Commit(id)
	case p.stopped.Load() || errors.Is(err, invocation.ErrNotStarted):
		// Left for the next owner because this one is letting the
		// partition go, which complete logged: not the error an abort on
		// a live partition is.
		p.timers.Forget(id)
	default:
		p.timers.Abort(id)
	}
}

// timerItem is a due timer in its key's queue: the event its handler gets,
// and its type in the store, which decides who handles it.
type timerItem struct {
	event.Timer
	typ timerstore.Type
	// reserved: the timer holds a permit it reserved before taking its
	// key's turn (fireTimer), for its invocation, granted at since
	// (middleware.Scheduler.GrantMark).
	reserved bool
	since    uint32
}

// id is the timer's identity in the partition's timers.
func (t *timerItem) id() timers.ID {
	return timers.ID{Key: t.Key, Time: timerstore.TimeOf(t.Time), Type: t.typ}
}

// fireTimer puts a due timer in its key's queue, behind the key's messages,
// with its type and the trace context stored with it. The timer manager
// calls it; it never blocks.
//
// The retry of a deferred key first reserves its permit, as failure
// demand, and takes its key's turn only once it holds one. While it
// waits for a permit, a message for its key goes ahead of it: the
// message joins the key's deferred ones and its offset is done. Were the
// retry queued first, the message would hold one of the partition's
// max_uncommitted offsets for as long as the retry waits; under
// sustained failures the failure class waits longest, and such messages
// filled the window and held back the partition's fresh keys, turning
// the scheduler's priority for them upside down. A retry whose key is
// busy when it is granted gives the permit back and waits its turn
// without one: holding a permit behind an event that may itself need one
// could leave every permit held that way.
func (p *partition) fireTimer(t timerstore.Trigger) {
	ev := &timerItem{Timer: event.Timer{Topic: p.topic, Partition: p.id, Key: t.Key, Time: t.Time.Std(), TraceContext: t.Span}, typ: t.Type}
	sched := p.c.opts.Scheduler
	if t.Type == timerstore.Application || sched == nil {
		p.queueTimer(ev, false)
		return
	}
	key := scheduler.KeyOf(p.topic, p.id, t.Key)
	gone := func() bool { return p.stopped.Load() || p.scope.Err() != nil }
	if sched.Reserve(key, middleware.Failure, gone, func(granted bool) {
		if granted {
			ev.since = sched.GrantMark()
			p.queueTimer(ev, true)
		}
	}) {
		ev.since = sched.GrantMark()
		p.queueTimer(ev, true)
	}
}

// queueTimer puts ev in its key's queue; reserved says it holds a
// permit (fireTimer), which it keeps only if it is its key's turn at once.
func (p *partition) queueTimer(ev *timerItem, reserved bool) {
	it := item{ev: ev, offset: offsets.None, hash: p.keys.Hash(ev.Key)}
	giveBack := reserved
	p.mu.Lock()
	if !p.draining {
		// Otherwise it stays stored; the next owner fires it.
		if p.keys.Push(it.hash, it) {
			ev.reserved, giveBack = reserved, false
			p.running++
			p.c.exec.submit(task{p: p, it: it})
		}
	}
	p.mu.Unlock()
	if giveBack {
		// After the lock: a release may grant a waiting reservation of
		// this partition on this goroutine.
		p.c.opts.Scheduler.EndLease()
	}
}

// openTimers opens the partition's timer segment (and, with deferral,
// its defer state), retrying every second while the stores fail, and
// starts its timer manager. Records are admitted only once it has
// succeeded. It gives up when stop closes (the partition was released
// first).
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
		var dp *deferral.Partition
		if err == nil && p.c.opts.Deferral != nil {
			dp, err = p.openDeferral(ctx, seg)
		}
		var sp *state.Partition
		if err == nil && p.c.opts.State != nil {
			sp, err = p.c.opts.State.Partition(ctx, p.topic, p.id)
		}
		cancel()
		if err == nil {
			p.startTimers(seg, dp, sp)
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

// startTimers starts the timer manager of seg and offers the partition's
// timers (with the deferral state dp, if any) to its handlers. It holds
// p.mu throughout: a timer fired at once waits in fireTimer until the
// state it runs with is all in place.
func (p *partition) startTimers(seg timerstore.Segment, dp *deferral.Partition, sp *state.Partition) {
	p.mu.Lock()
	m := timers.Start(timers.Options{
		Segment:     seg,
		Fire:        p.fireTimer,
		MaxInFlight: p.c.opts.MaxUncommitted,
		Logger:      p.log,
		Changed:     p.timerChanged,
	})
	p.timers = m
	var handlerTimers invocation.Timers = timers.Application{M: m}
	if dp != nil {
		dp.Retries = m
		handlerTimers = deferral.Timers{App: timers.Application{M: m}, P: dp}
		p.env.Deferral, p.inlineEnv.Deferral = dp, dp
	}
	if sp != nil {
		p.env.State, p.inlineEnv.State = sp, sp
	}
	p.env.Timers, p.inlineEnv.Timers = handlerTimers, handlerTimers
	p.timersReady = true
	signal := p.roomLocked()
	p.mu.Unlock()
	if signal {
		p.signalRoom()
	}
}

// openDeferral opens the partition's defer segments and learns which of
// its keys are deferred: those with a retry timer.
func (p *partition) openDeferral(ctx context.Context, seg timerstore.Segment) (*deferral.Partition, error) {
	store := p.c.opts.Deferral.Store
	msgs, err := store.Messages(ctx, p.c.opts.GroupID, p.topic, p.id)
	if err != nil {
		return nil, fmt.Errorf("opening the deferred messages: %w", err)
	}
	tms, err := store.Timers(ctx, p.c.opts.GroupID, p.topic, p.id)
	if err != nil {
		return nil, fmt.Errorf("opening the deferred timers: %w", err)
	}
	// A retry timer is due at most defer_max_delay after it was set; the
	// slack covers a later owner's clock and the rounding to slabs.
	through := timerstore.TimeOf(time.Now().Add(p.c.opts.Deferral.MaxDelay + time.Hour))
	msgKeys, err := seg.TypeKeys(ctx, timerstore.DeferredMessage, through)
	if err != nil {
		return nil, fmt.Errorf("listing the keys with deferred messages: %w", err)
	}
	timerKeys, err := seg.TypeKeys(ctx, timerstore.DeferredTimer, through)
	if err != nil {
		return nil, fmt.Errorf("listing the keys with deferred timers: %w", err)
	}
	if len(msgKeys)+len(timerKeys) > 0 {
		p.log.Info("partition has deferred keys", slog.Int("messages", len(msgKeys)), slog.Int("timers", len(timerKeys)))
	}
	local, _ := store.(interface{ InMemory() bool })
	return deferral.NewPartition(&deferral.Partition{
		Topic: p.topic, ID: p.id, Messages: msgs, Timers: tms, Load: p.loadDeferred, Logger: p.log,
		Local: local != nil && local.InMemory(),
	}, msgKeys, timerKeys), nil
}

// loadDeferred reads the partition's record at offset back from Kafka and
// decodes it as the fetch loop does. A record that no longer decodes is a
// permanent failure: a retry would read the same bytes.
func (p *partition) loadDeferred(ctx context.Context, offset int64) (*event.Message, error) {
	rec, cached, err := p.c.loader.LoadCached(ctx, p.topic, p.id, offset)
	if err != nil {
		return nil, err
	}
	msg := new(event.Message)
	var dec payload.Decoder
	if _, err := decodeRecord(&dec, p.topic, p.id, &rec, time.Now(), msg); err != nil {
		return nil, fault.Permanent(fmt.Errorf("deferred message at offset %d: %w", offset, err))
	}
	if tracing.Recording() {
		// Related to the record's own context, as its receive span was.
		_, span := tracing.StartRemote(nil, tracing.FromHeaders(msg.Headers), p.c.opts.MessageSpans, "load",
			attribute.Int("partition", int(msg.Partition)), attribute.Int64("offset", msg.Offset),
			attribute.String("topic", msg.Topic), attribute.String("key", msg.Key), attribute.Bool("cached", cached))
		span.End()
	}
	return msg, nil
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
	case *deferral.Retry:
		// The span stored with the retry: the deferred message's or timer's.
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

// timerChanged tells the broadcast of a timer written to or removed from
// the store, for the observers of every kind of event.
func (p *partition) timerChanged(t timerstore.Trigger, scheduled bool) {
	b := p.c.opts.Broadcast
	if b == nil || !b.WantsEvery() {
		return
	}
	kind := telemetry.TimerCancelled
	if scheduled {
		kind = telemetry.TimerScheduled
	}
	b.Publish(telemetry.Event{
		Kind: kind, At: b.Now(), Topic: p.topic, Partition: p.id, Key: t.Key,
		Subject:   &event.Timer{Topic: p.topic, Partition: p.id, Key: t.Key, Time: t.Time.Std(), TraceContext: t.Span},
		TimerType: timerTypeName(t.Type),
	})
}

func timerTypeName(t timerstore.Type) string {
	switch t {
	case timerstore.DeferredMessage:
		return telemetry.TimerDeferredMessage
	case timerstore.DeferredTimer:
		return telemetry.TimerDeferredTimer
	}
	return telemetry.TimerApplication
}
