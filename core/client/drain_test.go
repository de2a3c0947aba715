package client

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/internal/testservices"
)

// messageCounter is a slog handler that counts the records whose message
// starts with prefix: log lines are the observable sign of a partition's
// drain having begun.
type messageCounter struct {
	prefix string
	n      *atomic.Int64
}

func (h messageCounter) Enabled(context.Context, slog.Level) bool { return true }
func (h messageCounter) Handle(_ context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, h.prefix) {
		h.n.Add(1)
	}
	return nil
}
func (h messageCounter) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h messageCounter) WithGroup(string) slog.Handler      { return h }

// Unsubscribe starts no handler that had not started when it was called
// (core-behavior.md §3.9): handlers in flight finish, queued messages and
// messages waiting for a permit are left, uncommitted, for the next
// member, which handles every one of them.
func TestUnsubscribeStartsNoQueuedWork(t *testing.T) {
	const partitions, messages, keys, permits, quick = 4, 400, 100, 4, 50
	for _, tg := range targets(t) {
		t.Run(tg.name, func(t *testing.T) {
			topic := createTopic(t, tg, partitions)
			group := testservices.UniqueName("drain")
			producer := newClient(t, newConfig(t, tg, func(c *config.Config) { c.SourceSystem = "test" }))
			for i := range messages {
				sendSeq(t, producer, topic, fmt.Sprintf("k%d", i%keys), i)
			}
			consumerConfig := newConfig(t, tg, func(c *config.Config) {
				c.GroupID, c.SubscribedTopics = group, []string{topic}
				c.MaxConcurrency = permits
				c.ShutdownTimeout = time.Minute // the gate, not the budget, ends the handlers
			})

			var drains atomic.Int64
			first, err := New(consumerConfig, WithLogger(slog.New(messageCounter{"partition released; draining", &drains})))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { closeClient(t, first) })
			var starts, blocked atomic.Int64
			gate := make(chan struct{})
			var mu sync.Mutex
			seen := map[int]bool{}
			err = first.Subscribe(event.HandlerFuncs{Message: func(_ *event.Context, m *event.Message) error {
				if starts.Add(1) > quick {
					blocked.Add(1)
					<-gate
				}
				mu.Lock()
				seen[seqOf(m)] = true
				mu.Unlock()
				return nil
			}})
			if err != nil {
				t.Fatal(err)
			}
			// Every permit is held by a blocked handler: nothing else can
			// start until the gate opens.
			waitFor(t, time.Minute, "every permit held by a blocked handler", func() bool { return blocked.Load() == permits })
			startedBefore := starts.Load()

			unsubscribed := make(chan error, 1)
			go func() { unsubscribed <- first.Unsubscribe(context.Background()) }()
			waitFor(t, time.Minute, "every partition draining", func() bool { return drains.Load() == partitions })
			close(gate)
			if err := <-unsubscribed; err != nil {
				t.Fatalf("unsubscribe: %v", err)
			}
			if got := starts.Load(); got != startedBefore {
				t.Fatalf("%d handlers started after unsubscribe began (%d had started before it); want none", got-startedBefore, startedBefore)
			}

			second := newClient(t, consumerConfig)
			err = second.Subscribe(event.HandlerFuncs{Message: func(_ *event.Context, m *event.Message) error {
				mu.Lock()
				seen[seqOf(m)] = true
				mu.Unlock()
				return nil
			}})
			if err != nil {
				t.Fatal(err)
			}
			waitFor(t, time.Minute, "every message handled by one member or the other", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(seen) == messages
			})
		})
	}
}
