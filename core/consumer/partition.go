package consumer

import (
	"context"
	"errors"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/fault"
	"github.com/prosody-events/prosody-go/core/fetch"
	"github.com/prosody-events/prosody-go/core/filter"
	"github.com/prosody-events/prosody-go/core/internal/invocation"
	"github.com/prosody-events/prosody-go/core/keyqueue"
	"github.com/prosody-events/prosody-go/core/middleware"
	"github.com/prosody-events/prosody-go/core/offsets"
	"github.com/prosody-events/prosody-go/core/payload"
	"github.com/prosody-events/prosody-go/core/timers"
	"github.com/prosody-events/prosody-go/core/tracing"
	"go.opentelemetry.io/otel/attribute"
)

// item is one event in a key's queue: a message, an undecodable record
// (middleware.Undecodable) or a timer (a *timerItem, which keeps the
// timer's type). Records carry their offset; timers (which have none)
// carry offsets.None. Items are copied through the key queues and run
// queues for every event: they are kept to four words.
type item struct {
	ev     event.Event
	offset int64
	hash   uint64 // of the event's key, in the partition's key queue
}

// partition is the state of one assigned partition: which offsets are
// unfinished, the per-key queue, and the goroutines running its events.
//
// Records enter through admit on the goroutine driving the intake, a burst
// at a time; a key's run executes on that driver (intake.go) or, once runs
// are slow, on a worker of the consumer's executor, and moves on to the
// key's next event itself, so an idle key costs nothing.
//
// One mutex guards the offsets, the per-key queue, the ready runs and the
// run count, so an event's completion takes a single lock.
type partition struct {
	c     *Consumer
	topic string
	id    int32
	log   *slog.Logger

	// scope is the parent of every invocation's context. It is cancelled
	// near the end of the shutdown budget when the partition is revoked or
	// the consumer stops, so handlers see ShouldCancel.
	scope *invocation.Context

	room chan struct{} // signalled when the tracker stops being full

	// env is what handler contexts get: the partition's timers and the
	// blocking hint, which differs between runs on an executor worker
	// (env) and inline runs on the driver (inlineEnv).
	env, inlineEnv *invocation.Env
	// timers runs the partition's durable timers; nil until its segment is
	// open, and always nil when the consumer has no timer store.
	timers *timers.Manager

	mu          sync.Mutex
	tracker     *offsets.Tracker
	keys        keyqueue.Keys[item]
	running     int           // runs ready, queued in the executor or running
	ready       ring          // runs admitted for the intake's driver to start inline (intake.go)
	driver      uint64        // generation of the goroutine driving the intake
	offloadTill int64         // monotonic time until which new runs go to the executor, not inline
	offloadSpan int64         // how long the last offload lasted
	lastSlow    bool          // the last runs timed, or found stuck, were slow (intake.go)
	timersReady bool          // timers are initialised: records may be admitted
	wantRoom    bool          // the driver holds records: signal room
	draining    bool          // set once; nothing new starts after it (also in stopped)
	idle        chan struct{} // closed when draining and running == 0
	marked      int64         // last offset handed to sarama to commit
	stallLogged bool

	// stream is the partition's fetched records, for its status (nil
	// until its intake starts); initial is the offset it was claimed at.
	stream  atomic.Pointer[fetch.Stream]
	initial int64

	// stopped is draining, readable without p.mu: an event about to start
	// checks it last (runOne), so that nothing starts once the partition
	// stops starting work, not even an event already taken off a queue.
	stopped atomic.Bool

	// inline is the driver's inline run (intake.go, inlineRun), the low
	// bit set while a run is under way. The rescuer reads it to find a
	// driver stuck in one run.
	inline atomic.Uint64
	seen   uint64 // inline at the rescuer's previous scan; the rescuer's own
	stuck  int    // consecutive scans that found seen unchanged; the rescuer's own
	// runSeq numbers the driver's inline runs (inlineRun); only the
	// goroutine driving the partition touches it.
	runSeq uint64
	// in is the intake: the claim's records and what the driver keeps
	// between bursts. Only the goroutine driving it touches it.
	in *intake

	// Scratch state of the driver, reused across bursts.
	dec      payload.Decoder
	takeBuf  []*fetch.Record
	admitBuf []*event.Message
	itemBuf  []item
	skipBuf  []int64
	startBuf []task
}

