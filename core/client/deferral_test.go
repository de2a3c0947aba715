package client

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/internal/testservices"
)

// logCounter counts the log records whose message starts with a prefix,
// and keeps their error attributes.
type logCounter struct {
	prefix string
	n      atomic.Int64
	mu     sync.Mutex
	errs   []string
}

func (l *logCounter) Enabled(context.Context, slog.Level) bool { return true }
func (l *logCounter) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logCounter) WithGroup(string) slog.Handler            { return l }
func (l *logCounter) Handle(_ context.Context, r slog.Record) error {
	if !strings.HasPrefix(r.Message, l.prefix) {
		return nil
	}
	l.n.Add(1)
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "error" {
			l.mu.Lock()
			l.errs = append(l.errs, a.Value.String())
			l.mu.Unlock()
		}
		return true
	})
	return nil
}

func (l *logCounter) errors() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.errs)
}

// deferrals counts first deferrals of messages.
func deferrals() *logCounter { return &logCounter{prefix: "message deferred"} }

// seqOf is the "seq" of a test payload.
func seqOf(m *event.Message) int {
	var body struct{ Seq int }
	_ = json.Unmarshal(m.Payload, &body)
	return body.Seq
}

func sendSeq(t *testing.T, c *Client, topic, key string, seq int) {
	t.Helper()
	if err := c.Send(context.Background(), topic, key, fmt.Appendf(nil, `{"seq":%d}`, seq)); err != nil {
		t.Fatal(err)
	}
}

// attempt is one handler call the tests record.
type attempt struct {
	key string
	seq int
	at  time.Time
	ok  bool
}

type attempts struct {
	mu  sync.Mutex
	all []attempt
}

func (a *attempts) add(m *event.Message, ok bool) {
	a.mu.Lock()
	a.all = append(a.all, attempt{m.Key, seqOf(m), time.Now(), ok})
	a.mu.Unlock()
}

func (a *attempts) of(key string) []attempt {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []attempt
	for _, x := range a.all {
		if x.key == key {
			out = append(out, x)
		}
	}
	return out
}

func (a *attempts) succeeded(key string) []int {
	var out []int
	for _, x := range a.of(key) {
		if x.ok {
			out = append(out, x.seq)
		}
	}
	return out
}

func (a *attempts) count(pred func(attempt) bool) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, x := range a.all {
		if pred(x) {
			n++
		}
	}
	return n
}

