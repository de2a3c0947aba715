package middleware

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prosody-events/prosody-go/core/fault"
	"github.com/prosody-events/prosody-go/core/internal/invocation"
	"github.com/prosody-events/prosody-go/core/watchdog"
)

// Timeouts cancels handler attempts that run longer than a limit: the
// handler sees ShouldCancel become true and should return; its result then
// counts as a transient failure unless it succeeded anyway.
//
// A runtime timer per attempt cost more than the rest of the engine's
// per-event work put together, so one watchdog goroutine instead scans the
// attempts that are running every tick of limit/20, clamped to
// [5 ms, 1 s]. Attempts are timed in the watchdog's ticks, not read from
// the clock (a clock read was a tenth of an attempt's cost): an attempt
// records the number of ticks so far and is cancelled once limit has
// passed in whole ticks (see scan). A ticker never fires early (it drops
// ticks when the watchdog is late), so an attempt is never cancelled
// before limit, and usually before limit + 3 ticks.
//
// Attempts register in a table of slots without a lock: an attempt claims
// a free slot, picked at random, with a compare-and-swap, and clears it
// when it ends. The table grows (rarely, under a mutex) when it is crowded,
// so it is only as large as the peak number of concurrent attempts needs.
// The watchdog sleeps while no attempt runs.
type Timeouts struct {
	limit time.Duration
	tick  time.Duration
	ticks int64        // limit in ticks, rounded up
	seq   atomic.Int64 // ticks of the watchdog so far, from 1: an attempt's start

	tables atomic.Pointer[[]*slotTable] // every table made, the newest last
	grow   sync.Mutex

	ticker  *watchdog.Ticker // sleeps while no attempt runs
	stop    chan struct{}
	stopped sync.WaitGroup
}

// slot holds one running attempt. The attempt claims it by swapping ctx
// from nil, then sets started; it clears started before ctx when it ends.
// Padded to a cache line so attempts on different CPUs do not contend.
type slot struct {
	ctx     atomic.Pointer[invocation.Context]
	started atomic.Int64 // Timeouts.seq when the attempt began; 0 while being claimed
	_       [48]byte
}

type slotTable struct{ slots []slot }

// probes is how many random slots an attempt tries before it grows the
// table.
const probes = 4

// NewTimeouts returns a Timeouts for limit (<= 0: no limit) and starts its
// watchdog. Stop it when the consumer stops.
func NewTimeouts(limit time.Duration) *Timeouts { return newTimeouts(limit, true) }

// newTimeouts is NewTimeouts; without watch no goroutine ticks, and tests
// tick by hand (tick).
func newTimeouts(limit time.Duration, watch bool) *Timeouts {
	t := &Timeouts{
		limit: limit,
		tick:  min(max(limit/20, 5*time.Millisecond), time.Second),
		stop:  make(chan struct{}),
	}
	t.ticks = int64((limit + t.tick - 1) / t.tick)
	t.ticker = watchdog.NewTicker(t.tick)
	t.seq.Store(1)
	tables := []*slotTable{{slots: make([]slot, 64)}}
	t.tables.Store(&tables)
	if limit > 0 && watch {
		t.stopped.Add(1)
		go t.watch()
	}
	return t
}

// tick is one tick of the watchdog, for tests that drive it by hand.
func (t *Timeouts) tickOnce() {
	t.seq.Add(1)
	t.scan()
}

// Stop ends the watchdog. Attempts still running are no longer timed.
func (t *Timeouts) Stop() {
	select {
	case <-t.stop:
	default:
		close(t.stop)
	}
	t.stopped.Wait()
}

// Enabled reports whether attempts are timed (and so each gets a context
// of its own from this layer).
func (t *Timeouts) Enabled() bool { return t.limit > 0 }

// UsesSlot implements Stateful: the slot holds the attempt's entry in
// the watchdog's table.
func (t *Timeouts) UsesSlot() {}

