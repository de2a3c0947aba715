//go:build capitest

package main

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prosody-events/prosody-go/core/client"
	"github.com/prosody-events/prosody-go/core/event"
)

// A cancellation notice must never reach the host before its event: a host
// ignores notices for handles it does not hold, and the event would then
// never get another. The cancellation watch finds events in the handle
// table, so an event must be queued no later than it becomes visible there
// (found in review: registering events before taking the dispatcher's lock
// broke this within ten rounds).
func TestNoticeNeverPrecedesItsEvent(t *testing.T) {
	d := testDispatcher(t)
	// An event the host holds keeps the cancellation watch running.
	held := testEvent(d, event.NewContext(context.Background(), "held"))
	d.start(held, make(doneChan, 1))
	testPoll(d)
	for round := 0; round < 100; round++ {
		parent, cancel := context.WithCancelCause(context.Background())
		ctx := event.NewContext(parent, "key")
		ev := testEvent(d, ctx)
		// Another push or a poll holds the lock while the event starts and
		// its context is cancelled, for longer than a watch tick.
		d.mu.Lock()
		go d.start(ev, make(doneChan, 1))
		time.Sleep(time.Millisecond)
		if _, err := events.get(ev.id); err == nil {
			d.mu.Unlock()
			t.Fatalf("round %d: event %#x is in the handle table, where the watch finds it, before it is queued", round, ev.id)
		}
		cancel(event.ErrRevoked)
		// Until the watch has flagged the event (it must not, before the
		// event is queued) or a few ticks have passed.
		for wait := time.Now().Add(3 * noticeTick); ev.state.Load() != stateCancelNotified && time.Now().Before(wait); {
			time.Sleep(50 * time.Microsecond)
		}
		d.mu.Unlock()
		deadline := time.Now().Add(5 * time.Second)
		var seen []polled
		for !containsEvent(seen, ev.id) && time.Now().Before(deadline) {
			seen = append(seen, testPoll(d)...)
			time.Sleep(time.Millisecond)
		}
		for _, it := range seen {
			if it.id != ev.id {
				continue
			}
			if it.cancelled {
				t.Fatalf("round %d: the notice for event %#x came before the event (%+v)", round, ev.id, seen)
			}
			break
		}
		if !containsEvent(seen, ev.id) {
			t.Fatalf("round %d: event %#x never reached the host", round, ev.id)
		}
		if err := complete(ev.id, 0, nil); err != nil {
			t.Fatal(err)
		}
	}
}

func containsEvent(items []polled, id uint64) bool {
	for _, it := range items {
		if it.id == id && !it.cancelled {
			return true
		}
	}
	return false
}

// startNext is the completion of an event whose key has a next event: it
// starts that one, as the engine's continuation does.
type startNext struct {
	d    *dispatcher
	next *pendingEvent
}

func (s startNext) Done(error) {
	if s.next != nil {
		s.d.start(s.next, startNext{d: s.d})
	}
}

// The notify callback may call back into the library (prosody.h), and a
// completion made there queues the key's next event and wakes the host
// again from inside the callback. That must not deadlock while another
// thread removes the callback (found in review: holding a read lock across
// notify did, once a writer waited).
func TestNotifyMayReenterWhileTheCallbackIsRemoved(t *testing.T) {
	d, err := newDispatcher()
	if err != nil {
		t.Fatal(err)
	}
	var tok *notifier
	entered := false
	tok = installTestNotify(d, func() {
		if entered {
			return
		}
		entered = true
		go d.notify.remove(tok) // an unsubscribe or release on another thread
		time.Sleep(20 * time.Millisecond)
		for _, it := range testPoll(d) {
			_ = testComplete(it.id)
		}
	})
	first := testEvent(d, event.NewContext(context.Background(), "k"))
	second := testEvent(d, event.NewContext(context.Background(), "k"))
	finished := make(chan struct{})
	go func() { d.start(first, startNext{d: d, next: second}); close(finished) }()
	select {
	case <-finished:
	case <-time.After(5 * time.Second):
		// No cleanup: closing would wait on the deadlocked goroutines.
		t.Fatal("deadlock: the completion made inside notify never returned")
	}
	d.close()
	d.closeFd()
}