// The poisoned key: its first message fails five times, then succeeds.
// While it is deferred, every other key of the partition is handled and
// the committed offset passes it; its later messages run only after it,
// in order; its retries back off as §4.6 says.
func TestPipelineDefersAPoisonedKey(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.name, func(t *testing.T) {
			topic := createTopic(t, tg, 1)
			group := testservices.UniqueName("poison")
			c := newClient(t, newConfig(t, tg, func(c *config.Config) {
				c.GroupID, c.SubscribedTopics = group, []string{topic}
				c.DeferBase, c.DeferMaxDelay = time.Second, 2*time.Second
			}))
			var seen attempts
			release := make(chan struct{})
			err := c.Subscribe(event.HandlerFuncs{Message: func(_ *event.Context, m *event.Message) error {
				if m.Key == "poison" && seqOf(m) == 0 {
					n := len(seen.of("poison")) + 1
					if n <= 5 {
						seen.add(m, false)
						return fmt.Errorf("attempt %d fails", n)
					}
					<-release // the test looks at the partition while the key is still deferred
				}
				seen.add(m, true)
				return nil
			}})
			if err != nil {
				t.Fatal(err)
			}
			producer := newClient(t, newConfig(t, tg, func(c *config.Config) { c.SourceSystem = "test" }))
			sendSeq(t, producer, topic, "poison", 0)
			for i := 0; i < 10; i++ {
				sendSeq(t, producer, topic, fmt.Sprintf("healthy-%d", i), i)
			}
			sendSeq(t, producer, topic, "poison", 1)
			sendSeq(t, producer, topic, "poison", 2)
			for i := 10; i < 20; i++ {
				sendSeq(t, producer, topic, fmt.Sprintf("healthy-%d", i), i)
			}

			adm := clusterAdmin(t, brokerAddrs(t, tg))
			waitFor(t, time.Minute, "every other key handled and the poisoned offset committed, while the key is deferred", func() bool {
				healthy := seen.count(func(a attempt) bool { return strings.HasPrefix(a.key, "healthy") && a.ok })
				return healthy == 20 && committed(t, adm, group, topic) >= 1
			})
			if got := seen.succeeded("poison"); len(got) != 0 {
				t.Fatalf("the poisoned key's messages ran while it was deferred: %v", got)
			}
			waitFor(t, time.Minute, "the sixth attempt", func() bool { return len(seen.of("poison")) >= 5 && committed(t, adm, group, topic) == 23 })
			close(release)
			waitFor(t, time.Minute, "the poisoned key's three messages", func() bool { return len(seen.succeeded("poison")) == 3 })
			if got := seen.succeeded("poison"); !slices.Equal(got, []int{0, 1, 2}) {
				t.Fatalf("the poisoned key ran %v, want [0 1 2]", got)
			}
			tries := seen.of("poison")
			if len(tries) != 8 {
				t.Fatalf("%d attempts of the poisoned key, want 5 failures and 3 successes: %+v", len(tries), tries)
			}
			// Spacing: the first retry is immediate (backoff 0), then a
			// whole number of seconds in [1, min(2^(n-1), 2)], timers
			// firing within about half a second of their second. The upper
			// bound leaves room for a loaded machine.
			caps := []time.Duration{0, time.Second, 2 * time.Second, 2 * time.Second, 2 * time.Second}
			for i := 1; i < 6; i++ {
				gap := tries[i].at.Sub(tries[i-1].at)
				lo, hi := time.Duration(0), caps[i-1]+3*time.Second
				if i > 1 {
					lo = 400 * time.Millisecond
				}
				if gap < lo || gap > hi {
					t.Fatalf("attempt %d came %v after the one before, want within [%v, %v]", i+1, gap, lo, hi)
				}
			}
		})
	}
}

// An outage: once most of at least ten recent outcomes fail, new failures
// are retried in place (the partition fills and pauses) instead of being
// deferred; once successes return, deferral resumes.
func TestPipelineStopsDeferringDuringAnOutage(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.name, func(t *testing.T) {
			topic := createTopic(t, tg, 1)
			group := testservices.UniqueName("outage")
			logs := deferrals()
			cfg := newConfig(t, tg, func(c *config.Config) {
				c.GroupID, c.SubscribedTopics = group, []string{topic}
				c.DeferBase, c.DeferMaxDelay = time.Second, time.Second
				c.DeferFailureThreshold, c.DeferFailureWindow = 0.5, 3*time.Second
				c.MaxUncommitted = 16
			})
			c, err := New(cfg, WithLogger(slog.New(logs)))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { closeClient(t, c) })
			var down atomic.Bool
			down.Store(true)
			var seen attempts
			probeFails := map[string]bool{} // probes fail once
			var mu sync.Mutex
			err = c.Subscribe(event.HandlerFuncs{Message: func(_ *event.Context, m *event.Message) error {
				mu.Lock()
				probe := strings.HasPrefix(m.Key, "probe") && !probeFails[m.Key]
				if probe {
					probeFails[m.Key] = true
				}
				mu.Unlock()
				if down.Load() || probe {
					seen.add(m, false)
					return fmt.Errorf("database unavailable")
				}
				seen.add(m, true)
				return nil
			}})
			if err != nil {
				t.Fatal(err)
			}
			producer := newClient(t, newConfig(t, tg, func(c *config.Config) { c.SourceSystem = "test" }))
			const keys = 40
			for i := 0; i < keys; i++ {
				sendSeq(t, producer, topic, fmt.Sprintf("key-%d", i), i)
			}
			failures := func() int { return seen.count(func(a attempt) bool { return !a.ok }) }
			waitFor(t, time.Minute, "the outage to be retried in place", func() bool { return failures() >= 300 })
			before := logs.n.Load()
			more := failures() + 300
			waitFor(t, time.Minute, "more retries", func() bool { return failures() >= more })
			if after := logs.n.Load(); after != before || after >= keys/2 {
				t.Fatalf("deferrals went on during the outage: %d, then %d (of %d keys)", before, after, keys)
			}
			adm := clusterAdmin(t, brokerAddrs(t, tg))
			if off := committed(t, adm, group, topic); off >= keys {
				t.Fatalf("the partition committed everything (%d) while its keys retried in place", off)
			}

			down.Store(false)
			waitFor(t, time.Minute, "every key once the outage ends", func() bool {
				return seen.count(func(a attempt) bool { return a.ok }) >= keys && committed(t, adm, group, topic) == keys
			})
			// Successes dominate the window again: a probe's failure is
			// deferred. Each round adds healthy traffic and one probe
			// that fails once, until one is deferred.
			deferred := logs.n.Load()
			seq := keys
			waitFor(t, time.Minute, "a probe's failure to be deferred again", func() bool {
				for i := 0; i < 10; i++ {
					sendSeq(t, producer, topic, fmt.Sprintf("healthy-%d", seq), seq)
					seq++
				}
				probe := fmt.Sprintf("probe-%d", seq)
				sendSeq(t, producer, topic, probe, seq)
				seq++
				waitFor(t, time.Minute, "the probe", func() bool { return len(seen.succeeded(probe)) == 1 })
				return logs.n.Load() > deferred
			})
		})
	}
}