func newPartition(c *Consumer, topic string, id int32) *partition {
	p := &partition{
		c:           c,
		topic:       topic,
		id:          id,
		log:         c.log.With(slog.String("topic", topic), slog.Int("partition", int(id))),
		scope:       invocation.NewScope(),
		env:         &invocation.Env{Block: c.exec.block},
		timersReady: c.opts.Timers == nil,
		keys:        keyqueue.MakeKeys[item](),
		room:        make(chan struct{}, 1),
		tracker:     offsets.New(c.opts.MaxUncommitted),
		idle:        make(chan struct{}),
		marked:      offsets.None,
	}
	p.inlineEnv = &invocation.Env{Block: p.blockDriver}
	p.env.Stopping, p.inlineEnv.Stopping = &p.stopped, &p.stopped
	// Events of this partition waiting for a permit stop waiting when it
	// is revoked or stopped.
	p.scope.AfterFunc(c.opts.Stacks.Events.CancelWaiting)
	return p
}

// admit takes records into the partition, in offset order, and returns how
// many it took. It stops early, keeping nothing of the rest, when
// max_uncommitted offsets are unfinished: the caller holds the remaining
// records and offers them again after a signal on room.
//
// A burst is admitted with one lock for the offsets and one for the key
// queues, rather than one of each per record. The runs it makes ready wait
// in p.ready for the driver to start them (runReady), or go to the
// executor while the partition offloads.
func (p *partition) admit(rs []fetch.Record) int {
	now := time.Now()
	taken := p.takeBuf[:0]
	n := 0
	p.mu.Lock()
	if !p.timersReady {
		// Nothing is processed before the partition's timers are loaded; the
		// driver holds the records until then.
		p.wantRoom = true
		p.mu.Unlock()
		return 0
	}
	for i := range rs {
		r := &rs[i]
		if r.Offset <= p.tracker.Highest() {
			// A rewind after a seek or a redelivered fetch: the offset was
			// taken before and is tracked there.
			n++
			p.c.stats.skip(filter.ReasonStale)
			p.log.Debug("message filtered", slog.String("reason", filter.ReasonStale.String()), slog.Int64("offset", r.Offset))
			continue
		}
		if p.tracker.Full() {
			p.wantRoom = true
			break
		}
		n++
		if err := p.tracker.Take(r.Offset, now); err != nil {
			p.log.Error("offset tracking failed; record left for the next owner", slog.Int64("offset", r.Offset), slog.Any("error", err))
			continue
		}
		taken = append(taken, r)
	}
	p.mu.Unlock()

	// Decode outside the lock; one Message allocation serves the burst.
	msgs := make([]event.Message, len(taken))
	items, skipped, admitted := p.itemBuf[:0], p.skipBuf[:0], p.admitBuf[:0]
	for i, r := range taken {
		taken[i] = nil
		msg := &msgs[i]
		if reason, err := p.decode(r, now, msg); err != nil {
			p.c.stats.undecodable.Add(1)
			p.c.stats.skip(reason)
			toFailureTopic := p.c.opts.Stacks.Undecodable != nil
			what := "undecodable record skipped"
			if toFailureTopic {
				what = "undecodable record; it goes to the failure topic"
			}
			p.log.Error(what, slog.Int64("offset", r.Offset), slog.String("reason", reason.String()), slog.Any("error", err))
			if !toFailureTopic {
				skipped = append(skipped, r.Offset)
				continue
			}
			u := p.undecodable(r, now, err)
			items = append(items, item{ev: u, offset: r.Offset, hash: p.keys.Hash(u.EventKey())})
			continue
		}
		if filter.IsLoop(msg.SourceSystem, msg.SourceSystem != "", p.c.opts.GroupID) {
			skipped = append(skipped, p.filterOut(msg, filter.ReasonSourceSystemLoop))
			continue
		}
		if !p.c.eventTypes.Allowed(msg.Type, msg.HasType) {
			skipped = append(skipped, p.filterOut(msg, filter.ReasonEventType))
			continue
		}
		admitted = append(admitted, msg)
		items = append(items, item{ev: msg, offset: r.Offset, hash: p.keys.Hash(msg.Key)})
	}
	p.takeBuf = taken[:0]
	if len(admitted) > 0 {
		p.c.opts.Stacks.Events.Prefetch(admitted)
	}
	clear(admitted)
	p.admitBuf = admitted[:0]

	start := p.startBuf[:0]
	p.mu.Lock()
	for _, o := range skipped {
		p.finishLocked(o)
	}
	for _, it := range items {
		if p.keys.Push(it.hash, it) {
			start = append(start, task{p: p, it: it})
		}
	}
	if !p.draining && len(start) > 0 {
		p.running += len(start)
		// Queuing under p.mu orders it with drain's purge: a run is either
		// queued before the purge (and removed by it) or sees draining.
		if p.offloadingLocked(monotonicAt(now)) {
			p.c.exec.submit(start...)
		} else {
			for _, t := range start {
				p.ready.Push(t)
			}
		}
	}
	// Skipped offsets may have made the room this burst ran out of; nothing
	// else would say so when no handler is running.
	signal := p.roomLocked()
	p.mu.Unlock()
	if signal {
		p.signalRoom()
	}
	clear(items)
	clear(start)
	p.itemBuf, p.skipBuf, p.startBuf = items[:0], skipped[:0], start[:0]
	return n
}