// A notify that completes events inside the call, each completion queuing
// the key's next event, runs again after it returns instead of nesting once
// per event (found in review: a chain of 60,000 events overflowed the
// stack), and no wake-up is lost.
func TestNotifyCallsNeitherNestNorGetLost(t *testing.T) {
	d := testDispatcher(t)
	const chain = 500
	evs := make([]*pendingEvent, chain)
	for i := range evs {
		evs[i] = testEvent(d, event.NewContext(context.Background(), "k"))
	}
	depth, maxDepth, handled := 0, 0, 0
	installTestNotify(d, func() {
		depth++
		maxDepth = max(maxDepth, depth)
		for _, it := range testPoll(d) {
			handled++
			_ = testComplete(it.id)
		}
		depth--
	})
	var next func(i int) event.Done
	next = func(i int) event.Done {
		return doneFunc(func(error) {
			if i+1 < chain {
				d.start(evs[i+1], next(i+1))
			}
		})
	}
	d.start(evs[0], next(0))
	if handled != chain {
		t.Fatalf("the host was woken for %d of %d events", handled, chain)
	}
	if maxDepth != 1 {
		t.Fatalf("notify calls nested %d deep", maxDepth)
	}
}

type doneFunc func(error)

func (f doneFunc) Done(err error) { f(err) }

// Subscribing again, with or without a notify callback, never waits for
// the previous callback's calls (a host may subscribe from inside one), and
// an older subscription's removal leaves a newer callback in place (found
// in review).
func TestNotifyInstallAndRemovalAcrossSubscriptions(t *testing.T) {
	d := testDispatcher(t)
	installedInside := make(chan struct{})
	a := installTestNotify(d, func() {
		d.notify.install(nil, 0) // subscribe again, watching only the fd
		close(installedInside)
	})
	go d.push(readyItem{ev: testEvent(d, event.NewContext(context.Background(), "k")), notice: cancelNotice})
	select {
	case <-installedInside:
	case <-time.After(5 * time.Second):
		t.Fatal("installing a callback from inside notify waited for that very call")
	}
	d.notify.remove(a)
	testPoll(d)

	calledB := make(chan struct{}, 1)
	a = installTestNotify(d, func() {})
	installTestNotify(d, func() { calledB <- struct{}{} })
	d.notify.remove(a) // the old subscription's unsubscribe completes
	d.push(readyItem{ev: testEvent(d, event.NewContext(context.Background(), "k")), notice: cancelNotice})
	select {
	case <-calledB:
	case <-time.After(5 * time.Second):
		t.Fatal("the old subscription's removal removed the new subscription's callback")
	}
}

// A poll that raced with the client's release must not read the fd number
// after the release closed it: the host may have reused the number (found
// in review).
func TestPollAfterReleaseLeavesAReusedFdAlone(t *testing.T) {
	d, err := newDispatcher()
	if err != nil {
		t.Fatal(err)
	}
	var p [2]int
	if err := syscall.Pipe(p[:]); err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(p[1])
	d.close()
	d.closeFd()
	// The host's next descriptor takes the released number.
	if err := syscall.Dup2(p[0], d.wfd.readFD()); err != nil {
		t.Fatal(err)
	}
	syscall.Close(p[0])
	defer syscall.Close(d.wfd.readFD())
	if _, err := syscall.Write(p[1], []byte("hostdata")); err != nil {
		t.Fatal(err)
	}
	if n := len(testPoll(d)); n != 0 {
		t.Fatalf("poll after release returned %d items", n)
	}
	var buf [16]byte
	if n, _ := syscall.Read(d.wfd.readFD(), buf[:]); n != 8 {
		t.Fatalf("the poll consumed the host's bytes from the reused fd %d (%d of 8 left)", d.wfd.readFD(), n)
	}
}

// Removing the notify callback (unsubscribe, release) returns only once no
// call of it is in progress, so the host may free its user_data when they
// complete.
func TestRemovingNotifyWaitsForCallsInProgress(t *testing.T) {
	d := testDispatcher(t)
	entered := make(chan struct{})
	var left atomic.Bool
	tok := installTestNotify(d, func() {
		close(entered)
		time.Sleep(50 * time.Millisecond)
		left.Store(true)
	})
	go d.push(readyItem{ev: testEvent(d, event.NewContext(context.Background(), "k")), notice: cancelNotice})
	<-entered
	d.notify.remove(tok)
	if !left.Load() {
		t.Fatal("the notify callback was removed while a call of it was still running")
	}
}

