package client

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/internal/testservices"
	"github.com/prosody-events/prosody-go/core/middleware"
)

// permitsBack waits until c's scheduler has no permit in use and no
// attempt waiting: every permit it handed out came back.
func permitsBack(t *testing.T, c *Client, when string) {
	t.Helper()
	s := c.scheduler.Load()
	if s == nil {
		t.Fatal("the client has no scheduler")
	}
	waitFor(t, time.Minute, "every permit back "+when, func() bool { return s.InUse() == 0 && s.Waiting() == 0 })
}

// heldPermits waits until c's scheduler has all n of its permits in use
// and at least one attempt waiting for one.
func heldPermits(t *testing.T, c *Client, n int) *middleware.Scheduler {
	t.Helper()
	s := c.scheduler.Load()
	waitFor(t, time.Minute, fmt.Sprintf("%d permits in use and attempts waiting", n), func() bool { return s.InUse() == n && s.Waiting() > 0 })
	return s
}

// Permits are counted, not leaked, whichever way an attempt ends:
// deferred and retried from a timer, an application timer, a handler
// timeout, an unsubscribe that cancels running and waiting attempts, and
// a rebalance that takes partitions away mid-flight.
func TestSchedulerPermitsComeBack(t *testing.T) {
	t.Run("deferred retries and timers", func(t *testing.T) {
		tg := target{"mock", true}
		topic := createTopic(t, tg, 4)
		c := newClient(t, newConfig(t, tg, func(c *config.Config) {
			c.GroupID, c.SubscribedTopics = testservices.UniqueName("permits"), []string{topic}
			c.MaxConcurrency = 2
			c.DeferBase, c.DeferMaxDelay = time.Second, time.Second
		}))
		var mu sync.Mutex
		tries := map[string]int{}
		succeeded, fired := 0, 0
		err := c.Subscribe(event.HandlerFuncs{
			Message: func(ctx *event.Context, m *event.Message) error {
				mu.Lock()
				defer mu.Unlock()
				id := fmt.Sprintf("%s/%d", m.Key, seqOf(m))
				tries[id]++
				if strings.HasPrefix(m.Key, "fail") && tries[id] <= 2 {
					return fmt.Errorf("attempt %d of %s fails", tries[id], id)
				}
				if strings.HasPrefix(m.Key, "timer") {
					if err := ctx.Schedule(time.Now().Add(time.Second)); err != nil {
						return err
					}
				}
				succeeded++
				return nil
			},
			Timer: func(*event.Context, *event.Timer) error {
				mu.Lock()
				fired++
				mu.Unlock()
				return nil
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		producer := newClient(t, newConfig(t, tg, func(c *config.Config) { c.SourceSystem = "test" }))
		for i := 0; i < 60; i++ {
			sendSeq(t, producer, topic, fmt.Sprintf("%s-%d", []string{"fail", "timer", "plain"}[i%3], i%9), i)
		}
		waitFor(t, time.Minute, "every message handled and every timer fired", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return succeeded == 60 && fired >= 3
		})
		permitsBack(t, c, "once everything ran")
		if err := c.Unsubscribe(context.Background()); err != nil {
			t.Fatal(err)
		}
		permitsBack(t, c, "after unsubscribe")
	})

	t.Run("handler timeouts", func(t *testing.T) {
		tg := target{"mock", true}
		topic := createTopic(t, tg, 2)
		c := newClient(t, newConfig(t, tg, func(c *config.Config) {
			c.GroupID, c.SubscribedTopics = testservices.UniqueName("permits"), []string{topic}
			c.MaxConcurrency = 2
			c.Timeout = config.Some(50 * time.Millisecond)
		}))
		var mu sync.Mutex
		tries := map[int]int{}
		succeeded := 0
		err := c.Subscribe(event.HandlerFuncs{Message: func(ctx *event.Context, m *event.Message) error {
			mu.Lock()
			tries[seqOf(m)]++
			first := tries[seqOf(m)] == 1
			mu.Unlock()
			if first {
				<-ctx.OnCancel() // the timeout
				return ctx.Err()
			}
			mu.Lock()
			succeeded++
			mu.Unlock()
			return nil
		}})
		if err != nil {
			t.Fatal(err)
		}
		producer := newClient(t, newConfig(t, tg, func(c *config.Config) { c.SourceSystem = "test" }))
		for i := 0; i < 12; i++ {
			sendSeq(t, producer, topic, fmt.Sprintf("k%d", i), i)
		}
		waitFor(t, time.Minute, "every message handled after its timeout", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return succeeded == 12
		})
		permitsBack(t, c, "once everything ran")
	})

	t.Run("unsubscribe cancels running and waiting attempts", func(t *testing.T) {
		tg := target{"mock", true}
		topic := createTopic(t, tg, 2)
		c := newClient(t, newConfig(t, tg, func(c *config.Config) {
			c.GroupID, c.SubscribedTopics = testservices.UniqueName("permits"), []string{topic}
			c.MaxConcurrency = 2
			c.ShutdownTimeout = time.Second
		}))
		err := c.Subscribe(event.HandlerFuncs{Message: func(ctx *event.Context, m *event.Message) error {
			<-ctx.OnCancel()
			return ctx.Err()
		}})
		if err != nil {
			t.Fatal(err)
		}
		producer := newClient(t, newConfig(t, tg, func(c *config.Config) { c.SourceSystem = "test" }))
		for i := 0; i < 20; i++ {
			sendSeq(t, producer, topic, fmt.Sprintf("k%d", i), i)
		}
		heldPermits(t, c, 2)
		if err := c.Unsubscribe(context.Background()); err != nil {
			t.Fatal(err)
		}
		permitsBack(t, c, "after unsubscribe")
	})

	for _, tg := range targets(t) {
		t.Run("rebalance/"+tg.name, func(t *testing.T) {
			topic := createTopic(t, tg, 4)
			group := testservices.UniqueName("permits")
			cfg := func(c *config.Config) {
				c.GroupID, c.SubscribedTopics = group, []string{topic}
				c.MaxConcurrency = 2
				c.ShutdownTimeout = time.Second
			}
			release := make(chan struct{})
			var mu sync.Mutex
			handled := map[int]bool{}
			h := event.HandlerFuncs{Message: func(ctx *event.Context, m *event.Message) error {
				select {
				case <-release:
				case <-ctx.OnCancel():
					return ctx.Err()
				}
				mu.Lock()
				handled[seqOf(m)] = true
				mu.Unlock()
				return nil
			}}
			first := newClient(t, newConfig(t, tg, cfg))
			if err := first.Subscribe(h); err != nil {
				t.Fatal(err)
			}
			waitFor(t, time.Minute, "the first consumer owns every partition", func() bool { return first.AssignedPartitionCount() == 4 })
			producer := newClient(t, newConfig(t, tg, func(c *config.Config) { c.SourceSystem = "test" }))
			for i := 0; i < 40; i++ {
				sendSeq(t, producer, topic, fmt.Sprintf("k%d", i), i)
			}
			heldPermits(t, first, 2)
			second := newClient(t, newConfig(t, tg, cfg))
			if err := second.Subscribe(h); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 2*time.Minute, "the partitions shared", func() bool {
				a, b := first.AssignedPartitionCount(), second.AssignedPartitionCount()
				return a > 0 && b > 0 && a+b == 4
			})
			close(release)
			waitFor(t, time.Minute, "every message handled", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(handled) == 40
			})
			permitsBack(t, first, "on the consumer that lost partitions")
			permitsBack(t, second, "on the consumer that gained them")
		})
	}
}
