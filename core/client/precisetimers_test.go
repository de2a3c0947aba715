package client

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/internal/testservices"
	"github.com/prosody-events/prosody-go/core/timerwake"
)

// With WithPreciseTimers, handlers that sleep are handled as without it,
// across a subscribe, unsubscribe and subscribe again; each subscription
// runs one waker, which ends with it.
func TestPreciseTimers(t *testing.T) {
	tg := target{"mock", true}
	topic := createTopic(t, tg, 2)
	cfg := newConfig(t, tg, func(c *config.Config) {
		c.GroupID, c.SubscribedTopics = testservices.UniqueName("precise"), []string{topic}
		c.MaxConcurrency = 4
	})
	c, err := New(cfg, WithLogger(quietLogger()), WithPreciseTimers(100*time.Microsecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeClient(t, c) })
	var handled atomic.Int64
	h := event.HandlerFuncs{Message: func(*event.Context, *event.Message) error {
		time.Sleep(2 * time.Millisecond)
		handled.Add(1)
		return nil
	}}
	// Another source system: a client skips what it produced itself.
	sender := newClient(t, newConfig(t, tg, func(c *config.Config) { c.SourceSystem = "sender" }))
	const n = 40
	for round := 1; round <= 2; round++ {
		if err := c.Subscribe(h); err != nil {
			t.Fatal(err)
		}
		if n := timerwake.Running(); n != 1 {
			t.Fatalf("subscribed: %d wakers run, want 1", n)
		}
		waitFor(t, time.Minute, "assignment", func() bool { return c.AssignedPartitionCount() == 2 })
		for i := range n {
			if err := sender.Send(context.Background(), topic, fmt.Sprintf("k%d", i), []byte(`{}`)); err != nil {
				t.Fatal(err)
			}
		}
		waitFor(t, time.Minute, fmt.Sprintf("%d messages handled", round*n), func() bool { return handled.Load() >= int64(round*n) })
		if err := c.Unsubscribe(context.Background()); err != nil {
			t.Fatal(err)
		}
		if n := timerwake.Running(); n != 0 {
			t.Fatalf("unsubscribed: %d wakers run, want 0", n)
		}
	}
	if got := handled.Load(); got != 2*n {
		t.Fatalf("handled %d messages, want %d", got, 2*n)
	}
}

// A period of 0 or less leaves the waker off.
func TestPreciseTimersOff(t *testing.T) {
	tg := target{"mock", true}
	topic := createTopic(t, tg, 1)
	cfg := newConfig(t, tg, func(c *config.Config) {
		c.GroupID, c.SubscribedTopics = testservices.UniqueName("precise-off"), []string{topic}
	})
	c, err := New(cfg, WithLogger(quietLogger()), WithPreciseTimers(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeClient(t, c) })
	if err := c.Subscribe(event.HandlerFuncs{Message: func(*event.Context, *event.Message) error { return nil }}); err != nil {
		t.Fatal(err)
	}
	if n := timerwake.Running(); n != 0 {
		t.Fatalf("WithPreciseTimers(0): %d wakers run, want 0", n)
	}
}
