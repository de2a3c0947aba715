package middleware

import (
	"sync"
	"time"

	"github.com/prosody-events/prosody-go/core/event"
)

// Timeouts cancels handler attempts that run longer than a limit: the
// handler sees ShouldCancel become true and should return; its result then
// counts as a transient failure unless it succeeded anyway.
//
// A runtime timer per attempt cost more than the rest of the engine's
// per-event work put together, so one watchdog goroutine instead scans the
// attempts that are running (a table that is only as large as the peak
// number of concurrent attempts) every tick of limit/20, clamped to
// [5 ms, 1 s]. An attempt is therefore cancelled between limit and
// limit+tick after it started.
type Timeouts struct {
	limit time.Duration
	tick  time.Duration

	mu      sync.Mutex
	running []attempt // slot i is free when ctx is nil
	free    []int
	active  int
	wake    chan struct{} // the watchdog sleeps on it while nothing runs
	stop    chan struct{}
	stopped sync.WaitGroup
}

type attempt struct {
	ctx     *event.Context
	started time.Time
}

// NewTimeouts returns a Timeouts for limit (<= 0: no limit) and starts its
// watchdog. Stop it when the consumer stops.
func NewTimeouts(limit time.Duration) *Timeouts {
	t := &Timeouts{
		limit: limit,
		tick:  min(max(limit/20, 5*time.Millisecond), time.Second),
		wake:  make(chan struct{}, 1),
		stop:  make(chan struct{}),
	}
	if limit > 0 {
		t.stopped.Add(1)
		go t.watch()
	}
	return t
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

// Middleware gives each attempt its own context and times it.
func (t *Timeouts) Middleware() Middleware {
	return func(next Invoker) Invoker {
		if t.limit <= 0 {
			return next
		}
		return func(ctx *event.Context, ev event.Event) error {
			attempt, done := ctx.WithTimeout(0)
			slot := t.begin(attempt)
			err := next(attempt, ev)
			t.end(slot)
			timedOut := attempt.Cause() == event.ErrTimeout
			done()
			if err != nil && timedOut && ctx.Err() == nil {
				// The handler gave up because of the timeout (or failed for some
				// other reason while timed out): report the timeout, so the
				// outcome is transient and the log says why.
				return timeoutError{err}
			}
			return err
		}
	}
}

func (t *Timeouts) begin(ctx *event.Context) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	var i int
	if n := len(t.free); n > 0 {
		i = t.free[n-1]
		t.free = t.free[:n-1]
	} else {
		i = len(t.running)
		t.running = append(t.running, attempt{})
	}
	t.running[i] = attempt{ctx: ctx, started: time.Now()}
	t.active++
	if t.active == 1 {
		select {
		case t.wake <- struct{}{}:
		default:
		}
	}
	return i
}

func (t *Timeouts) end(i int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.running[i] = attempt{}
	t.free = append(t.free, i)
	t.active--
}

func (t *Timeouts) watch() {
	defer t.stopped.Done()
	ticker := time.NewTicker(t.tick)
	defer ticker.Stop()
	var expired []*event.Context
	for {
		select {
		case <-t.stop:
			return
		case <-ticker.C:
		}
		t.mu.Lock()
		if t.active == 0 {
			// Idle: stop ticking until an attempt begins.
			t.mu.Unlock()
			ticker.Stop()
			select {
			case <-t.stop:
				return
			case <-t.wake:
			}
			ticker.Reset(t.tick)
			continue
		}
		now := time.Now()
		for _, a := range t.running {
			if a.ctx != nil && now.Sub(a.started) >= t.limit {
				expired = append(expired, a.ctx)
			}
		}
		t.mu.Unlock()
		for i, ctx := range expired {
			ctx.CancelTimeout()
			expired[i] = nil
		}
		expired = expired[:0]
	}
}

// timeoutError keeps the handler's own error in the chain while classifying
// as the timeout.
type timeoutError struct{ err error }

func (e timeoutError) Error() string   { return "handler timed out: " + e.err.Error() }
func (e timeoutError) Unwrap() []error { return []error{event.ErrTimeout, e.err} }
