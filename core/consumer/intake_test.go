package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/fetch"
	"github.com/prosody-events/prosody-go/core/internal/invocation"
	"github.com/prosody-events/prosody-go/core/middleware"
	"github.com/prosody-events/prosody-go/core/timerstore"
)

// eventually polls cond every millisecond for up to 5 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// newQuickPartition is a test partition whose handler only counts the
// events it sees, with the slow-run threshold raised and rescues off, so
// that a machine busy with other tests, or the race detector, can neither
// make its runs slow nor have a driver kept from its CPU rescued.
func newQuickPartition(t *testing.T, maxUncommitted int) (*Consumer, *partition, *atomic.Int64) {
	handled := new(atomic.Int64)
	c, p := newTestPartition(maxUncommitted, func(*event.Context, event.Event) error {
		handled.Add(1)
		return nil
	})
	c.slowRun = time.Second
	c.rescue.off.Store(true)
	t.Cleanup(func() { closeTestConsumer(c) })
	return c, p, handled
}

// endClaim closes the test claim, waits for its driver to see it, and
// drains the partition.
func endClaim(p *partition, records chan<- fetch.Record, in *intake) {
	close(records)
	<-in.done
	p.drain(5*time.Second, event.ErrRevoked)
}

func TestIntake(t *testing.T) {
	t.Run("quick runs stay on the driver", testQuickRunsStayInline)
	t.Run("a stuck run hands the intake on", testStuckRunHandsOver)
	t.Run("a claim ending while a rescued run goes on ends once", testClaimEndsDuringRescuedRun)
	t.Run("slow runs offload to the executor", testSlowRunsOffload)
	t.Run("runs are numbered across calls", testRunsNumberedAcrossCalls)
	t.Run("a key's next events go to the executor while offloading", testKeyChainOffloads)
	t.Run("Blocking on the driver hands the intake on at once", testBlockingHandsOver)
	t.Run("a full tracker leaves records queued in the stream", testFullTrackerQueues)
	t.Run("a driver leases one permit, not held over a backoff", testDriverLease)
}

// Runs quicker than the consumer's slowRun run on the driver: nothing
// reaches the executor.
func testQuickRunsStayInline(t *testing.T) {
	c, p, handled := newQuickPartition(t, 64)
	records, in := testIntake(p)
	const n = 2000
	go func() {
		for i := 0; i < n; i++ {
			records <- testRecord(int64(i), fmt.Sprintf("k-%d", i%100))
		}
	}()
	eventually(t, "every record is handled", func() bool { return handled.Load() == n })
	endClaim(p, records, in)
	c.exec.mu.Lock()
	pushed := c.exec.pushed
	c.exec.mu.Unlock()
	if pushed != 0 || c.stats.Offloads() != 0 {
		t.Fatalf("%d runs went to the executor (%d offloads); quick runs should stay inline",
			pushed, c.stats.Offloads())
	}
	if off, ok := p.commitOffset(); !ok || off != n {
		t.Fatalf("commit offset %d (%v), want %d", off, ok, n)
	}
}

// A handler that blocks does not stop the partition reading records that
// arrive afterwards, nor starting their keys.
func testStuckRunHandsOver(t *testing.T) {
	release := make(chan struct{})
	var handled atomic.Int64
	c, p := newTestPartition(1000, func(ctx *event.Context, ev event.Event) error {
		if ctx.Key() == "block" {
			<-release
		}
		handled.Add(1)
		return nil
	})
	defer closeTestConsumer(c)
	records, in := testIntake(p)
	records <- testRecord(0, "block")
	eventually(t, "the intake is handed on", func() bool { return c.stats.Handovers() > 0 })
	for i := 1; i <= 100; i++ {
		records <- testRecord(int64(i), fmt.Sprintf("k-%d", i))
	}
	eventually(t, "the records after the blocked one are handled", func() bool { return handled.Load() == 100 })
	close(release)
	eventually(t, "the blocked record is handled", func() bool { return handled.Load() == 101 })
	endClaim(p, records, in)
	if off, ok := p.commitOffset(); !ok || off != 101 {
		t.Fatalf("commit offset %d (%v), want 101", off, ok)
	}
}