// blockDriver is event.Context.Blocking for a run on the driver: its run
// is about to wait for something outside the process, so the intake moves
// to a new goroutine now rather than when the rescuer notices.
func (p *partition) blockDriver() (resume func()) {
	if v := p.inline.Load(); v&1 != 0 {
		p.rescue(v)
	}
	return func() {}
}

// filterOut counts and logs a filtered record; the caller finishes its offset.
func (p *partition) filterOut(msg *event.Message, reason filter.Reason) int64 {
	p.c.stats.filtered.Add(1)
	p.c.stats.skip(reason)
	if tracing.Recording() {
		_, span := tracing.StartRemote(nil, tracing.FromHeaders(msg.Headers), p.c.opts.MessageSpans, "message.filtered",
			attribute.String("reason", reason.String()), attribute.String("topic", msg.Topic),
			attribute.Int("partition", int(msg.Partition)), attribute.Int64("offset", msg.Offset), attribute.String("key", msg.Key))
		span.End()
	}
	p.log.Debug("message filtered", slog.String("reason", reason.String()),
		slog.Int64("offset", msg.Offset), slog.String("key", msg.Key))
	return msg.Offset
}

// run handles it and then each further event of the same key, until the
// key's queue is empty or the partition is draining, on the calling
// goroutine, whose run is r. A message that starts asynchronously
// (middleware.Stack.StartsAsync) ends the run: its completion continues
// the key (afterAsync).
func (p *partition) run(it item, r *middleware.Run) {
	for {
		finished, async := p.runOne(it, p.env, nil, r)
		if async {
			return
		}
		next, ok := p.advance(it, finished)
		if !ok {
			return
		}
		it = next
	}
}

// runOne handles one event on the calling goroutine, whose run is r. It
// reports whether its offset is finished, or that it started
// asynchronously, in which case its completion continues the key
// (afterAsync).
func (p *partition) runOne(it item, env *invocation.Env, lease *permitLease, r *middleware.Run) (finished, async bool) {
	if p.stopped.Load() {
		// Left for the next owner: its offset stays unfinished, a timer
		// stays stored.
		if t, ok := it.ev.(*timerItem); ok && t.reserved {
			t.reserved = false
			p.c.opts.Scheduler.EndLease()
		}
		return false, false
	}
	switch it.ev.(type) {
	case *timerItem:
		// Timers and undecodable records take no leased permit, and the
		// driver holds none while they run: their stack takes a permit of
		// its own, and their store writes or dead-letter writes may retry
		// for as long as the store or the broker refuses them.
		lease.end()
		p.runTimer(it, env, r)
		return false, false
	case *middleware.Undecodable:
		lease.end()
		return p.complete(it, p.invoke(p.c.opts.Stacks.Undecodable, it.ev, env, nil, r)), false
	}
	if p.startsAsync(it) {
		p.startAsync(it)
		return false, true
	}
	return p.complete(it, p.invoke(p.c.opts.Stacks.Events, it.ev, env, lease, r)), false
}