// A wake-up that comes during a call, when the unsubscribe removes the
// callback before the call returns, is not lost: it goes to the next
// subscription's callback (found in review: the queue stayed non-empty and
// no callback was ever called again).
func TestWakeUpDuringRemovedCallIsNotLost(t *testing.T) {
	d := testDispatcher(t)
	var a *notifier
	first := true
	removed := make(chan struct{})
	a = installTestNotify(d, func() {
		if !first {
			return
		}
		first = false
		testPoll(d)
		// A wake-up while this call runs; then the unsubscribe removes it.
		d.push(readyItem{ev: testEvent(d, event.NewContext(context.Background(), "k")), notice: cancelNotice})
		go func() { d.notify.remove(a); close(removed) }()
		for current(d) == a {
			time.Sleep(time.Millisecond)
		}
	})
	d.push(readyItem{ev: testEvent(d, event.NewContext(context.Background(), "k")), notice: cancelNotice})
	<-removed
	called := make(chan struct{}, 10)
	installTestNotify(d, func() { called <- struct{}{} }) // subscribe again
	d.wakeIfPending()                                     // as subscribe does once it succeeded
	select {
	case <-called:
	case <-time.After(5 * time.Second):
		t.Fatal("items are queued, and the new subscription's notify was never called")
	}
}

func current(d *dispatcher) *notifier {
	d.notify.mu.Lock()
	defer d.notify.mu.Unlock()
	return d.notify.current
}

// Release returns only once no notify call runs, including a call of a
// subscription's callback that a newer subscribe replaced and whose
// unsubscribe has not finished (found in review).
func TestReleaseWaitsForReplacedCallbacks(t *testing.T) {
	d, err := newDispatcher()
	if err != nil {
		t.Fatal(err)
	}
	defer d.closeFd()
	entered := make(chan struct{})
	var left atomic.Bool
	installTestNotify(d, func() {
		close(entered)
		time.Sleep(100 * time.Millisecond)
		left.Store(true)
	})
	go d.push(readyItem{ev: testEvent(d, event.NewContext(context.Background(), "k")), notice: cancelNotice})
	<-entered
	d.notify.install(nil, 0) // subscribe again without notify; the old unsubscribe still runs
	d.close()                // prosody_client_release
	if !left.Load() {
		t.Fatal("release completed while the old subscription's notify call still ran")
	}
}

// Subscribe, unsubscribe and subscribe again, called back to back, run in
// that order: the second subscription is running when its completion says
// so, and its callback stays installed (found in review: the first
// subscribe's goroutine could lose the race to the second, fail, and reset
// the second's state, leaving its consumer stopped and its callback
// installed for good).
func TestSubscribeUnsubscribeSubscribeRunInOrder(t *testing.T) {
	for round := 0; round < 50; round++ {
		id, st := testClientNew(`{"bootstrap_servers":"localhost:9094","group_id":"g","subscribed_topics":"t","mock":true,"probe_port":null}`)
		if st != 0 {
			t.Fatalf("client_new: status %d", st)
		}
		e, _ := clients.get(id)
		stA, a := testSubscribe(id, func() {})
		stU, u := testUnsubscribe(id)
		stB, b := testSubscribe(id, func() {})
		if stA != 0 || stU != 0 || stB != 0 {
			t.Fatalf("round %d: immediate statuses %d %d %d", round, stA, stU, stB)
		}
		sa, su, sb := <-a, <-u, <-b
		if sa != 0 || su != 0 || sb != 0 {
			t.Fatalf("round %d: completions subscribe %d, unsubscribe %d, subscribe %d; want all OK", round, sa, su, sb)
		}
		e.mu.Lock()
		subscribed := e.subscribed
		e.mu.Unlock()
		if state, _ := e.c.ConsumerState(); !subscribed || state != client.Running {
			t.Fatalf("round %d: after the second subscribe: subscribed %v, consumer state %v", round, subscribed, state)
		}
		if current(d(e)) == nil {
			t.Fatalf("round %d: the second subscription's callback is not installed", round)
		}
		if st, u := testUnsubscribe(id); st != 0 || <-u != 0 {
			t.Fatalf("round %d: the final unsubscribe failed", round)
		}
		if st := <-testRelease(id); st != 0 {
			t.Fatalf("round %d: release: status %d", round, st)
		}
	}
}

func d(e *clientEntry) *dispatcher { return e.disp }

// testDispatcher is a dispatcher that is closed, and its fd closed, when
// the test ends.
func testDispatcher(t *testing.T) *dispatcher {
	t.Helper()
	d, err := newDispatcher()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.close()
		d.closeFd()
	})
	return d
}

