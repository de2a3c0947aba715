package timers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/prosody-events/prosody-go/core/internal/testservices"
	"github.com/prosody-events/prosody-go/core/timerstore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testservices.LeakOptions()...) }

// harness is a Manager over a fresh in-memory segment whose fired timers
// land in a channel, as they would in a partition's key queue.
type harness struct {
	t     *testing.T
	store timerstore.Store
	seg   timerstore.Segment
	m     *Manager
	fired chan timerstore.Trigger
}

func newHarness(t *testing.T, store timerstore.Store, partition int32, maxInFlight int) *harness {
	t.Helper()
	seg, err := store.Segment(context.Background(), "group", "topic", partition, 3600)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, store: store, seg: seg, fired: make(chan timerstore.Trigger, 1024)}
	h.m = Start(Options{
		Segment:     seg,
		Fire:        func(tr timerstore.Trigger) { h.fired <- tr },
		MaxInFlight: maxInFlight,
		RetryDelay:  10 * time.Millisecond,
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	t.Cleanup(h.m.Stop)
	return h
}

func at(d time.Duration) timerstore.Time { return timerstore.TimeOf(time.Now().Add(d)) }

func (h *harness) schedule(key string, tm timerstore.Time) {
	h.t.Helper()
	if err := h.m.Schedule(context.Background(), timerstore.Trigger{Key: key, Time: tm, Type: timerstore.Application}); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) expectFire(within time.Duration) timerstore.Trigger {
	h.t.Helper()
	select {
	case tr := <-h.fired:
		return tr
	case <-time.After(within):
		h.t.Fatalf("no timer fired within %v", within)
		return timerstore.Trigger{}
	}
}

func (h *harness) expectQuiet(d time.Duration) {
	h.t.Helper()
	select {
	case tr := <-h.fired:
		h.t.Fatalf("unexpected fire: %+v", tr)
	case <-time.After(d):
	}
}

func idOf(tr timerstore.Trigger) ID { return ID{tr.Key, tr.Time, tr.Type} }

// running schedules a timer of key that is due, and begins it when it
// fires, as the partition does: its handler is running.
func (h *harness) running(key string) (timerstore.Trigger, timerstore.Time) {
	h.t.Helper()
	due := at(-time.Second)
	h.schedule(key, due)
	tr := h.expectFire(2 * time.Second)
	if !h.m.Begin(idOf(tr)) {
		h.t.Fatal("Begin refused a scheduled timer")
	}
	return tr, due
}

func TestScheduledTimerFiresWhenDueNotBefore(t *testing.T) {
	h := newHarness(t, timerstore.NewMemory(), 0, 64)
	due := at(2 * time.Second)
	h.schedule("k", due)
	tr := h.expectFire(5 * time.Second)
	if tr.Key != "k" || tr.Time != due {
		t.Fatalf("fired %+v", tr)
	}
	if now := time.Now(); now.Before(due.Std()) {
		t.Fatalf("fired at %v, before its time %v", now, due.Std())
	}
	if !h.m.Begin(idOf(tr)) {
		t.Fatal("Begin refused a scheduled timer")
	}
	h.m.Commit(idOf(tr))
	waitStore(t, h.seg, "k", nil)
}

func TestPastTimerFiresAtOnce(t *testing.T) {
	h := newHarness(t, timerstore.NewMemory(), 0, 64)
	h.schedule("k", at(-time.Hour))
	h.expectFire(2 * time.Second)
}

func TestUnscheduledTimerDoesNotFire(t *testing.T) {
	h := newHarness(t, timerstore.NewMemory(), 0, 64)
	due := at(time.Second)
	h.schedule("k", due)
	if err := h.m.Unschedule(context.Background(), ID{"k", due, timerstore.Application}); err != nil {
		t.Fatal(err)
	}
	h.expectQuiet(2 * time.Second)
	waitStore(t, h.seg, "k", nil)
}

// TestUnscheduleWhileQueuedSkips: a timer already handed to the partition
// (waiting behind the key's messages) is skipped if unscheduled meanwhile.
func TestUnscheduleWhileQueuedSkips(t *testing.T) {
	h := newHarness(t, timerstore.NewMemory(), 0, 64)
	h.schedule("k", at(-time.Second))
	tr := h.expectFire(2 * time.Second)
	if err := h.m.Unschedule(context.Background(), idOf(tr)); err != nil {
		t.Fatal(err)
	}
	if h.m.Begin(idOf(tr)) {
		t.Fatal("a timer unscheduled while it waited must not run")
	}
}

func TestRescheduleWhileFiringFiresAgain(t *testing.T) {
	h := newHarness(t, timerstore.NewMemory(), 0, 64)
	tr, due := h.running("k")
	h.schedule("k", due) // from inside the handler
	if got, _ := h.m.Scheduled(context.Background(), "k", timerstore.Application); !slices.Equal(got, []timerstore.Time{due}) {
		t.Fatalf("scheduled = %v, want the rescheduled time", got)
	}
	h.m.Commit(idOf(tr))
	again := h.expectFire(2 * time.Second)
	if idOf(again) != idOf(tr) {
		t.Fatalf("fired %+v, want %+v again", again, tr)
	}
	h.m.Begin(idOf(again))
	h.m.Commit(idOf(again))
	waitStore(t, h.seg, "k", nil)
}

func TestScheduledListsAllButTheRunningTimer(t *testing.T) {
	h := newHarness(t, timerstore.NewMemory(), 0, 64)
	now, later := at(-time.Second), at(time.Hour)
	h.schedule("k", now)
	h.schedule("k", later)
	tr := h.expectFire(2 * time.Second)
	h.m.Begin(idOf(tr))
	got, err := h.m.Scheduled(context.Background(), "k", timerstore.Application)
	if err != nil || !slices.Equal(got, []timerstore.Time{later}) {
		t.Fatalf("scheduled = %v %v, want only the later timer", got, err)
	}
	h.m.Commit(idOf(tr))
}

func TestClearAndScheduleReplaces(t *testing.T) {
	h := newHarness(t, timerstore.NewMemory(), 0, 64)
	h.schedule("k", at(time.Hour))
	h.schedule("k", at(2*time.Hour))
	h.schedule("other", at(time.Hour))
	next := at(-time.Second)
	if err := h.m.ClearAndSchedule(context.Background(), timerstore.Trigger{Key: "k", Time: next, Type: timerstore.Application}); err != nil {
		t.Fatal(err)
	}
	if got, _ := h.m.Scheduled(context.Background(), "k", timerstore.Application); !slices.Equal(got, []timerstore.Time{next}) {
		t.Fatalf("scheduled = %v, want only %v", got, next)
	}
	if got, _ := h.m.Scheduled(context.Background(), "other", timerstore.Application); len(got) != 1 {
		t.Fatalf("another key's timers changed: %v", got)
	}
	if tr := h.expectFire(2 * time.Second); tr.Time != next {
		t.Fatalf("fired %+v", tr)
	}
	if err := h.m.ClearScheduled(context.Background(), "other", timerstore.Application); err != nil {
		t.Fatal(err)
	}
	waitStore(t, h.seg, "other", nil)
}

// TestAbortKeepsTheTimerForTheNextOwner: an aborted timer leaves memory
// but stays stored; a new Manager for the partition (the next owner)
// loads it, overdue, and fires it.
func TestAbortKeepsTheTimerForTheNextOwner(t *testing.T) {
	store := timerstore.NewMemory()
	h := newHarness(t, store, 7, 64)
	due := at(-time.Second)
	h.schedule("k", due)
	tr := h.expectFire(2 * time.Second)
	h.m.Begin(idOf(tr))
	h.m.Abort(idOf(tr))
	h.m.Stop()

	next := newHarness(t, store, 7, 64)
	if got := next.expectFire(2 * time.Second); idOf(got) != idOf(tr) {
		t.Fatalf("next owner fired %+v, want %+v", got, tr)
	}
}

// A timer dropped from memory but kept in the store keeps its slab
// listed, past or not, so that the next owner (and the deferral layers'
// TypeKeys) still find it.
func TestAbortedTimerKeepsItsSlabListed(t *testing.T) {
	store := timerstore.NewMemory()
	h := newHarness(t, store, 8, 64)
	old := at(-3 * time.Hour) // a slab wholly in the past
	if err := h.m.Schedule(context.Background(), timerstore.Trigger{Key: "k", Time: old, Type: timerstore.DeferredMessage}); err != nil {
		t.Fatal(err)
	}
	tr := h.expectFire(2 * time.Second)
	h.m.Begin(idOf(tr))
	h.m.Abort(idOf(tr))
	if _, err := h.m.load(context.Background(), time.Now()); err != nil {
		t.Fatal(err)
	}
	keys, err := h.seg.TypeKeys(context.Background(), timerstore.DeferredMessage, at(time.Hour))
	if err != nil || !slices.Equal(keys, []string{"k"}) {
		t.Fatalf("TypeKeys = %v, %v; the aborted timer's slab was dropped", keys, err)
	}
}

func TestInFlightBound(t *testing.T) {
	h := newHarness(t, timerstore.NewMemory(), 0, 1)
	h.schedule("a", at(-time.Second))
	h.schedule("b", at(-time.Second))
	first := h.expectFire(2 * time.Second)
	h.expectQuiet(300 * time.Millisecond)
	h.m.Begin(idOf(first))
	h.m.Commit(idOf(first))
	h.expectFire(2 * time.Second)
}

func TestStoppedManagerRefusesOperations(t *testing.T) {
	h := newHarness(t, timerstore.NewMemory(), 0, 64)
	h.m.Stop()
	if err := h.m.Schedule(context.Background(), timerstore.Trigger{Key: "k", Time: at(time.Hour)}); err != ErrStopped {
		t.Fatalf("err = %v, want ErrStopped", err)
	}
}

func TestManyTimersAllFire(t *testing.T) {
	h := newHarness(t, timerstore.NewMemory(), 0, 64)
	var mu sync.Mutex
	want := map[ID]bool{}
	for i := 0; i < 500; i++ {
		tr := timerstore.Trigger{Key: string(rune('a' + i%26)), Time: at(time.Duration(i%3) * time.Second), Type: timerstore.Application}
		h.schedule(tr.Key, tr.Time)
		mu.Lock()
		want[idOf(tr)] = true
		mu.Unlock()
	}
	deadline := time.After(10 * time.Second)
	for len(want) > 0 {
		select {
		case tr := <-h.fired:
			if h.m.Begin(idOf(tr)) {
				h.m.Commit(idOf(tr))
			}
			delete(want, idOf(tr))
		case <-deadline:
			t.Fatalf("%d timers never fired", len(want))
		}
	}
}

// waitStore waits until the key's stored application timers equal want
// (deletes after a commit happen in the background).
func waitStore(t *testing.T, seg timerstore.Segment, key string, want []timerstore.Time) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := seg.KeyTimes(context.Background(), key, timerstore.Application)
		if err == nil && slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("stored times for %s = %v (%v), want %v", key, got, err, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// slowSlabs signals the first slab listing and then holds it back, so a
// test can schedule timers after the list was read and before the load
// that read it goes on.
type slowSlabs struct {
	timerstore.Segment
	once   *sync.Once
	listed chan struct{}
}

func (s slowSlabs) Slabs(ctx context.Context) ([]uint32, error) {
	out, err := s.Segment.Slabs(ctx)
	s.once.Do(func() {
		close(s.listed)
		time.Sleep(200 * time.Millisecond)
	})
	return out, err
}

// TestScheduleRacingFirstLoadStillFires: timers scheduled while the
// Manager's first slab load is in progress must fire (a regression: the
// slab list was read outside the load lock, and timers scheduled into a
// slab the list did not have yet were stored but never loaded).
func TestScheduleRacingFirstLoadStillFires(t *testing.T) {
	seg, err := timerstore.NewMemory().Segment(context.Background(), "g", "t", 0, 3600)
	if err != nil {
		t.Fatal(err)
	}
	slow := slowSlabs{Segment: seg, once: &sync.Once{}, listed: make(chan struct{})}
	fired := make(chan timerstore.Trigger, 64)
	m := Start(Options{Segment: slow, Fire: func(tr timerstore.Trigger) { fired <- tr },
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	defer m.Stop()
	<-slow.listed
	const n = 5
	for i := 0; i < n; i++ {
		if err := m.Schedule(context.Background(), timerstore.Trigger{Key: fmt.Sprint(i), Time: at(-time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < n; i++ {
		select {
		case <-fired:
		case <-time.After(3 * time.Second):
			t.Fatalf("only %d of %d timers fired", i, n)
		}
	}
}

// A running timer its handler replaces with itself twice (or schedules,
// then replaces with itself) fires again after this run, and stays in the
// store: the second call used to queue it as a new timer, which this
// run's commit then deleted, from memory and from the store (found in
// review).
func TestClearAndScheduleTwiceWhileFiringFiresAgain(t *testing.T) {
	for _, first := range []string{"clear_and_schedule", "schedule"} {
		t.Run(first, func(t *testing.T) {
			h := newHarness(t, timerstore.NewMemory(), 0, 64)
			tr, due := h.running("k")
			again := timerstore.Trigger{Key: "k", Time: due, Type: timerstore.Application}
			if first == "schedule" {
				h.schedule("k", due)
			} else if err := h.m.ClearAndSchedule(context.Background(), again); err != nil {
				t.Fatal(err)
			}
			if err := h.m.ClearAndSchedule(context.Background(), again); err != nil {
				t.Fatal(err)
			}
			h.m.Commit(idOf(tr))
			waitStore(t, h.seg, "k", []timerstore.Time{due})
			next := h.expectFire(2 * time.Second)
			if !h.m.Begin(idOf(next)) {
				t.Fatal("the timer asked for again does not run")
			}
			h.m.Commit(idOf(next))
			waitStore(t, h.seg, "k", nil)
		})
	}
}

// flakySegment fails the listing of one slab's timers, and a timer's
// deletes, a given number of times each.
type flakySegment struct {
	timerstore.Segment
	mu          sync.Mutex
	failSlab    uint32
	slabFails   int
	removeFails int
}

func (s *flakySegment) SlabTriggers(ctx context.Context, slab uint32) ([]timerstore.Trigger, error) {
	s.mu.Lock()
	fail := slab == s.failSlab && s.slabFails > 0
	if fail {
		s.slabFails--
	}
	s.mu.Unlock()
	if fail {
		return nil, errors.New("slab read refused")
	}
	return s.Segment.SlabTriggers(ctx, slab)
}

func (s *flakySegment) Remove(ctx context.Context, key string, at timerstore.Time, typ timerstore.Type) error {
	s.mu.Lock()
	fail := s.removeFails > 0
	if fail {
		s.removeFails--
	}
	s.mu.Unlock()
	if fail {
		return errors.New("delete refused")
	}
	return s.Segment.Remove(ctx, key, at, typ)
}

// A load that fails after it read some slabs is retried without reading
// those again: their timers in memory are the truth, and a timer fired and
// committed meanwhile, whose store delete is still being retried, must not
// come back and fire twice (found in review). A timer scheduled after the
// failed load into a slab it read fires all the same.
func TestLoadRetryDoesNotReviveCommittedTimers(t *testing.T) {
	store := timerstore.NewMemory()
	seg, err := store.Segment(context.Background(), "group", "topic", 0, 3600)
	if err != nil {
		t.Fatal(err)
	}
	past := at(-2 * time.Hour)
	if err := seg.Add(context.Background(), timerstore.Trigger{Key: "k", Time: past, Type: timerstore.Application}); err != nil {
		t.Fatal(err)
	}
	later := at(30 * time.Second) // within the first load's reach
	if err := seg.Add(context.Background(), timerstore.Trigger{Key: "later", Time: later, Type: timerstore.Application}); err != nil {
		t.Fatal(err)
	}
	flaky := &flakySegment{Segment: seg, failSlab: timerstore.SlabOf(later, 3600), slabFails: 3, removeFails: 1000}
	fired := make(chan timerstore.Trigger, 16)
	m := Start(Options{Segment: flaky, Fire: func(tr timerstore.Trigger) { fired <- tr }, RetryDelay: 10 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	defer m.Stop()
	var tr timerstore.Trigger
	select {
	case tr = <-fired:
	case <-time.After(5 * time.Second):
		t.Fatal("the past timer of the slab read did not fire")
	}
	if !m.Begin(idOf(tr)) {
		t.Fatal("Begin refused the timer")
	}
	commitDone := make(chan struct{})
	go func() { m.Commit(idOf(tr)); close(commitDone) }() // its delete keeps failing
	// The failed load's slab takes a timer now; the load is retried.
	if err := m.Schedule(context.Background(), timerstore.Trigger{Key: "k2", Time: past, Type: timerstore.Application}); err != nil {
		t.Fatal(err)
	}
	select {
	case again := <-fired:
		if idOf(again) == idOf(tr) {
			t.Fatal("the committed timer fired again after the load was retried")
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the timer scheduled into the slab the failed load read did not fire")
	}
	// The load is retried until it succeeds; what it read is then in
	// memory, and the committed timer must not be among it.
	testservices.WaitFor(t, 5*time.Second, "the load retried to success", func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.owned
	})
	m.mu.Lock()
	_, revived := m.entries[idOf(tr)]
	m.mu.Unlock()
	if revived {
		t.Fatal("the retried load brought the committed timer back")
	}
	flaky.mu.Lock()
	flaky.removeFails = 0
	flaky.mu.Unlock()
	<-commitDone
}

// A key whose timer is replaced over and over (a debounce: clear and
// schedule on every message) keeps the delay queue to the timers there
// are, not one entry per call (found in review).
func TestReplacedTimersDoNotGrowTheQueue(t *testing.T) {
	h := newHarness(t, timerstore.NewMemory(), 0, 64)
	h.schedule("warm", at(-time.Second)) // the first load has run once this fires
	h.expectFire(5 * time.Second)
	base := at(10 * time.Second)
	for i := range 20_000 {
		tr := timerstore.Trigger{Key: "k", Time: base + timerstore.Time(i%40), Type: timerstore.Application}
		if err := h.m.ClearAndSchedule(context.Background(), tr); err != nil {
			t.Fatal(err)
		}
	}
	h.m.mu.Lock()
	n, live := h.m.queue.len(), len(h.m.entries)
	h.m.mu.Unlock()
	if n > 2*minCompact {
		t.Fatalf("the delay queue holds %d ids for %d timers", n, live)
	}
}

// stuckSegment is a store that does not answer a slab listing until its
// caller gives up.
type stuckSegment struct{ timerstore.Segment }

func (stuckSegment) Slabs(ctx context.Context) ([]uint32, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// Stop ends a load under way rather than wait for the store: a partition's
// revocation would otherwise wait for the store's timeouts (found in
// review).
func TestStopEndsALoadUnderWay(t *testing.T) {
	seg, err := timerstore.NewMemory().Segment(context.Background(), "group", "topic", 0, 3600)
	if err != nil {
		t.Fatal(err)
	}
	m := Start(Options{Segment: stuckSegment{seg}, Fire: func(timerstore.Trigger) {},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	stopped := make(chan struct{})
	go func() { m.Stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("Stop waited for a load the store does not answer")
	}
}

// A handler that replaces its key's timers with another, then schedules
// its own timer again, finds both in the store: the replacement deleted
// the running timer's row, and the schedule writes it back, so that it
// fires again even after a revocation (found in review).
func TestScheduleOfTheRunningTimerIsStored(t *testing.T) {
	h := newHarness(t, timerstore.NewMemory(), 0, 64)
	tr, due := h.running("k")
	other := at(time.Hour)
	if err := h.m.ClearAndSchedule(context.Background(), timerstore.Trigger{Key: "k", Time: other, Type: timerstore.Application}); err != nil {
		t.Fatal(err)
	}
	h.schedule("k", due)
	waitStore(t, h.seg, "k", []timerstore.Time{due, other})
	if got, err := h.m.Scheduled(context.Background(), "k", timerstore.Application); err != nil || !slices.Equal(got, []timerstore.Time{due, other}) {
		t.Fatalf("scheduled %v (%v), want both times", got, err)
	}
	h.m.Commit(idOf(tr))
	again := h.expectFire(2 * time.Second)
	if idOf(again) != idOf(tr) {
		t.Fatalf("fired %+v, want %+v again", again, tr)
	}
}

// heldAdd is a store whose Add, once armed, writes the row and then waits
// for the test before it returns.
type heldAdd struct {
	timerstore.Segment
	armed, added, release chan struct{}
}

func (s *heldAdd) Add(ctx context.Context, t timerstore.Trigger) error {
	err := s.Segment.Add(ctx, t)
	select {
	case <-s.armed:
		close(s.added)
		<-s.release
	default:
	}
	return err
}

// A Schedule of the running timer whose store write lands just before the
// run's Commit leaves the timer in the store and firing again: the timer
// is marked to fire again before the write, so the Commit keeps its row
// (found in review: the Commit deleted the row just written, and the timer
// lived on in memory only).
func TestScheduleOfTheRunningTimerRacingItsCommit(t *testing.T) {
	seg, err := timerstore.NewMemory().Segment(context.Background(), "group", "topic", 0, 3600)
	if err != nil {
		t.Fatal(err)
	}
	held := &heldAdd{Segment: seg, armed: make(chan struct{}), added: make(chan struct{}), release: make(chan struct{})}
	h := &harness{t: t, seg: seg, fired: make(chan timerstore.Trigger, 16)}
	h.m = Start(Options{Segment: held, Fire: func(tr timerstore.Trigger) { h.fired <- tr }, RetryDelay: 10 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	t.Cleanup(h.m.Stop)
	tr, due := h.running("k")
	close(held.armed)
	scheduled := make(chan error, 1)
	go func() { scheduled <- h.m.Schedule(context.Background(), tr) }()
	<-held.added
	h.m.Commit(idOf(tr))
	close(held.release)
	if err := <-scheduled; err != nil {
		t.Fatal(err)
	}
	waitStore(t, seg, "k", []timerstore.Time{due})
	if again := h.expectFire(2 * time.Second); idOf(again) != idOf(tr) {
		t.Fatalf("fired %+v, want %+v again", again, tr)
	}
}
