//go:build capitest

package main

import (
	"context"
	"testing"
	"time"

	"github.com/prosody-events/prosody-go/core/event"
)

// A cancellation notice must never reach the host before its event: a host
// ignores notices for handles it does not hold, and the event would then
// never get another. The cancellation watch finds events in the handle
// table, so an event must be queued no later than it becomes visible there
// (found in review: registering events before taking the dispatcher's lock
// broke this within ten rounds).
func TestNoticeNeverPrecedesItsEvent(t *testing.T) {
	d, err := newDispatcher()
	if err != nil {
		t.Fatal(err)
	}
	defer d.closeFd()
	defer d.close()
	// An event the host holds keeps the cancellation watch running.
	held := testEvent(d, event.NewContext(context.Background(), "held"))
	d.start(held, make(doneChan, 1))
	testPoll(d)
	for round := 0; round < 100; round++ {
		ctx := event.NewContext(context.Background(), "key")
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
		ctx.Cancel(event.ErrRevoked)
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