// Release takes its place after the subscribes and unsubscribes called
// before it: it completes last, after their completion callbacks returned
// and once no consumer is stopping, and a subscribe it overtook completes
// with CLOSED (found in review: release could complete while an
// unsubscribe was still stopping the consumer, or make that unsubscribe
// fail, or complete before the unsubscribe's callback had run).
func TestReleaseCompletesAfterEarlierSubscribesAndUnsubscribes(t *testing.T) {
	for round := 0; round < 50; round++ {
		id, st := testClientNew(`{"bootstrap_servers":"localhost:9094","group_id":"g","subscribed_topics":"t","mock":true,"probe_port":null}`)
		if st != 0 {
			t.Fatalf("client_new: status %d", st)
		}
		_, a := testSubscribe(id, func() {})
		// A host's completion callback that takes a while: release must
		// still complete after it.
		_, u := testSlowUnsubscribe(id, 20*time.Millisecond)
		r := testRelease(id)
		var order []string
		var sa, su int
		for len(order) < 3 {
			select {
			case sa = <-a:
				order = append(order, "subscribe")
			case su = <-u:
				order = append(order, "unsubscribe")
			case <-r:
				order = append(order, "release")
				buf := make([]byte, 1<<20)
				if strings.Contains(string(buf[:runtime.Stack(buf, true)]), "(*Consumer).Stop") {
					t.Fatalf("round %d: release completed while a consumer was still stopping", round)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("round %d: stuck after %v", round, order)
			}
		}
		// OK and OK when the subscribe ran before the release was called;
		// CLOSED and STATE when the release overtook it.
		if order[2] != "release" || !(sa == 0 && su == 0 || sa == 9 && su == 4) {
			t.Fatalf("round %d: completions in the order %v, subscribe %d, unsubscribe %d", round, order, sa, su)
		}
	}
}

// goroutineIn reports whether a goroutine is running fn (a function name
// as stack traces print it).
func goroutineIn(fn string) bool {
	buf := make([]byte, 1<<20)
	return strings.Contains(string(buf[:runtime.Stack(buf, true)]), fn)
}

// silentBroker accepts connections and never answers, so that a subscribe
// stays in the core's connect; stop makes the connect fail.
func silentBroker(t *testing.T) (addr string, stop func()) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	return ln.Addr().String(), func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	}
}

// A subscribe, and the state queries, return at once while an earlier
// subscribe is still connecting (found in review: they waited for the
// core's lock, held across the connect, for minutes).
func TestCallsDoNotWaitForASubscribeConnecting(t *testing.T) {
	addr, stop := silentBroker(t)
	id, st := testClientNew(fmt.Sprintf(`{"bootstrap_servers":%q,"group_id":"g","subscribed_topics":"t","probe_port":null,"cassandra_nodes":%q}`, addr, addr))
	if st != 0 {
		t.Fatalf("client_new: status %d", st)
	}
	_, first := testSubscribe(id, func() {})
	// Until the first subscribe is in the core, connecting.
	for deadline := time.Now().Add(10 * time.Second); !goroutineIn("core/client.(*Client).Subscribe("); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first subscribe never reached the core")
		}
	}
	e, _ := clients.get(id)
	returned := make(chan int, 1)
	go func() {
		e.c.ConsumerState()
		e.c.AssignedPartitionCount()
		e.c.IsStalled()
		st, _ := testSubscribe(id, func() {})
		returned <- st
	}()
	select {
	case st := <-returned:
		if st != 4 { // PROSODY_ERR_STATE
			t.Errorf("a second subscribe returned %d, want STATE (4)", st)
		}
	case <-time.After(2 * time.Second):
		t.Error("the calls waited for the subscribe that is connecting")
	}
	stop()
	<-first
	<-testRelease(id)
}