// advance records the end of it (finishing its offset if finished) and
// returns the key's next event, if the key has one and the partition is
// not draining.
func (p *partition) advance(it item, finished bool) (item, bool) {
	p.mu.Lock()
	next, ok := p.advanceLocked(it, finished)
	signal := p.roomLocked()
	p.mu.Unlock()
	if signal {
		p.signalRoom()
	}
	return next, ok
}

// advanceLocked is advance under p.mu, without the room signal: the caller
// calls roomLocked before releasing the lock.
func (p *partition) advanceLocked(it item, finished bool) (item, bool) {
	if finished {
		p.finishLocked(it.offset)
	}
	next, ok := p.keys.Done(it.hash)
	if !ok {
		p.running--
		if p.draining && p.running == 0 {
			close(p.idle)
		}
	}
	return next, ok
}

// startsAsync reports whether it starts asynchronously through the stack.
func (p *partition) startsAsync(it item) bool { return p.c.opts.Stacks.Events.StartsAsync(it.ev) }

// asyncEvent is a message in flight through the stack's continuation
// drive (middleware.Stack.Start): one allocation carries the engine's
// whole state for it.
type asyncEvent struct {
	run middleware.Run
	p   *partition
	it  item
	inv invocation.Invocation // the invocation's context (Invocation.Context)
}

// Done implements event.Done: the message's final outcome.
func (a *asyncEvent) Done(err error) {
	a.inv.Context().Invalidate()
	a.p.afterAsync(a.it, err)
}

// startAsync starts a message through the stack and returns at once.
func (p *partition) startAsync(it item) {
	a := &asyncEvent{p: p, it: it}
	ctx := a.inv.Init(p.scope, it.ev.EventKey())
	ctx.SetEnv(p.env, traceOf(it.ev))
	p.c.opts.Stacks.Events.Start(&a.run, ctx, it.ev, a)
}

// afterAsync is run's loop body for a message that finished
// asynchronously, on the thread that reported its outcome. The key's next
// event starts there when it starts asynchronously too (that only queues
// it for the host); anything else goes to the executor.
func (p *partition) afterAsync(it item, err error) {
	next, ok := p.advance(it, p.complete(it, err))
	switch {
	case !ok:
	case p.startsAsync(next):
		p.startAsync(next)
	default:
		p.c.exec.submit(task{p: p, it: next})
	}
}

// invoke runs ev through stack on the calling goroutine, whose run is r.
// A driver passes its lease (nil otherwise), which lends the invocation a
// concurrency permit.
func (p *partition) invoke(stack *middleware.Stack, ev event.Event, env *invocation.Env, lease *permitLease, r *middleware.Run) (err error) {
	ctx := invocation.NewInvocation(p.scope, ev.EventKey())
	ctx.SetEnv(env, traceOf(ev))
	lease.lend(ctx)
	defer ctx.Invalidate()
	defer func() {
		// The handler's panics are caught by the stack's target, and the
		// layers' by the run (middleware.LayerPanic). This is for what
		// passes those: a panic of the target itself. It must
		// not take the process down nor leave the key blocked; the event
		// may be neither handled nor stored: terminal, its offset stays
		// for the next owner rather than being committed as a failure
		// the mode dealt with. complete logs the stack.
		if rec := recover(); rec != nil {
			err = fault.Terminal(&middleware.LayerPanic{Value: rec, Stack: debug.Stack()})
		}
		lease.settle(ctx)
	}()
	return stack.Invoke(r, ctx, ev)
}