// The run a rescue left behind is not rescued again: the claim ends once,
// through the one goroutine driving the intake (two drivers once closed
// in.done twice).
func testClaimEndsDuringRescuedRun(t *testing.T) {
	release := make(chan struct{})
	c, p := newTestPartition(1000, func(ctx *event.Context, ev event.Event) error {
		<-release
		return nil
	})
	defer closeTestConsumer(c)
	records, in := testIntake(p)
	records <- testRecord(0, "block")
	eventually(t, "the intake is handed on", func() bool { return c.stats.Handovers() > 0 })
	// Scans that would hand it on again.
	seen := c.rescue.scans.Load()
	eventually(t, "twenty more scans of the rescuer", func() bool { return c.rescue.scans.Load() >= seen+20 })
	if h := c.stats.Handovers(); h != 1 {
		t.Fatalf("%d hand-overs for one stuck run", h)
	}
	close(records)
	<-in.done
	close(release)
	p.drain(5*time.Second, event.ErrRevoked)
}

// Handlers that wait, or that take the CPU for a while, leave the driver
// for the executor: waiting ones run concurrently, busy ones on every CPU.
func testSlowRunsOffload(t *testing.T) {
	spin := func(d time.Duration) {
		for start := time.Now(); time.Since(start) < d; {
		}
	}
	for _, tc := range []struct {
		name     string
		work     func()
		n        int
		wantPeak int
	}{
		{"waiting", func() { time.Sleep(2 * time.Millisecond) }, 400, 4},
		{"busy", func() { spin(30 * time.Microsecond) }, 2000, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			running, peak := 0, 0
			var handled atomic.Int64
			c, p := newTestPartition(1000, func(*event.Context, event.Event) error {
				mu.Lock()
				running++
				peak = max(peak, running)
				mu.Unlock()
				tc.work()
				mu.Lock()
				running--
				mu.Unlock()
				handled.Add(1)
				return nil
			})
			defer closeTestConsumer(c)
			records, in := testIntake(p)
			go func() {
				for i := 0; i < tc.n; i++ {
					records <- testRecord(int64(i), fmt.Sprintf("k-%d", i))
				}
			}()
			eventually(t, "every record is handled", func() bool { return handled.Load() == int64(tc.n) })
			endClaim(p, records, in)
			if c.stats.Offloads() == 0 {
				t.Fatal("the partition never offloaded its slow runs")
			}
			mu.Lock()
			defer mu.Unlock()
			if peak < tc.wantPeak {
				t.Fatalf("at most %d slow handlers ran at once", peak)
			}
		})
	}
}

// Each run is announced with a number of its own, even when every call of
// runReady has one run: the rescuer takes a repeated announcement for one
// run that is stuck (a number restarting per call once left a stuck run
// unrescued).
func testRunsNumberedAcrossCalls(t *testing.T) {
	var p *partition
	var seen []uint64
	c, p := newTestPartition(64, func(*event.Context, event.Event) error {
		seen = append(seen, p.inline.Load())
		return nil
	})
	defer closeTestConsumer(c)
	for i := 0; i < 3; i++ {
		p.admit([]fetch.Record{testRecord(int64(i), fmt.Sprintf("k-%d", i))})
		p.runReady(0, new(middleware.Run))
	}
	if len(seen) != 3 || seen[0] == seen[1] || seen[1] == seen[2] {
		t.Fatalf("announcements %x: want three different ones", seen)
	}
}

// Once the partition offloads, a key whose run just ended goes on in the
// executor rather than on the driver.
func testKeyChainOffloads(t *testing.T) {
	var p *partition
	var handled atomic.Int64
	c, p := newTestPartition(64, func(*event.Context, event.Event) error {
		if handled.Add(1) == 1 {
			// As if the partition had found its runs slow meanwhile.
			p.mu.Lock()
			p.offloadTill = monotonic() + int64(time.Hour)
			p.mu.Unlock()
		}
		return nil
	})
	defer closeTestConsumer(c)
	var rs []fetch.Record
	for i := 0; i < 10; i++ {
		rs = append(rs, testRecord(int64(i), "hot"))
	}
	p.admit(rs)
	p.runReady(0, new(middleware.Run))
	eventually(t, "every record is handled", func() bool { return handled.Load() == 10 })
	c.exec.mu.Lock()
	pushed := c.exec.pushed
	c.exec.mu.Unlock()
	if pushed != 1 {
		t.Fatalf("%d runs went to the executor, want the key's one", pushed)
	}
}