// TestExpiredEventIsNotWaitedFor: past its timeout an event held by the
// host is ended by the dispatcher (the outcome arrives without a
// completion), the host gets an EXPIRED notice, and the host's late
// completion is accepted and ignored. Completions racing the expiry give
// exactly one outcome.
func TestExpiredEventIsNotWaitedFor(t *testing.T) {
	d := testDispatcher(t)
	ev, outcome := expireEvent(t, d, true)
	var seen []polled
	for deadline := time.Now().Add(5 * time.Second); len(seen) == 0 && time.Now().Before(deadline); {
		seen = append(seen, testPoll(d)...)
		time.Sleep(time.Millisecond)
	}
	if len(seen) != 1 || seen[0].id != ev.id || !seen[0].expired {
		t.Fatalf("polled %+v, want one EXPIRED notice for %#x", seen, ev.id)
	}
	if err := testComplete(ev.id); err != nil {
		t.Fatalf("late completion: %v", err)
	}
	if err := testComplete(ev.id); err == nil {
		t.Fatal("a second completion of the expired event was accepted")
	}
	if len(outcome) != 0 {
		t.Fatalf("the late completion reached the engine: %v", <-outcome)
	}

	for round := 0; round < 200; round++ {
		parent, timeout := context.WithCancelCause(context.Background())
		ctx := event.NewContext(parent, "k")
		ev := testEvent(d, ctx)
		outcome := make(doneChan, 2)
		d.start(ev, outcome)
		testPoll(d) // the host holds it
		go timeout(event.ErrTimeout)
		_ = testComplete(ev.id)
		for deadline := time.Now().Add(5 * time.Second); len(outcome) == 0 && time.Now().Before(deadline); {
			time.Sleep(100 * time.Microsecond)
		}
		time.Sleep(2 * noticeTick) // a second outcome, if any, would come from the watch by now
		if n := len(outcome); n != 1 {
			t.Fatalf("round %d: %d outcomes, want exactly one", round, n)
		}
		testPoll(d)
	}
}

// An event that expires before the host has polled it is never handed to
// the host (its attempt has failed already, and its retry may be running):
// the poll drops it and its EXPIRED notice, and it leaves the table.
func TestExpiredBeforePollIsNotDelivered(t *testing.T) {
	d := testDispatcher(t)
	ev, _ := expireEvent(t, d, false)
	if seen := testPoll(d); len(seen) != 0 {
		t.Fatalf("polled %+v, want nothing: the event expired before the host saw it", seen)
	}
	if _, err := events.get(ev.id); err == nil {
		t.Fatal("the expired, undelivered event is still in the handle table")
	}
	if d.inFlight.Load() != 0 {
		t.Fatalf("%d events still counted in flight", d.inFlight.Load())
	}
}

// A host that completes a handle before polling it (handles are numbered
// in sequence, so it can guess one) is told the handle is unknown: the
// event is the host's only once a poll has written it out. The event is
// then polled and completed as any other.
func TestCompletingBeforePollIsRefused(t *testing.T) {
	d := testDispatcher(t)
	ev := testEvent(d, event.NewContext(context.Background(), "k"))
	outcome := make(doneChan, 2)
	d.start(ev, outcome)
	if err := testComplete(ev.id); !testInvalidHandle(err) {
		t.Fatalf("completing before the poll: %v, want INVALID_HANDLE", err)
	}
	if seen := testPoll(d); len(seen) != 1 || seen[0].id != ev.id {
		t.Fatalf("polled %+v, want the event", seen)
	}
	if err := testComplete(ev.id); err != nil {
		t.Fatal(err)
	}
	if err := <-outcome; err != nil {
		t.Fatalf("outcome %v", err)
	}
}

func TestPollCapacity(t *testing.T) {
	for _, tc := range []struct {
		capacity uint64
		want     int
	}{{0, 0}, {1, 1}, {256, 256}, {1 << 31, 1<<31 - 1}, {1<<63 + 5, 1<<31 - 1}, {^uint64(0), 1<<31 - 1}} {
		if got := testPollCapacity(tc.capacity); got != tc.want {
			t.Errorf("capacity %d: polls %d, want %d", tc.capacity, got, tc.want)
		}
	}
}

// A guessed completion racing the poll that writes the event out never
// frees the bytes the poll copies (run under -race): it is refused until
// the poll is done with them, and the event is completed exactly once.
func TestGuessedCompletionRacingPoll(t *testing.T) {
	d := testDispatcher(t)
	for range 2000 {
		ev := testEvent(d, event.NewContext(context.Background(), "k"))
		outcome := make(doneChan, 2)
		d.start(ev, outcome)
		guessed := make(chan error, 1)
		go func() { guessed <- testComplete(ev.id) }()
		seen := testPoll(d)
		if err := <-guessed; err != nil {
			if !testInvalidHandle(err) {
				t.Fatalf("guessed completion: %v", err)
			}
			if len(seen) != 1 || seen[0].id != ev.id {
				t.Fatalf("refused completion, polled %+v: want the event", seen)
			}
			if err := testComplete(ev.id); err != nil {
				t.Fatal(err)
			}
		}
		if err := <-outcome; err != nil {
			t.Fatalf("outcome %v", err)
		}
		if len(outcome) != 0 {
			t.Fatal("the event was completed twice")
		}
	}
}