// complete decides what an outcome means for the event's offset: finished
// (committed) unless the partition is going away or the failure is
// terminal, in which case it stays unfinished and the next owner of the
// partition handles the event again. It reports whether to finish it.
func (p *partition) complete(it item, err error) bool {
	if err == nil {
		return p.counts(it)
	}
	attrs := []slog.Attr{slog.Int64("offset", it.offset), slog.String("key", it.ev.EventKey()), slog.String("error", err.Error())}
	if lp := (*middleware.LayerPanic)(nil); errors.As(err, &lp) {
		attrs = append(attrs, slog.String("stack", string(lp.Stack)))
	}
	switch {
	case errors.Is(err, invocation.ErrNotStarted):
		p.log.LogAttrs(context.Background(), slog.LevelDebug, "event not started: the partition is going away; the next owner handles it", attrs...)
		return false
	case p.scope.Err() != nil:
		p.log.LogAttrs(context.Background(), slog.LevelWarn, "event aborted: partition is shutting down; the next owner handles it again", attrs...)
		return false
	case fault.IsTerminal(err):
		// Better (c): say loudly that this offset now blocks the partition.
		p.log.LogAttrs(context.Background(), slog.LevelError, "event aborted by a terminal failure; its offset stays uncommitted", attrs...)
		return false
	default:
		// The mode's layers logged the failure (retries spent, a permanent
		// failure, best-effort); the stack's outcome says it is done.
		p.c.stats.failed.Add(1)
		p.log.LogAttrs(context.Background(), slog.LevelDebug, "failed event committed", append(attrs, slog.String("class", fault.ClassOf(err).String()))...)
		return p.counts(it)
	}
}

// counts records a handled event (one that is done for good: success, or
// a failure that is logged and skipped) and reports true.
func (p *partition) counts(it item) bool {
	if it.offset == offsets.None {
		p.c.stats.timers.Add(1)
	} else {
		p.c.stats.handled.Add(1)
	}
	return true
}

// finishLocked marks an offset done. The caller holds p.mu, and calls
// roomLocked before releasing it.
func (p *partition) finishLocked(offset int64) {
	if _, err := p.tracker.Finish(offset); err != nil {
		p.log.Error("offset bookkeeping error", slog.Int64("offset", offset), slog.Any("error", err))
	}
}

// roomLocked reports whether the driver waits for room and now has
// some: the caller then calls signalRoom after releasing p.mu.
func (p *partition) roomLocked() bool {
	if p.wantRoom && !p.tracker.Full() {
		p.wantRoom = false
		return true
	}
	return false
}

func (p *partition) signalRoom() {
	select {
	case p.room <- struct{}{}:
	default:
	}
}

// commitOffset is the offset to commit if it moved since the last call.
func (p *partition) commitOffset() (int64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.tracker.Commit()
	if c == offsets.None || c <= p.marked {
		return 0, false
	}
	p.marked = c
	return c, true
}

// stalled reports whether the oldest unfinished offset has waited longer
// than the stall threshold, logging each change once with the offset.
func (p *partition) stalled(now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	oldest, takenAt, ok := p.tracker.Oldest()
	stalled := ok && now.Sub(takenAt) > p.c.opts.StallThreshold
	if stalled && !p.stallLogged {
		p.log.Error("partition stalled", slog.Int64("oldest_uncommitted_offset", oldest),
			slog.Duration("waiting", now.Sub(takenAt)))
	} else if !stalled && p.stallLogged {
		p.log.Info("partition no longer stalled")
	}
	p.stallLogged = stalled
	return stalled
}

// PartitionStatus is the state of one assigned partition, for metrics.
type PartitionStatus struct {
	Topic     string
	Partition int32
	// HighWaterMark is the offset after the partition's last record as
	// of its last fetch; -1 before the first fetch.
	HighWaterMark int64
	// Position is the offset the partition would be committed at now:
	// after the last of its handled records below every unfinished one,
	// or where it started when none is handled yet; -1 while that is not
	// known.
	Position int64
	// Unfinished is the number of offsets taken and not yet finished.
	Unfinished int
	// Paused: the partition is left out of fetches, holding as many
	// fetched records as it may.
	Paused bool
}