// A handler on the driver that says it is about to wait (Context.Blocking)
// has its intake handed on before Blocking returns.
func testBlockingHandsOver(t *testing.T) {
	var c *Consumer
	handedOver := make(chan int64, 1)
	c, p := newTestPartition(64, func(ctx *event.Context, ev event.Event) error {
		resume := ctx.Blocking()
		handedOver <- c.stats.Handovers()
		resume()
		return nil
	})
	defer closeTestConsumer(c)
	records, in := testIntake(p)
	records <- testRecord(0, "k")
	if h := <-handedOver; h != 1 {
		t.Fatalf("%d hand-overs when Blocking returned, want 1", h)
	}
	endClaim(p, records, in)
}

// With max_uncommitted unfinished offsets, what the tracker has no room
// for stays queued in the stream (whose limit then keeps the fetcher from
// adding to it, fetch's tests); as handlers finish, every record is
// admitted.
func testFullTrackerQueues(t *testing.T) {
	release := make(chan struct{})
	var handled atomic.Int64
	c, p := newTestPartition(8, func(*event.Context, event.Event) error {
		<-release
		handled.Add(1)
		return nil
	})
	c.slowRun = time.Second
	defer closeTestConsumer(c)
	limit := c.holdLimit()
	n := limit + 100
	stream := fetch.NewStream(p.topic, p.id, 0, limit)
	rs := make([]fetch.Record, n)
	for i := range rs {
		rs[i] = testRecord(int64(i), fmt.Sprintf("k-%d", i))
	}
	stream.Push(0, rs, int64(n))
	claim := make(chan *sarama.ConsumerMessage)
	in := newIntake(stream, claim, time.Hour, limit, func(int64) {})
	p.startIntake(in)
	// The driver has admitted what the tracker takes and waits for room;
	// the rest stays queued in the stream. The stream counts what it hands
	// out a moment after the tracker does, so the three are waited for
	// together.
	full := func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.tracker.Outstanding() == 8 && p.wantRoom
	}
	eventually(t, "the tracker is full, the driver waits for room and the rest stays queued", func() bool {
		return full() && stream.Queued() == n-8
	})
	if q := stream.Queued(); q != n-8 || !full() {
		t.Fatalf("%d records queued in the stream with the tracker full, want %d", q, n-8)
	}
	close(release)
	eventually(t, "every record is handled", func() bool { return handled.Load() == int64(n) })
	close(claim)
	<-in.done
	p.drain(5*time.Second, event.ErrRevoked)
	if off, ok := p.commitOffset(); !ok || off != int64(n) {
		t.Fatalf("commit offset %d (%v), want %d", off, ok, n)
	}
}

