//go:build capitest

package main

/*
#include <stdlib.h>
#include "shims.h"
extern void prosodyTest_notify(void *ud);
extern void prosodyTest_done(void *ud, int status, char *message);
*/
import "C"

import (
	"sync"
	"time"
	"unsafe"

	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/tracing"
)

// Test hooks for the dispatcher (go test -tags capitest ./capi): test
// files cannot use cgo themselves.

func testEvent(d *dispatcher, ctx *event.Context) *pendingEvent {
	return newPendingEvent(0, d, ctx, C.PROSODY_EVENT_MESSAGE, "topic", "key", []byte(`{}`), "", tracing.Fields{})
}

// polled is what the host sees of one polled item.
type polled struct {
	id        uint64
	cancelled bool
	expired   bool
}

func testPoll(d *dispatcher) []polled {
	out := make([]C.prosody_event, 64)
	n := d.poll(eventArray{base: unsafe.Pointer(&out[0]), n: len(out), stride: unsafe.Sizeof(out[0])})
	items := make([]polled, n)
	for i, e := range out[:n] {
		items[i] = polled{uint64(e.event), e.kind == C.PROSODY_EVENT_CANCELLED, e.kind == C.PROSODY_EVENT_EXPIRED}
	}
	return items
}

// testNotifies are the Go functions behind the C notify callback the tests
// install; its user_data is an index into them.
var testNotifies []func()

//export prosodyTest_notify
func prosodyTest_notify(ud unsafe.Pointer) { testNotifies[uintptr(ud)]() }

// installTestNotify installs f as d's notify callback, as a subscribe does.
func installTestNotify(d *dispatcher, f func()) *notifier {
	testNotifies = append(testNotifies, f)
	return d.notify.install(C.prosody_notify_fn(unsafe.Pointer(C.prosodyTest_notify)), C.uintptr_t(len(testNotifies)-1))
}

// cancelNotice is the kind of a cancellation notice, for test files.
const cancelNotice = C.PROSODY_EVENT_CANCELLED

// testComplete completes an event OK, as prosody_event_complete does.
func testComplete(id uint64) error { return complete(id, C.PROSODY_OUTCOME_OK, nil) }

// testPollCapacity is pollCapacity for a host's size_t.
func testPollCapacity(capacity uint64) int { return pollCapacity(C.size_t(capacity)) }

// testInvalidHandle reports whether err carries PROSODY_ERR_INVALID_HANDLE.
func testInvalidHandle(err error) bool { return statusOf(err) == C.PROSODY_ERR_INVALID_HANDLE }

// Completions of the exported calls, by user_data.
var testDone struct {
	mu   sync.Mutex
	next uintptr
	chs  map[uintptr]chan int
	// slow is how long the callback of a completion takes, as a host's
	// might, before it reports the status.
	slow map[uintptr]time.Duration
}

//export prosodyTest_done
func prosodyTest_done(ud unsafe.Pointer, status C.int, _ *C.char) {
	testDone.mu.Lock()
	ch, slow := testDone.chs[uintptr(ud)], testDone.slow[uintptr(ud)]
	testDone.mu.Unlock()
	time.Sleep(slow)
	ch <- int(status)
}

// testCompletion is a completion callback and the channel its status
// arrives on.
func testCompletion() (C.prosody_completion_fn, C.uintptr_t, chan int) {
	return testSlowCompletion(0)
}

// testSlowCompletion is testCompletion with a callback that takes slow.
func testSlowCompletion(slow time.Duration) (C.prosody_completion_fn, C.uintptr_t, chan int) {
	testDone.mu.Lock()
	defer testDone.mu.Unlock()
	if testDone.chs == nil {
		testDone.chs, testDone.slow = map[uintptr]chan int{}, map[uintptr]time.Duration{}
	}
	testDone.next++
	ch := make(chan int, 1)
	testDone.chs[testDone.next], testDone.slow[testDone.next] = ch, slow
	return C.prosody_completion_fn(unsafe.Pointer(C.prosodyTest_done)), C.uintptr_t(testDone.next), ch
}

// The exported calls, as a host makes them; each returns the immediate
// status and, where there is one, the channel of the completion's.

func testClientNew(config string) (uint64, int) {
	cfg := C.CString(config)
	defer C.free(unsafe.Pointer(cfg))
	var id C.uint64_t
	st := prosodyGo_client_new(cfg, &id, nil)
	return uint64(id), int(st)
}

func testSubscribe(id uint64, notify func()) (int, chan int) {
	var h C.prosody_handler_config
	h.size = C.size_t(unsafe.Sizeof(h))
	testNotifies = append(testNotifies, notify)
	h.notify = C.prosody_notify_fn(unsafe.Pointer(C.prosodyTest_notify))
	setTestUserData(&h, uintptr(len(testNotifies)-1))
	fn, ud, ch := testCompletion()
	return int(prosodyGo_client_subscribe(C.uint64_t(id), &h, fn, ud, nil)), ch
}

func testUnsubscribe(id uint64) (int, chan int) { return testSlowUnsubscribe(id, 0) }

// testSlowUnsubscribe unsubscribes with a completion callback that takes
// slow.
func testSlowUnsubscribe(id uint64, slow time.Duration) (int, chan int) {
	fn, ud, ch := testSlowCompletion(slow)
	return int(prosodyGo_client_unsubscribe(C.uint64_t(id), fn, ud, nil)), ch
}

func testRelease(id uint64) chan int {
	fn, ud, ch := testCompletion()
	prosodyGo_client_release(C.uint64_t(id), fn, ud, nil)
	return ch
}
