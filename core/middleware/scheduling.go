package middleware

import (
	"sync/atomic"

	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/internal/invocation"
	"github.com/prosody-events/prosody-go/core/scheduler"
)

// Scheduler is the layer that holds the scheduler's place in every stack
// (core-behavior.md §4.10): an attempt goes on inward once it holds one
// of max_concurrency permits, and the scheduler behind it (package
// scheduler: fair, or first come first served) alone decides which
// waiting attempt gets the next one. It sits inside Retry, so an event
// waiting out a backoff holds no permit, and a retry asks as failure
// demand (Run.Demand).
//
// The handler time of each attempt under its permit is charged to its key
// and demand class when the attempt ends, on the scheduler's clock (a
// clock of a millisecond's resolution in a client: quick attempts mostly
// read no time, and a few read a tick, which sums right over many).
//
// A waiting attempt whose invocation is cancelled leaves the queue when
// CancelWaiting runs, with the cancellation cause and no permit:
// subscribing every waiter to its context's cancellation cost more than
// the rest of an event's trip through the engine, and an invocation is
// cancelled only with its partition, which calls CancelWaiting once.
type Scheduler struct {
	id uint32 // tells a permit of this scheduler lent to an invocation (Lease)
	s  scheduler.Scheduler[Waiter]
}

// Waiter is what waits for a permit: a run in a stack (*Run), or a
// permit asked for ahead of the run that will use it (Reserve).
type Waiter interface {
	schedulerKey() scheduler.Key
	granted(l *Scheduler)
	gone() bool
	dismissed()
	due() bool
}

// NewFairScheduler returns the layer of a fair scheduler.
func NewFairScheduler(opts scheduler.Options) *Scheduler {
	l := &Scheduler{id: schedulerIDs.Add(1)}
	l.s = scheduler.NewFair(opts, l.callbacks())
	return l
}

// NewFIFOScheduler returns the layer of a first-come-first-served
// scheduler with n permits, the fair one's baseline.
func NewFIFOScheduler(n int) *Scheduler {
	l := &Scheduler{id: schedulerIDs.Add(1)}
	l.s = scheduler.NewFIFO(n, l.callbacks())
	return l
}

func (l *Scheduler) callbacks() scheduler.Callbacks[Waiter] {
	return scheduler.Callbacks[Waiter]{
		Granted:   func(w Waiter) { w.granted(l) },
		Key:       Waiter.schedulerKey,
		Gone:      Waiter.gone,
		Dismissed: Waiter.dismissed,
		Due:       Waiter.due,
	}
}

func (r *Run) schedulerKey() scheduler.Key { return keyOf(r.ev) }

func (r *Run) granted(l *Scheduler) {
	r.grantedAt = grantTime(l.s.Now())
	r.Resume(Continue)
}

// due: a timer's first attempt (scheduler.Callbacks.Due). The retry
// timers of deferred keys are not: they reserve their permit as failure
// demand (Reserve), and a retry's backoff is no deadline.
func (r *Run) due() bool {
	_, timer := r.ev.(*event.Timer)
	return timer && r.demand == Normal
}

func (r *Run) gone() bool { return r.ctx.Err() != nil || r.ctx.Stopping() }

// dismissed ends the wait of a run that is gone: with its invocation's
// cancellation cause, or, when its partition stopped starting work while
// the invocation was not cancelled, with invocation.ErrNotStarted (never
// with no error, which would count an event that never ran as handled).
func (r *Run) dismissed() {
	cause := r.ctx.Cause()
	if cause == nil {
		cause = invocation.ErrNotStarted
	}
	r.Resume(Result(cause))
}

// Reserve asks for a permit ahead of the run that will use it, for key
// with demand d: the engine reserves one for a deferred key's retry
// before the retry takes its key's turn, so that the key's later
// messages, which only join the deferred ones, do not wait behind a
// retry that waits for a permit. It returns true when the caller holds a
// permit at once. Otherwise done is called later, with true once the
// caller holds one, or with false if gone reports true when its turn
// comes or when waits are cancelled (CancelWaiting). The holder notes
// the grant's GrantMark, lends the permit to the invocation that uses it
// (invocation.Context.LendHeld with ID and the mark, so that the time it
// was held before the attempt is charged) and gives it back with EndLease
// unless the invocation dropped it.
func (l *Scheduler) Reserve(key scheduler.Key, d Demand, gone func() bool, done func(granted bool)) bool {
	return l.s.Acquire(&reservation{key: key, isGone: gone, done: done}, d)
}

// reservation is a Waiter of Reserve.
type reservation struct {
	key    scheduler.Key
	isGone func() bool
	done   func(bool)
}