// A driver running quick events inline holds one permit of the limiter for
// the series (never more than one per live driver, and none once idle); an
// event whose attempt failed gives it back, so that its retry's backoff
// holds no permit. Rescues are off: this is about one driver, and on a
// loaded machine a rescue would start a second, which may hold a lease of
// its own.
func testDriverLease(t *testing.T) {
	// Room for more permits than the driver should take, so that taking a
	// second one shows.
	limiter := middleware.NewFIFOScheduler(4)
	var handled, maxInUse, lent atomic.Int64
	failed := make(chan struct{})
	var once sync.Once
	handler := event.HandlerFuncs{Message: func(ctx *event.Context, msg *event.Message) error {
		if n := int64(limiter.InUse()); n > maxInUse.Load() {
			maxInUse.Store(n)
		}
		if msg.Key != "fail" {
			handled.Add(1)
			return nil
		}
		first := false
		once.Do(func() { first = true; close(failed) })
		if first {
			return errors.New("transient")
		}
		handled.Add(1)
		return nil
	}}
	clock := newFakeClock()
	stack := middleware.NewStack(middleware.Handler(leaseWatcher{handler, limiter, &lent}, limiter),
		middleware.NewRetry(middleware.RetryPolicy{MaxRetries: middleware.Unlimited, Base: time.Millisecond, MaxDelay: time.Millisecond}),
		middleware.Cancellation{}, limiter).WithClock(clock)
	c, p := newStackPartition(64, stack)
	c.opts.Scheduler = limiter
	c.slowRun = time.Second
	c.rescue.off.Store(true)
	defer closeTestConsumer(c)
	records, in := testIntake(p)
	const n = 500
	for i := 0; i < n; i++ {
		records <- testRecord(int64(i), fmt.Sprintf("k-%d", i%50))
	}
	eventually(t, "the quick records are handled", func() bool { return handled.Load() == n })
	eventually(t, "the driver's lease ends once it is idle", func() bool { return limiter.InUse() == 0 })
	if lent.Load() == 0 {
		t.Fatal("no handler ran on the driver's leased permit")
	}
	records <- testRecord(n, "fail")
	<-failed
	// The failed event waits out its backoff on the fake clock.
	eventually(t, "the failed event waits out its backoff", func() bool { return clock.pending() == 1 })
	if got := limiter.InUse(); got != 0 {
		t.Fatalf("%d permits taken while the failed event waits out its backoff", got)
	}
	clock.fireAll()
	eventually(t, "the retried record is handled", func() bool { return handled.Load() == n+1 })
	endClaim(p, records, in)
	if maxInUse.Load() > 1 {
		t.Fatalf("%d permits taken at once by one partition's one driver", maxInUse.Load())
	}
	if got := limiter.InUse(); got != 0 {
		t.Fatalf("%d permits still taken after the claim ended", got)
	}
}

// leaseWatcher counts the invocations that run on a permit their driver
// lent them, which only the engine's side of the context tells.
type leaseWatcher struct {
	event.Handler
	limiter *middleware.Scheduler
	lent    *atomic.Int64
}

func (w leaseWatcher) OnMessage(ctx *event.Context, msg *event.Message) error {
	if (*invocation.Context)(ctx).Lent() == w.limiter.ID() {
		w.lent.Add(1)
	}
	return w.Handler.OnMessage(ctx, msg)
}

// fakeClock runs a stack's retry delays when the test says so.
type fakeClock struct {
	mu     sync.Mutex
	timers []func()
}

func newFakeClock() *fakeClock { return &fakeClock{} }

func (c *fakeClock) AfterFunc(_ time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.timers = append(c.timers, f)
	i := len(c.timers) - 1
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		ok := c.timers[i] != nil
		c.timers[i] = nil
		return ok
	}
}

func (c *fakeClock) pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, f := range c.timers {
		if f != nil {
			n++
		}
	}
	return n
}

func (c *fakeClock) fireAll() {
	c.mu.Lock()
	fs := c.timers
	c.timers = nil
	c.mu.Unlock()
	for _, f := range fs {
		if f != nil {
			go f()
		}
	}
}

// A timer that comes up in a driver's series of inline runs does not wait
// for the permit the driver leased for the messages before it: with one
// permit in all, it would wait forever.
func TestTimerDoesNotWaitForTheDriversLease(t *testing.T) {
	limiter := middleware.NewFIFOScheduler(1)
	timerRan := make(chan struct{})
	var p *partition
	handler := event.HandlerFuncs{
		Message: func(ctx *event.Context, m *event.Message) error {
			if m.Offset == 0 {
				return ctx.Schedule(time.Now().Add(-time.Second)) // due at once
			}
			// The timer fires meanwhile and queues behind this message.
			for {
				p.mu.Lock()
				queued := p.keys.Waiting()
				p.mu.Unlock()
				if queued == 1 {
					return nil
				}
				time.Sleep(time.Millisecond)
			}
		},
		Timer: func(*event.Context, *event.Timer) error { close(timerRan); return nil },
	}
	stack := middleware.NewStack(middleware.Handler(handler, limiter), middleware.Cancellation{}, limiter)
	c, pp := newStackPartition(64, stack)
	p = pp
	c.opts.Scheduler = limiter
	c.slowRun = time.Hour
	c.rescue.off.Store(true) // one driver: the rescuer must not hide the wait
	defer closeTestConsumer(c)
	stopTimers := openMemoryTimers(p)
	records, in := testIntake(p)
	records <- testRecord(0, "k")
	records <- testRecord(1, "k")
	select {
	case <-timerRan:
	case <-time.After(10 * time.Second):
		t.Fatalf("the timer never ran; permits in use %d of 1", limiter.InUse())
	}
	endClaim(p, records, in)
	stopTimers()
	if limiter.InUse() != 0 {
		t.Fatalf("%d permits taken after the claim ended", limiter.InUse())
	}
}

