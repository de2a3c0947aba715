package middleware

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/bits"
	"runtime/debug"
	"sync/atomic"

	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/fault"
	"github.com/prosody-events/prosody-go/core/internal/invocation"
	"github.com/prosody-events/prosody-go/core/scheduler"
)

// Demand is the class of work an attempt is: Normal for an event's first
// attempt, Failure for its retries, immediate (Retry) or deferred
// (MessageDefer, TimerDefer). Any layer reads it (Run.Demand); the
// scheduler divides handler time between the two.
type Demand = scheduler.Demand

const (
	Normal  = scheduler.Normal
	Failure = scheduler.Failure
)

// MaxSlots is how many stateful layers (Stateful) a stack may have: a
// run's slots are part of it, so that a run costs no allocation of its
// own. Raising it grows every asynchronous message's allocation (see Run).
const MaxSlots = 4

// Slot is a stateful layer's memory for one run.
type Slot struct {
	N int64
	V any
}

// Stack is a list of layers, outermost first, around a target. It is
// immutable and shared by every run.
type Stack struct {
	layers     []Layer
	slots      int        // how many of a run's slots its layers use
	slotOf     []int8     // a layer's slot, -1 for none
	releasers  []Releaser // by position, nil where the layer is not one
	cancellers []WaitCanceller
	prefetch   []Prefetcher
	scheduler  *Scheduler // the stack's scheduler layer, nil without one
	target     Target
	preparer   preparer // target, if it readies attempts ahead (found once: an assertion per message costs)
	clock      Clock
	log        *slog.Logger // for the panics that must go no further; nil: slog's default
}

// NewStack puts layers (outermost first) around target. It panics when
// more than MaxSlots layers are Stateful, which only a change to the
// stacks of stacks.go can cause, and its tests catch.
func NewStack(target Target, layers ...Layer) *Stack {
	s := &Stack{layers: layers, target: target, clock: realClock{}}
	s.preparer, _ = target.(preparer)
	if len(layers) > 32 {
		panic("middleware: a stack has at most 32 layers")
	}
	slots := 0
	for _, l := range layers {
		idx := int8(-1)
		if _, ok := l.(Stateful); ok {
			if slots == MaxSlots {
				panic(fmt.Sprintf("middleware: a stack has at most %d stateful layers", MaxSlots))
			}
			idx = int8(slots)
			slots++
		}
		s.slotOf = append(s.slotOf, idx)
		rel, _ := l.(Releaser)
		s.releasers = append(s.releasers, rel)
		if c, ok := l.(WaitCanceller); ok {
			s.cancellers = append(s.cancellers, c)
		}
		if p, ok := l.(Prefetcher); ok {
			s.prefetch = append(s.prefetch, p)
		}
		if sched, ok := l.(*Scheduler); ok {
			s.scheduler = sched
		}
	}
	s.slots = slots
	return s
}

// WithLogger returns a copy of s that logs to l the panics it contains
// (see walk).
func (s *Stack) WithLogger(l *slog.Logger) *Stack {
	cp := *s
	cp.log = l
	return &cp
}

// WithClock returns a copy of s whose retry delays run on c (tests use a
// fake clock).
func (s *Stack) WithClock(c Clock) *Stack {
	cp := *s
	cp.clock = c
	return &cp
}

// StartsAsync reports whether the target starts ev without holding the
// goroutine until its outcome: the caller then uses Start, not Invoke.
func (s *Stack) StartsAsync(ev event.Event) bool { return s.target.Async(ev) }

// Prefetch tells the layers that prefetch (Prefetcher) that msgs were
// admitted and will run. It must return before any of them starts.
func (s *Stack) Prefetch(msgs []*event.Message) {
	for _, p := range s.prefetch {
		p.Prefetch(msgs)
	}
}