// A hot key: once its handlers have run more than
// monopolization_threshold of the window, its events are refused and
// deferred, and the other keys get the permits.
func TestPipelineDefersAHotKey(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.name, func(t *testing.T) {
			topic := createTopic(t, tg, 1)
			group := testservices.UniqueName("hot")
			logs := deferrals()
			cfg := newConfig(t, tg, func(c *config.Config) {
				c.GroupID, c.SubscribedTopics = group, []string{topic}
				c.DeferBase, c.DeferMaxDelay = time.Second, time.Second
				c.MonopolizationWindow, c.MonopolizationThreshold = 2*time.Second, 0.3
				c.MaxConcurrency = 2
			})
			c, err := New(cfg, WithLogger(slog.New(logs)))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { closeClient(t, c) })
			var seen attempts
			err = c.Subscribe(event.HandlerFuncs{Message: func(ctx *event.Context, m *event.Message) error {
				if m.Key == "hot" {
					select {
					case <-time.After(400 * time.Millisecond): // the hot key's handler is slow
					case <-ctx.Done():
						return ctx.Err()
					}
				}
				seen.add(m, true)
				return nil
			}})
			if err != nil {
				t.Fatal(err)
			}
			producer := newClient(t, newConfig(t, tg, func(c *config.Config) { c.SourceSystem = "test" }))
			for i := 0; i < 6; i++ {
				sendSeq(t, producer, topic, "hot", i)
			}
			for i := 0; i < 30; i++ {
				sendSeq(t, producer, topic, fmt.Sprintf("cold-%d", i), i)
			}
			waitFor(t, time.Minute, "every cold key handled", func() bool {
				return seen.count(func(a attempt) bool { return strings.HasPrefix(a.key, "cold") }) == 30
			})
			waitFor(t, time.Minute, "the hot key refused and deferred", func() bool {
				return slices.ContainsFunc(logs.errors(), func(e string) bool { return strings.Contains(e, "monopolizing") })
			})
			if n := len(seen.succeeded("hot")); n >= 6 {
				t.Fatalf("all %d hot messages ran before the cold keys finished", n)
			}
			waitFor(t, time.Minute, "the hot key's messages, in order", func() bool { return len(seen.succeeded("hot")) == 6 })
			if got := seen.succeeded("hot"); !slices.Equal(got, []int{0, 1, 2, 3, 4, 5}) {
				t.Fatalf("hot key ran %v", got)
			}
		})
	}
}