// Lag is how many records the partition has to handle before it is
// caught up; 0 before its first fetch.
func (s PartitionStatus) Lag() int64 {
	if s.HighWaterMark < 0 || s.Position < 0 {
		return 0
	}
	return max(s.HighWaterMark-s.Position, 0)
}

func (p *partition) status() PartitionStatus {
	st := PartitionStatus{Topic: p.topic, Partition: p.id, HighWaterMark: -1, Position: p.initial}
	if s := p.stream.Load(); s != nil {
		st.HighWaterMark, st.Paused = s.HighWaterMark(), s.Paused()
		if start := s.Start(); start >= 0 {
			// Where the stream really started: a sentinel resolved, or
			// an offset out of range moved.
			st.Position = start
		}
	}
	p.mu.Lock()
	if c := p.tracker.Commit(); c != offsets.None {
		st.Position = c
	}
	st.Unfinished = p.tracker.Outstanding()
	p.mu.Unlock()
	return st
}

// outstanding is the number of unfinished offsets.
func (p *partition) outstanding() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tracker.Outstanding()
}

// stopStarting is a drain's first step, taken as soon as the partition is
// going away (core-behavior.md §3.9): no event queued or fetched starts
// from here, and events in flight go on. Queued events and fetched records
// are left for the next owner. It wakes the driver, which then only waits
// for the claim to end. Calling it again does nothing.
func (p *partition) stopStarting() {
	p.mu.Lock()
	if p.draining {
		p.mu.Unlock()
		return
	}
	dropped := p.keys.Close()
	p.draining = true
	p.stopped.Store(true)
	purged, reserved := p.c.exec.purge(p)
	purged += p.ready.Len()
	p.ready = ring{}
	p.running -= purged
	if p.running == 0 {
		close(p.idle)
	}
	p.mu.Unlock()
	for ; reserved > 0; reserved-- {
		p.c.opts.Scheduler.EndLease()
	}
	if n := len(dropped) + purged; n > 0 {
		p.log.Info("queued events left for the next owner", slog.Int("count", n))
	}
	// Events already on their way that wait for a permit leave without
	// one (invocation.ErrNotStarted); those that hold one go on.
	p.c.opts.Stacks.Events.CancelWaiting()
	p.signalRoom()
}

// minReleaseWait is the least time the layers get to let go of a
// drained partition (releaseLayers), even when the drain spent the whole
// shutdown budget.
const minReleaseWait = 250 * time.Millisecond

// releaseLayers tells the stack's layers that the drained partition's
// admitted messages will not run here any more, and waits up to budget
// (at least minReleaseWait) for what they finish first: the
// deduplication ids its handled messages recorded are written before the
// final commit, so that the next owner's lookups find them.
func (p *partition) releaseLayers(budget time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), max(budget, minReleaseWait))
	defer cancel()
	if err := p.c.opts.Stacks.Events.Released(ctx, p.topic, p.id); err != nil {
		p.log.Warn("releasing the partition's layers", slog.Any("error", err))
	}
}

// drain stops the partition: nothing new or queued starts (stopStarting);
// events in flight may finish within budget. Near the end of the budget
// (4/5) their contexts are cancelled with cause; at the end the partition
// stops waiting and leaves what is still running uncommitted.
func (p *partition) drain(budget time.Duration, cause error) {
	p.stopStarting()
	cancelAt := time.NewTimer(budget * 4 / 5)
	defer cancelAt.Stop()
	deadline := time.NewTimer(budget)
	defer deadline.Stop()
	for {
		select {
		case <-p.idle:
			p.scope.Cancel(cause)
			return
		case <-cancelAt.C:
			p.log.Warn("shutdown budget nearly spent; cancelling running handlers")
			p.scope.Cancel(cause)
		case <-deadline.C:
			p.scope.Cancel(cause)
			p.log.Error("handlers still running at the end of the shutdown budget; their events stay uncommitted")
			return
		}
	}
}