// Before implements Layer: the attempt gets a context of its own (the
// handler's), timed by the watchdog.
func (t *Timeouts) Before(r *Run) Step {
	if t.limit <= 0 {
		return Continue
	}
	attempt := r.ctx.Attempt()
	r.Slot().V = t.begin(attempt)
	r.call = attempt
	return Continue
}

// After implements Layer: the attempt ends, and a transient failure of an
// attempt that timed out is reported as the timeout (the log then says
// why), with the handler's own error in its chain.
func (t *Timeouts) After(r *Run, err error) Step {
	if t.limit <= 0 {
		return Result(err)
	}
	mem := r.Slot()
	s := mem.V.(*slot)
	mem.V = nil
	attempt := r.call
	r.call = r.ctx
	s.started.Store(0)
	s.ctx.Store(nil)
	timedOut := attempt.Cause() == invocation.ErrTimeout
	attempt.Invalidate()
	if err != nil && timedOut && r.ctx.Err() == nil && fault.ClassOf(err) == fault.ClassTransient {
		return Result(timeoutError{err})
	}
	// Otherwise the attempt's own result: a permanent or terminal verdict
	// (a host's abort) keeps its class after a timeout.
	return Result(err)
}

// begin registers an attempt; clearing the returned slot ends it.
func (t *Timeouts) begin(ctx *invocation.Context) *slot {
	for {
		tables := *t.tables.Load()
		tab := tables[len(tables)-1]
		n := uint32(len(tab.slots))
		i := rand.Uint32()
		for p := uint32(0); p < probes; p++ {
			s := &tab.slots[(i+p)%n]
			if s.ctx.Load() == nil && s.ctx.CompareAndSwap(nil, ctx) {
				// After claiming: either the watchdog sees this slot in its
				// last scan before sleeping, or this wakes it.
				t.ticker.Wake()
				// Read after the watchdog is known to be awake, so that it
				// counts the ticks from here on.
				s.started.Store(t.seq.Load())
				return s
			}
		}
		t.growFrom(len(tables))
	}
}

// growFrom adds a table twice the size of the newest unless another
// attempt already did. Old tables stay, still scanned, for the attempts in
// them and any that land there later.
func (t *Timeouts) growFrom(seen int) {
	t.grow.Lock()
	defer t.grow.Unlock()
	tables := *t.tables.Load()
	if len(tables) != seen {
		return
	}
	next := append(tables[:len(tables):len(tables)], &slotTable{slots: make([]slot, 2*len(tables[len(tables)-1].slots))})
	t.tables.Store(&next)
}

// scan cancels expired attempts and reports whether any attempt runs.
func (t *Timeouts) scan() (busy bool) {
	now := t.seq.Load()
	for _, tab := range *t.tables.Load() {
		for i := range tab.slots {
			s := &tab.slots[i]
			ctx := s.ctx.Load()
			if ctx == nil {
				continue
			}
			busy = true
			started := s.started.Load()
			// started belongs to ctx only if the slot still holds ctx: a
			// context is never registered twice, so an unchanged pointer
			// means an unchanged attempt.
			// Of the ticks counted since the attempt began, the first may
			// have been under way already, and the second may have fired
			// before it began and waited for a late watchdog (a ticker
			// keeps one tick): only those after them are whole.
			if started != 0 && now-started-2 >= t.ticks && s.ctx.Load() == ctx {
				ctx.CancelTimeout()
			}
		}
	}
	return busy
}

func (t *Timeouts) watch() {
	defer t.stopped.Done()
	t.ticker.Run(t.stop, func(tick bool) bool {
		if tick {
			t.seq.Add(1)
		}
		return t.scan()
	})
}

// timeoutError keeps the handler's own error in the chain while classifying
// as the timeout.
type timeoutError struct{ err error }

func (e timeoutError) Error() string   { return "handler timed out: " + e.err.Error() }
func (e timeoutError) Unwrap() []error { return []error{invocation.ErrTimeout, e.err} }