// TestCommitMarkedDuringBacklog: while a backlog keeps the stream full and
// quick handlers keep the window from filling, the driver never waits, and
// its tick must still hand commit offsets to sarama between bursts; a
// crash would otherwise replay the whole backlog read so far. No offset
// marked is past what has been handled.
func TestCommitMarkedDuringBacklog(t *testing.T) {
	var handled atomic.Int64
	c, p := newTestPartition(1000, func(*event.Context, event.Event) error {
		time.Sleep(100 * time.Microsecond) // work, quick enough to stay on the driver
		handled.Add(1)
		return nil
	})
	// Every run stays on the driver, as quick handlers' runs do: a
	// sleeping handler would otherwise look slow or stuck.
	c.slowRun = time.Hour
	c.rescue.off.Store(true)
	defer closeTestConsumer(c)
	claim := make(chan *sarama.ConsumerMessage)
	stream := fetch.NewStream(p.topic, p.id, 0, c.holdLimit())
	var marks atomic.Int64
	var beyond atomic.Int64 // a marked offset past the handled ones, if any
	in := newIntake(stream, claim, 5*time.Millisecond, c.holdLimit(), func(o int64) {
		if h := handled.Load(); o > h {
			beyond.Store(o)
		}
		marks.Add(1)
	})
	const n = 4000
	rs := make([]fetch.Record, n)
	for i := range rs {
		rs[i] = testRecord(int64(i), fmt.Sprintf("k-%d", i%50))
	}
	stream.Push(0, rs, n) // the backlog, fetched at once
	p.startIntake(in)
	eventually(t, "half the backlog handled", func() bool { return handled.Load() >= n/2 })
	if marks.Load() == 0 {
		t.Errorf("%d of %d records handled and no commit offset marked", handled.Load(), n)
	}
	if o := beyond.Load(); o != 0 {
		t.Errorf("offset %d marked before the records below it were handled", o)
	}
	close(claim)
	<-in.done
	p.drain(5*time.Second, event.ErrRevoked)
}

// TestDrainCancelsARunStuckWhenTheClaimEnds: a run on the driver that is
// under way when the partition stops starting work (the session ends) is
// rescued all the same, so that the claim's end is seen and the drain
// starts: its budget then cancels the handler's context. Before, only the
// stuck driver could end the intake, and the drain waited for the handler
// to return by itself.
func TestDrainCancelsARunStuckWhenTheClaimEnds(t *testing.T) {
	var pp *partition
	stopped := make(chan struct{})
	cancelled := make(chan bool, 1)
	c, p := newTestPartition(10, func(ctx *event.Context, _ event.Event) error {
		pp.stopStarting() // the session ends as this run starts
		close(stopped)
		select {
		case <-ctx.Done(): // a handler that honours cancellation
			cancelled <- true
		case <-time.After(30 * time.Second):
			cancelled <- false
		}
		return nil
	})
	pp = p
	defer closeTestConsumer(c)
	records, in := testIntake(p)
	records <- testRecord(0, "k")
	<-stopped
	close(records) // the claim ends
	select {
	case <-in.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the claim ended 10 s ago and the intake has not: the drain cannot start")
	}
	p.drain(time.Second, event.ErrRevoked)
	if !<-cancelled {
		t.Fatal("the stuck handler's context was never cancelled")
	}
}

// panicFirst is a layer with a bug: it panics on the first event.
type panicFirst struct{ calls *atomic.Int64 }