// Released tells the layers that prefetch (Prefetcher) that a
// partition's claim has ended and it has drained; it returns once they
// are done with it or ctx ends.
func (s *Stack) Released(ctx context.Context, topic string, partition int32) error {
	var errs []error
	for _, p := range s.prefetch {
		if err := p.Released(ctx, topic, partition); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// CancelWaiting ends the waits of runs whose invocation is cancelled (see
// WaitCanceller). The owner of the invocations' parent context calls it
// when that context is cancelled.
func (s *Stack) CancelWaiting() {
	for _, c := range s.cancellers {
		c.CancelWaiting()
	}
}

// Run is one event's way through a stack: where it is, and the memory of
// its stateful layers. The caller provides it (reused by a goroutine that
// invokes events one after another, or embedded in the engine's per-event
// state for events that start asynchronously), so a run allocates nothing.
//
// A run of Start is part of the engine's one allocation per message, so
// its fields are ordered to pack: that allocation stays in a size class
// below 512 bytes, above which the runtime's allocation and the
// collector's scan cost markedly more (a test checks it).
type Run struct {
	s    *Stack
	ctx  *invocation.Context // the invocation
	call *invocation.Context // the context of the attempt under way
	ev   event.Event
	out  event.Done     // Start's receiver of the final outcome
	prep event.Prepared // the target's readied attempt, if any
	wake chan struct{}  // Invoke's: made at its first wait
	// A step that waits is finished by Resume; pend counts which of the
	// two (the runner seeing Wait, Resume) came first: the second goes on.
	resumed Step
	pend    atomic.Int32

	releases uint32 // positions whose layer asked for Release
	// grantedAt is when the attempt under way got its permit, on the
	// scheduler's clock in units of 2^grantShift ns, for the handler time
	// charged to its key (see grantTime).
	grantedAt uint32
	pos       int8 // the layer being run; len(layers) (at most 32) is the target, -1 before the first
	demand    Demand
	// handedOff: the target of a run of Start is running; its outcome
	// resumes the run without the pend handshake (startTarget).
	handedOff bool
	// reached: an attempt of the run got to the target (the handler), so
	// the event's work has started (Cancellation).
	reached bool

	// invoked is when the attempt under way reached the handler (on the
	// telemetry clock; 0 when not timed), for the telemetry layer.
	invoked int64

	slots [MaxSlots]Slot
}

// reset readies r for a run. A run is reset once per event and lives on
// the heap, where every pointer written is a write barrier while the
// collector runs, so it writes only what the previous run left otherwise:
// the resumed step is written before it is read, and each stateful
// layer's Before sets its slot before its After can read it.
func (r *Run) reset(s *Stack, ctx *invocation.Context, ev event.Event, out event.Done) {
	r.s, r.ctx, r.call, r.ev, r.out = s, ctx, ctx, ev, out
	r.demand, r.pos, r.reached = Normal, -1, false
	// pend is 0: the second of the two sides of a wait resets it. What a
	// run left behind only if it was abandoned (a panic that went on past
	// it): releases it never made (not made now either: the run's state
	// is not to be trusted) and a prepared attempt.
	r.releases = 0
	if r.prep != nil {
		r.discardPrepared()
	}
}

// Invoke runs ev through the stack in the invocation ctx on the calling
// goroutine and returns its outcome, blocking where a step waits (for a
// concurrency slot, a retry's delay, an asynchronous handler). r is the
// caller's, reused across calls; it must not be in use by another run.
func (s *Stack) Invoke(r *Run, ctx *invocation.Context, ev event.Event) error {
	r.reset(s, ctx, ev, nil)
	st := Continue
	for {
		if done, err := r.advanceRecovering(st); done {
			r.finish()
			return err
		}
		st = r.block()
	}
}

// Start runs ev through the stack in the invocation ctx and returns as
// soon as a step waits; whoever finishes that step walks on, on their own
// goroutine or thread. out (never nil) gets the final outcome once,
// possibly before Start returns. r is the caller's to reuse only once
// the walk that called out has returned: it still gives back, after out
// returns, what the run's layers held.
func (s *Stack) Start(r *Run, ctx *invocation.Context, ev event.Event, out event.Done) {
	r.reset(s, ctx, ev, out)
	if s.preparer != nil {
		s.preparer.prepare(r)
	}
	r.walk(Continue)
}

// walk is Start's way on from step st.
//
// A walk lets no panic out: the one of a layer is the run's outcome
// (advanceRecovering); any other (the target's Start, the engine's
// completion, a prepared attempt's Discard) is logged, and the run is
// left to the Resume still to come, if any; what the run's layers asked
// to give back is given back even when the engine's completion panics.
// A walk runs where something else's step is under way: on a host's
// thread, on another run's goroutine that gave back a permit this run
// was waiting for, on a store's callback. Letting the panic go on would
// end that other step half-way, or the process.
func (r *Run) walk(st Step) {
	s := r.s
	defer s.contain("on an event's way through the stack, outside its layers; the event may be left without an outcome, holding what it held (a concurrency permit) until its partition is released")
	done, err := r.advanceRecovering(st)
	if !done {
		return
	}
	out := r.out
	r.discardPrepared()
	// The outcome leaves first, so that an event it starts (the key's
	// next) is first in line for what the run releases.
	defer r.releaseNow()
	out.Done(err)
}

// contain, deferred, logs a panic that must go no further (see walk).
func (s *Stack) contain(what string) {
	if rec := recover(); rec != nil {
		s.logPanic(what, rec)
	}
}

func (s *Stack) logPanic(what string, rec any) {
	if p, ok := rec.(passing); ok {
		rec = p.value
	}
	log := s.log
	if log == nil {
		log = slog.Default()
	}
	log.Error("middleware: a panic "+what,
		slog.Any("panic", rec), slog.String("stack", string(debug.Stack())))
}

// blocking reports whether the run is driven by Invoke, whose caller
// blocks where a step waits; a run of Start always has a receiver of its
// outcome. (Not a field: the engine's allocation per asynchronous message
// has no byte to spare, see Run.)
func (r *Run) blocking() bool { return r.out == nil }

// finish ends a run of Invoke.
func (r *Run) finish() {
	r.discardPrepared()
	r.releaseNow()
}

// advanceRecovering is advance that turns a panic of one of the run's
// layers into that layer's step: a terminal failure (a *LayerPanic),
// which the layers outside it see as they would any (the scheduler gives
// its permit back, retries and deferral leave it be) and which leaves the
// event uncommitted for the next owner. Without it the process would end
// (on a goroutine of the engine's), or the event and its key's later
// events would never get an outcome (on a host's thread).
//
// A panic of the target's own Start goes on (see passing): the target may
// already have handed the attempt to a host that will report its
// outcome. Another run walked on by this one's step (a permit this run
// gave back, granted to a waiting run) keeps its panics (walk), and so
// does a Release (releaseNow).
func (r *Run) advanceRecovering(st Step) (done bool, err error) {
	for {
		var lp *LayerPanic
		if done, err, lp = r.advanceOrPanic(st); lp == nil {
			return done, err
		}
		// From the layer that panicked (its After is skipped, as after
		// a Before's Result) outwards.
		st = Result(fault.Terminal(lp))
	}
}

// advanceOrPanic is advance, or the panic of a layer of the run.
func (r *Run) advanceOrPanic(st Step) (done bool, err error, lp *LayerPanic) {
	defer func() {
		rec := recover()
		if rec == nil {
			return
		}
		if _, ok := rec.(passing); ok {
			panic(rec)
		}
		lp = &LayerPanic{Value: rec, Stack: debug.Stack()}
	}()
	done, err = r.advance(st)
	return done, err, nil
}

// passing carries a panic that is not a layer's (the target's) past the
// run's advanceRecovering, up to Invoke's caller or the walk that
// contains it.
type passing struct{ value any }

func (p passing) Error() string { return fmt.Sprint(p.value) }

// passOn, deferred, marks a panic going through as passing.
func passOn() {
	if rec := recover(); rec != nil {
		if _, ok := rec.(passing); ok {
			panic(rec)
		}
		panic(passing{rec})
	}
}

// LayerPanic is the outcome of an event whose layer panicked: a bug in
// the layer, which leaves the event uncommitted.
type LayerPanic struct {
	Value any
	Stack []byte // the goroutine's stack where the panic was recovered
}

func (e *LayerPanic) Error() string { return fmt.Sprintf("middleware panicked: %v", e.Value) }

// advance applies steps from st on until the run ends (done, with its
// outcome) or a step waits for a Resume still to come.
func (r *Run) advance(st Step) (done bool, err error) {
	layers := r.s.layers
	for {
		switch st.op {
		case opContinue:
			// Inward: the next layer's Before, or the target.
			r.pos++
			if int(r.pos) < len(layers) {
				st = layers[r.pos].Before(r)
			} else if st = r.startTarget(); st.op == opWait && !r.blocking() {
				// Started by Start: the handler's outcome walks on when
				// it comes, possibly already has (see startTarget). The
				// run is no longer this goroutine's to touch.
				return false, nil
			}
		case opResult:
			// From a Before (that layer's After is skipped), the target,
			// or an After: the next layer out gets it.
			r.pos--
			if r.pos < 0 {
				return true, st.err
			}
			st = layers[r.pos].After(r, st.err)
		case opRetry:
			r.releaseNow()
			r.dropLent()
			r.sleep(st)
			st = Wait
		case opWait:
			r.releaseNow()
			if r.blocking() && r.wake == nil {
				r.wake = make(chan struct{}, 1)
			}
			if r.pend.Add(1) == 1 {
				return false, nil // Resume goes on
			}
			st = r.resumed
			r.pend.Store(0)
		default:
			panic(fmt.Sprintf("middleware: unknown step %d", st.op))
		}
	}
}

// startTarget starts the handler's attempt. In a run of Start, a target
// that waits hands the run over with no handshake: its outcome (Done)
// walks on wherever it arrives, even inside the target's Start, and the
// walk that started it returns at once. A handler's outcome is the one
// step of a run that comes from another thread every time (a host's), so
// it is kept to what the old hand-written continuation cost.
func (r *Run) startTarget() Step {
	r.reached = true
	defer passOn()
	if r.blocking() {
		return r.s.target.Start(r)
	}
	r.handedOff = true
	st := r.s.target.Start(r)
	if st.op != opWait {
		// An outcome at once, and so no Resume: the run is still ours.
		r.handedOff = false
	}
	return st
}

// Resume finishes a step that returned Wait with the step it stands for
// (Continue or Result after a Before; Result or RetryAfter after an After;
// Result after the target's Start). It may be called from any goroutine,
// even before the layer has returned Wait, and exactly once per Wait. In a
// run of Start it walks on on the calling goroutine.
func (r *Run) Resume(st Step) {
	if r.handedOff {
		r.handedOff = false
		r.walk(st)
		return
	}
	r.resumed = st
	if r.pend.Add(1) == 1 {
		return // the runner has not seen its Wait yet: it goes on
	}
	r.pend.Store(0)
	if r.blocking() {
		r.wake <- struct{}{}
		return
	}
	r.walk(r.resumed)
}

// Done implements event.Done: an asynchronous handler's outcome.
func (r *Run) Done(err error) { r.Resume(Result(err)) }

// block waits, for Invoke, for the Resume of the step that waits. The
// goroutine says it blocks (event.Context.Blocking), so that the engine
// has another goroutine take the runs queued behind it: a run waiting
// for a permit must not keep others from asking for one, since the
// scheduler picks among those that ask. A cancelled invocation ends the
// runs waiting in layers that hold waiters (the scheduler), this one
// among them if it is one.
func (r *Run) block() Step {
	resume := r.ctx.Blocking()
	defer resume()
	select {
	case <-r.wake:
	case <-r.ctx.Done():
		r.s.CancelWaiting()
		<-r.wake
	}
	return r.resumed
}

// sleep waits out a retry's delay, then goes on inward; a cancellation of
// the invocation first ends the run with its cause.
func (r *Run) sleep(st Step) {
	var won atomic.Bool
	var stop atomic.Pointer[func() bool]
	stopCancel := r.ctx.AfterFunc(func() {
		if won.CompareAndSwap(false, true) {
			if s := stop.Load(); s != nil {
				(*s)()
			}
			r.Resume(Result(r.ctx.Cause()))
		}
	})
	stopTimer := r.s.clock.AfterFunc(st.delay, func() {
		if won.CompareAndSwap(false, true) {
			stopCancel()
			r.Resume(Continue)
		}
	})
	stop.Store(&stopTimer)
}

// dropLent gives a permit lent to the invocation (a driver's lease, a
// deferred retry's reservation) back to the stack's scheduler before the
// run waits out a retry's backoff, which holds no permit. The scheduler
// layer already gave it back when its own attempt failed; this is for a
// failure outside it (a defer layer whose store refuses), which would
// otherwise keep a permit through every backoff until the store is back.
func (r *Run) dropLent() {
	if sched := r.s.scheduler; sched != nil && r.ctx.Lent() == sched.id {
		r.ctx.DropPermit()
		sched.s.Release()
	}
}

// releaseNow calls Release of the layers that asked for it.
func (r *Run) releaseNow() {
	if r.releases == 0 {
		return
	}
	// A release is made where the run's step must go on (before it waits,
	// or once its outcome has left): a Release that panics is logged, and
	// the others are still made. Each request leaves before its Release
	// runs, so none is made twice.
	defer func() {
		if rec := recover(); rec != nil {
			r.s.logPanic("in a layer giving back what it held; the rest is given back and the run goes on", rec)
			r.releaseNow()
		}
	}()
	for r.releases != 0 {
		i := bits.TrailingZeros32(r.releases)
		r.releases &= r.releases - 1
		r.s.releasers[i].Release(r)
	}
}

func (r *Run) discardPrepared() {
	if r.prep == nil {
		return
	}
	p := r.prep
	r.prep = nil
	// A host's Discard that panics must not keep the outcome from
	// leaving (walk).
	defer r.s.contain("discarding a prepared attempt; the run goes on")
	p.Discard()
}

// Demand is the class of the attempt under way.
func (r *Run) Demand() Demand { return r.demand }

// Slot is the memory of the running layer, which must be Stateful.
func (r *Run) Slot() *Slot { return &r.slots[r.s.slotOf[r.pos]] }

// ReleaseLater asks for the running layer's Release (see Releaser).
func (r *Run) ReleaseLater() { r.releases |= 1 << uint(r.pos) }
