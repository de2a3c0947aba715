package middleware

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/internal/invocation"
)

// panicLog keeps the panics a stack logs.
type panicLog struct {
	mu     sync.Mutex
	panics []string
}

func (l *panicLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *panicLog) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "panic" {
			l.mu.Lock()
			l.panics = append(l.panics, a.Value.String())
			l.mu.Unlock()
		}
		return true
	})
	return nil
}
func (l *panicLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *panicLog) WithGroup(string) slog.Handler      { return l }

func (l *panicLog) logged(want string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range l.panics {
		if strings.Contains(p, want) {
			return true
		}
	}
	return false
}

// asyncAfter is an outer layer whose After waits (as Dedup's record or a
// defer layer's store write does) until the test resumes it.
type asyncAfter struct{ resume chan func() }

func (asyncAfter) Before(*Run) Step { return Continue }
func (l asyncAfter) After(r *Run, err error) Step {
	l.resume <- func() { r.Resume(Result(err)) }
	return Wait
}

// badReleaser asks for its Release and panics in it while armed.
type badReleaser struct{ armed *atomic.Bool }

func (badReleaser) Before(*Run) Step { return Continue }
func (badReleaser) After(r *Run, err error) Step {
	r.ReleaseLater()
	return Result(err)
}
func (l badReleaser) Release(*Run) {
	if l.armed.CompareAndSwap(true, false) {
		panic("release bug")
	}
}

// A Release that panics where the run is about to wait (the layer
// outside already set up its Resume) is logged, and the run goes on with
// that Resume: it is not ended early, and a Run reused for the next event
// does not take the late Resume for its own (found in review).
func TestAReleasePanicLeavesTheRunWhole(t *testing.T) {
	var armed atomic.Bool
	armed.Store(true)
	aa := asyncAfter{resume: make(chan func(), 1)}
	errSecond := errors.New("second event's outcome")
	outcomes := []error{nil, errSecond}
	n := 0
	h := handlerFunc(func(*event.Context, event.Event) error { e := outcomes[n]; n++; return e })
	log := &panicLog{}
	stack := NewStack(Handler(h, nil), aa, badReleaser{&armed}).WithLogger(slog.New(log))
	var r Run
	for i, want := range outcomes {
		ctx, cancel := newInv()
		defer cancel(nil)
		done := make(chan error, 1)
		go func() { done <- stack.Invoke(&r, ctx, &event.Message{}) }()
		resume := <-aa.resume
		select {
		case err := <-done:
			t.Fatalf("event %d ended (%v) before its outer layer's Resume", i, err)
		case <-time.After(50 * time.Millisecond):
		}
		resume()
		if err := <-done; !errors.Is(err, want) {
			t.Fatalf("event %d: outcome %v, want %v", i, err, want)
		}
	}
	if !log.logged("release bug") {
		t.Fatal("the Release's panic was not logged")
	}
}

// panicForKey is a target whose Start panics for one key (a bug in a
// host's target) and succeeds for the others once the test says so.
type panicForKey struct {
	bad     string
	proceed chan struct{}
}

func (t panicForKey) Start(r *Run) Step {
	if r.ev.EventKey() == t.bad {
		panic("target bug")
	}
	<-t.proceed
	return Result(nil)
}
func (panicForKey) Async(event.Event) bool { return false }

// Another run's panic stays with it: the permit this run gives back (as
// its outer layer waits) is granted to a waiting run whose target
// panics. That panic is logged; this run, whose handler succeeded, ends
// with its own outcome once its outer layer resumes it, whether it runs
// by Start or by Invoke on a Run that is then reused (found in review).
func TestAnotherRunsPanicStaysWithIt(t *testing.T) {
	for _, byInvoke := range []bool{false, true} {
		name := map[bool]string{false: "Start", true: "Invoke"}[byInvoke]
		t.Run(name, func(t *testing.T) {
			sched := NewFIFOScheduler(1)
			target := panicForKey{bad: "b", proceed: make(chan struct{})}
			aa := asyncAfter{resume: make(chan func(), 1)}
			log := &panicLog{}
			stack := NewStack(target, aa, Cancellation{}, sched).WithLogger(slog.New(log))
			ctxA, cA := newInvKey("a")
			defer cA(nil)
			ctxB, cB := newInvKey("b")
			defer cB(nil)
			var r Run
			outA := make(outcome, 1)
			go func() {
				if byInvoke {
					outA <- stack.Invoke(&r, ctxA, &event.Message{Key: "a"})
				} else {
					stack.Start(&r, ctxA, &event.Message{Key: "a"}, outA)
				}
			}()
			eventually(t, "A holds the permit", func() bool { return sched.InUse() == 1 })
			_ = start(stack, ctxB, &event.Message{Key: "b"}) // waits for the permit
			eventually(t, "B waits", func() bool { return sched.Waiting() == 1 })
			close(target.proceed) // A succeeds; its release walks B, whose target panics
			eventually(t, "B's panic logged", func() bool { return log.logged("target bug") })
			(<-aa.resume)()
			if err := <-outA; err != nil {
				t.Fatalf("A's outcome %v, want its handler's success", err)
			}
			if !byInvoke {
				return
			}
			sched.Release(nil) // the permit B's target took when it panicked
			ctxC, cC := newInvKey("c")
			defer cC(nil)
			done := make(chan error, 1)
			go func() { done <- stack.Invoke(&r, ctxC, &event.Message{Key: "c"}) }()
			resume := <-aa.resume
			select {
			case err := <-done:
				t.Fatalf("the reused Run's next event ended (%v) before its own Resume", err)
			case <-time.After(50 * time.Millisecond):
			}
			resume()
			if err := <-done; err != nil {
				t.Fatalf("next event's outcome %v", err)
			}
		})
	}
}