// expireEvent starts an event, lets the host poll it when polled is set,
// times its attempt out as the core's watchdog does, and waits for the
// dispatcher to give the attempt up (errExpired) without the host.
func expireEvent(t *testing.T, d *dispatcher, polled bool) (*pendingEvent, doneChan) {
	t.Helper()
	parent, timeout := context.WithCancelCause(context.Background())
	ev := testEvent(d, event.NewContext(parent, "k"))
	outcome := make(doneChan, 2)
	d.start(ev, outcome)
	if polled {
		testPoll(d)
	}
	timeout(event.ErrTimeout)
	select {
	case err := <-outcome:
		if err != errExpired {
			t.Fatalf("outcome %v, want errExpired", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the dispatcher waited for the host past the timeout")
	}
	return ev, outcome
}

// The EXPIRED notice of an event reaches the host before the key's next
// event, which the expired attempt's outcome starts: a host that tracks
// its handlers by key sees the old one told to stop first.
func TestExpiredNoticePrecedesTheKeysNextEvent(t *testing.T) {
	d := testDispatcher(t)
	parent, timeout := context.WithCancelCause(context.Background())
	first := testEvent(d, event.NewContext(parent, "k"))
	next := testEvent(d, event.NewContext(context.Background(), "k"))
	nextOutcome := make(doneChan, 1)
	d.start(first, doneFunc(func(error) { d.start(next, nextOutcome) }))
	if seen := testPoll(d); len(seen) != 1 || seen[0].id != first.id {
		t.Fatalf("polled %+v, want the first event", seen)
	}
	timeout(event.ErrTimeout)
	var seen []polled
	for deadline := time.Now().Add(5 * time.Second); len(seen) < 2 && time.Now().Before(deadline); {
		seen = append(seen, testPoll(d)...)
		time.Sleep(time.Millisecond)
	}
	if len(seen) != 2 || seen[0].id != first.id || !seen[0].expired || seen[1].id != next.id || seen[1].expired {
		t.Fatalf("polled %+v, want the EXPIRED notice of %#x, then the event %#x", seen, first.id, next.id)
	}
	if err := testComplete(first.id); err != nil {
		t.Fatal(err)
	}
	if err := testComplete(next.id); err != nil {
		t.Fatal(err)
	}
	<-nextOutcome
}

// A panic in an expired attempt's outcome (its layers' after steps run on
// the watch's goroutine) is recovered and logged, not the end of the
// process, and the watch goes on for the events still held.
func TestPanicInAnExpiredOutcomeIsRecovered(t *testing.T) {
	d := testDispatcher(t)
	parent, timeout := context.WithCancelCause(context.Background())
	ev := testEvent(d, event.NewContext(parent, "k"))
	panicked := make(chan struct{})
	d.start(ev, doneFunc(func(error) { close(panicked); panic("after step") }))
	testPoll(d)
	timeout(event.ErrTimeout)
	select {
	case <-panicked:
	case <-time.After(5 * time.Second):
		t.Fatal("the expired attempt's outcome was never reported")
	}
	if err := testComplete(ev.id); err != nil {
		t.Fatal(err)
	}
	expireEvent(t, d, true) // the watch still gives up on the next one
}

// An event that reaches a released client (a consumer still starting or
// draining) is not started, not queued and not counted: its outcome is
// event.ErrNotStarted, which leaves its offset to the next owner without
// logging a failure for each event.
func TestEventAfterReleaseIsNotStarted(t *testing.T) {
	d := testDispatcher(t)
	d.close()
	ev := testEvent(d, event.NewContext(context.Background(), "k"))
	outcome := make(doneChan, 1)
	d.start(ev, outcome)
	if err := <-outcome; err != event.ErrNotStarted {
		t.Fatalf("outcome %v, want event.ErrNotStarted", err)
	}
	if seen := testPoll(d); len(seen) != 0 {
		t.Fatalf("polled %+v after release", seen)
	}
	if _, err := events.get(ev.id); err == nil {
		t.Fatal("the event is in the handle table")
	}
	if n := d.inFlight.Load(); n != 0 {
		t.Fatalf("%d events counted in flight", n)
	}
}