func (v *reservation) schedulerKey() scheduler.Key { return v.key }
func (v *reservation) granted(*Scheduler)          { v.done(true) }
func (v *reservation) gone() bool                  { return v.isGone() }
func (v *reservation) dismissed()                  { v.done(false) }
func (v *reservation) due() bool                   { return false }

// schedulerIDs numbers scheduler layers from 1: 0 means no lent permit.
var schedulerIDs atomic.Uint32

// Policy is the scheduler behind the layer.
func (l *Scheduler) Policy() scheduler.Scheduler[Waiter] { return l.s }

// ID identifies the scheduler's permits lent to an invocation (Lease).
func (l *Scheduler) ID() uint32 { return l.id }

// Lease takes a permit for a goroutine that runs handlers one after
// another (a partition's driver), if one is free and no attempt waits
// for one: the scheduler has nothing to decide then. The goroutine lends
// it to each invocation it runs (invocation.Lend), whose attempt then
// takes no permit of its own: two atomic operations on one shared word
// per event, which both CPUs kept writing, become two per series of
// events. The first attempt to end while others wait gives the permit
// back (After), so the scheduler decides again from there. End the lease
// with EndLease once the series is over, unless an invocation dropped it
// (its Lent is 0 after the handler).
func (l *Scheduler) Lease() bool { return l.s.TryAcquire() }

// EndLease releases a leased permit.
func (l *Scheduler) EndLease() { l.s.Release() }

// shortWait reports whether an attempt asking for a permit now would wait
// behind no more than a few rounds of the permits (16 times as many
// attempts as there are permits).
func (l *Scheduler) shortWait() bool { return l.s.Waiting() < 16*l.s.Size() }

// InUse is the number of permits taken.
func (l *Scheduler) InUse() int { return l.s.InUse() }

// Waiting is the number of attempts waiting for a permit.
func (l *Scheduler) Waiting() int { return l.s.Waiting() }

// Before implements Layer: the run goes on with a permit, at once if one
// is free and nobody waits (or its invocation was lent one, see Lease),
// otherwise once the scheduler grants it one.
func (l *Scheduler) Before(r *Run) Step {
	if r.ctx.Lent() == l.id {
		// A permit reserved ahead of the run is charged from its grant:
		// it was held, and no other attempt could use it, from then.
		if r.grantedAt = r.ctx.TakeHeldSince(); r.grantedAt == 0 {
			r.grantedAt = grantTime(l.s.Now())
		}
		return Continue
	}
	if l.s.Acquire(r, r.demand) {
		r.grantedAt = grantTime(l.s.Now())
		return Continue
	}
	return Wait
}

// GrantMark is the time of a grant, now, as invocation.Context.LendHeld
// takes it.
func (l *Scheduler) GrantMark() uint32 { return max(grantTime(l.s.Now()), 1) }

// After implements Layer. The attempt's handler time is charged; the
// permit is released once the run's outcome has left the stack (Release),
// so that the key's next event asks for it with this attempt's time on
// its key. A permit lent to the invocation goes back to the scheduler
// (and the invocation drops it) when the attempt failed, since a retry
// may wait out a backoff first, and when attempts wait for a permit, so
// that the scheduler picks who goes next.
func (l *Scheduler) After(r *Run, err error) Step {
	if used := usedSince(r.grantedAt, l.s.Now()); used > 0 {
		l.s.Charge(r, r.demand, used)
	}
	if r.ctx.Lent() != l.id {
		r.ReleaseLater()
	} else if err != nil || l.s.Waiting() > 0 {
		r.ctx.DropPermit()
		r.ReleaseLater()
	}
	return Result(err)
}

// Release implements Releaser.
func (l *Scheduler) Release(*Run) { l.s.Release() }

// CancelWaiting implements WaitCanceller: attempts waiting for a permit
// whose invocation is cancelled end with the cancellation cause, without
// one.
func (l *Scheduler) CancelWaiting() { l.s.Cancel() }

// keyOf is the scheduler's key of ev: its key in its partition.
func keyOf(ev event.Event) scheduler.Key {
	if topic, partition, key, _, ok := handled(ev); ok {
		return scheduler.KeyOf(topic, partition, key)
	}
	return scheduler.KeyOf("", 0, ev.EventKey())
}

// A run keeps its grant time in 32 bits, in units of 2^16 ns (66 µs),
// since the engine's allocation per asynchronous message has no room for
// more (see Run): the handler time charged is exact to a unit, and wraps
// for a single attempt longer than three days, which handler_timeout or
// a stall catches long before.
const grantShift = 16

func grantTime(now int64) uint32 { return uint32(now >> grantShift) }

func usedSince(granted uint32, now int64) int64 {
	return int64(grantTime(now)-granted) << grantShift
}