// A run's own target that panics in Start is logged; the panic is not
// taken for the event's outcome, since the target may have handed the
// attempt to a host that reports it.
func TestATargetsPanicIsLoggedNotTakenForTheOutcome(t *testing.T) {
	ctx, cancel := newInv()
	defer cancel(nil)
	log := &panicLog{}
	out := start(NewStack(hostTarget{panics: true}, Cancellation{}).WithLogger(slog.New(log)), ctx, &event.Message{})
	select {
	case err := <-out:
		t.Fatalf("outcome %v, want none from a target that panicked", err)
	default:
	}
	if !log.logged("target") {
		t.Fatal("the target's panic was not logged")
	}
}

type badDiscard struct{}

func (badDiscard) Discard() { panic("discard bug") }

// preparedHandler prepares every message with a Prepared whose Discard
// panics (a host's bug); timers fail once, after the test says go.
type preparedHandler struct {
	proceed chan struct{}
	calls   *atomic.Int32
}

func (h preparedHandler) OnMessage(*event.Context, *event.Message) error { return nil }
func (h preparedHandler) OnTimer(*event.Context, *event.Timer) error {
	if h.calls.Add(1) == 1 {
		<-h.proceed
		return errors.New("flaky")
	}
	return nil
}
func (preparedHandler) PrepareMessage(*event.Message) event.Prepared { return badDiscard{} }
func (preparedHandler) StartMessage(_ *event.Context, _ *event.Message, _ event.Prepared, done event.Done) {
	done.Done(nil)
}

// A prepared attempt whose Discard panics, in a run walked on by another
// run's release, still lets the run's outcome leave, and the other run
// goes on with its own (found in review: A ended as a LayerPanic of its
// own, and B without an outcome).
func TestADiscardPanicLetsTheOutcomeLeave(t *testing.T) {
	sched := NewFIFOScheduler(1)
	h := preparedHandler{proceed: make(chan struct{}), calls: new(atomic.Int32)}
	log := &panicLog{}
	stack := NewStack(Handler(h, sched), NewRetry(RetryPolicy{MaxRetries: Unlimited}), Cancellation{}, sched).WithLogger(slog.New(log))
	ctxA, cA := newInvKey("a")
	defer cA(nil)
	var stopping atomic.Bool
	ctxB, cB := newInvKey("b")
	defer cB(nil)
	ctxB.SetEnv(&invocation.Env{Stopping: &stopping}, nil)
	errA := make(chan error, 1)
	go func() { errA <- invoke(stack, ctxA, &event.Timer{Key: "a"}) }()
	eventually(t, "A holds the permit", func() bool { return sched.InUse() == 1 })
	outB := start(stack, ctxB, &event.Message{Key: "b"})
	eventually(t, "B waits", func() bool { return sched.Waiting() == 1 })
	stopping.Store(true) // B is gone when its turn comes, and its prepared attempt discarded
	close(h.proceed)
	if err := <-errA; err != nil {
		t.Fatalf("A's outcome %v, want its retry's success", err)
	}
	if err := <-outB; !errors.Is(err, invocation.ErrNotStarted) {
		t.Fatalf("B's outcome %v, want ErrNotStarted", err)
	}
	if !log.logged("discard bug") {
		t.Fatal("the Discard's panic was not logged")
	}
}

type panickyOut struct{}

func (panickyOut) Done(error) { panic("engine completion bug") }

// The engine's completion that panics is logged, and what the run's
// layers held is still given back (found in review: the permit was lost
// for good).
func TestACompletionPanicStillGivesThePermitBack(t *testing.T) {
	sched := NewFIFOScheduler(1)
	log := &panicLog{}
	stack := NewStack(Func(func(*event.Context, event.Event) error { return nil }), Cancellation{}, sched).WithLogger(slog.New(log))
	ctx, cancel := newInv()
	defer cancel(nil)
	stack.Start(new(Run), ctx, &event.Message{}, panickyOut{})
	if !log.logged("engine completion bug") {
		t.Fatal("the completion's panic was not logged")
	}
	if n := sched.InUse(); n != 0 {
		t.Fatalf("%d permit(s) in use after the run ended", n)
	}
}