func (l panicFirst) Before(*middleware.Run) middleware.Step {
	if l.calls.Add(1) == 1 {
		panic("a layer's bug")
	}
	return middleware.Continue
}

func (panicFirst) After(_ *middleware.Run, err error) middleware.Step { return middleware.Result(err) }

// TestLayerPanicLeavesTheOffsetUncommitted: a layer that panics on the
// driver's synchronous path does not take the process down, the key's
// next events go on, and the event, which the layers outside the panic
// (retries, deferral) never saw through, is not committed: the next owner
// of the partition handles it.
func TestLayerPanicLeavesTheOffsetUncommitted(t *testing.T) {
	var handled atomic.Int64
	c, p := newStackPartition(10, middleware.NewStack(middleware.Func(func(*event.Context, event.Event) error {
		handled.Add(1)
		return nil
	}), panicFirst{new(atomic.Int64)}))
	defer closeTestConsumer(c)
	records, in := testIntake(p)
	records <- testRecord(0, "k")
	records <- testRecord(1, "k")
	eventually(t, "the key's next record handled", func() bool { return handled.Load() == 1 })
	close(records)
	<-in.done
	p.drain(time.Second, event.ErrRevoked)
	if o, ok := p.commitOffset(); ok {
		t.Fatalf("offset %d to commit: the event whose layer panicked would be lost", o)
	}
}

// errorRecorder is a slog handler that keeps the messages of the records
// at error level.
type errorRecorder struct {
	mu   *sync.Mutex
	msgs *[]string
}

func (h errorRecorder) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelError }
func (h errorRecorder) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	*h.msgs = append(*h.msgs, r.Message)
	return nil
}
func (h errorRecorder) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h errorRecorder) WithGroup(string) slog.Handler      { return h }

// notStartingTimers is a layer that lets the first event (the message)
// through and leaves the next (its timer) unstarted, as the C ABI does
// for the events reaching a client released meanwhile.
type notStartingTimers struct {
	calls *atomic.Int64
	seen  chan struct{}
}

func (l notStartingTimers) Before(*middleware.Run) middleware.Step {
	if l.calls.Add(1) == 1 {
		return middleware.Continue
	}
	l.seen <- struct{}{}
	return middleware.Result(invocation.ErrNotStarted)
}

func (notStartingTimers) After(_ *middleware.Run, err error) middleware.Step {
	return middleware.Result(err)
}

// A timer left unstarted because its partition is going away stays stored
// for the next owner without the error an abort on a live partition logs.
func TestTimerNotStartedIsNoError(t *testing.T) {
	var mu sync.Mutex
	var errs []string
	layer := notStartingTimers{calls: new(atomic.Int64), seen: make(chan struct{}, 1)}
	handler := event.HandlerFuncs{
		Message: func(ctx *event.Context, _ *event.Message) error {
			return ctx.Schedule(time.Now().Add(-time.Second)) // due at once
		},
		Timer: func(*event.Context, *event.Timer) error { t.Error("the timer's handler ran"); return nil },
	}
	c, p := newStackPartition(64, middleware.NewStack(middleware.Handler(handler, nil), layer))
	c.log = slog.New(errorRecorder{&mu, &errs})
	p = newPartition(c, "t", 0)
	defer closeTestConsumer(c)
	stopTimers := openMemoryTimers(p)
	records, in := testIntake(p)
	records <- testRecord(0, "k")
	select {
	case <-layer.seen:
	case <-time.After(10 * time.Second):
		t.Fatal("the timer never fired")
	}
	endClaim(p, records, in)
	stopTimers()
	mu.Lock()
	defer mu.Unlock()
	if len(errs) > 0 {
		t.Fatalf("errors logged: %q", errs)
	}
}

// openMemoryTimers gives p durable timers kept in memory and opens them;
// the function returned stops them once the claim has ended.
func openMemoryTimers(p *partition) (stop func()) {
	p.c.opts.Timers = timerstore.NewMemory()
	p.c.opts.SlabSize = time.Hour
	p.timersReady = false
	released := make(chan struct{})
	p.openTimers(released)
	return func() {
		close(released)
		p.stopTimers()
	}
}
