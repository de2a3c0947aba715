package deferstore

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/prosody-events/prosody-go/core/internal/testservices"
	"github.com/prosody-events/prosody-go/core/timerstore"
)

// backend prepares isolated storage for one run and returns an opener;
// every Store the opener returns sees the same data (for Cassandra, each
// one has a session of its own), which is how persistence is checked.
type backend func(t *testing.T) (open func(t *testing.T) Store)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

type harness struct {
	t     *testing.T
	ctx   context.Context
	store Store
	open  func(t *testing.T) Store
	group string
}

type conformanceCase struct {
	name string
	run  func(h *harness)
}

// runConformance runs every case against one implementation. Subtests use
// distinct groups, hence distinct segments.
func runConformance(t *testing.T, newEnv backend, cases []conformanceCase) {
	open := newEnv(t)
	store := open(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.run(&harness{t: t, ctx: testCtx(t), store: store, open: open, group: testservices.UniqueName("g")})
		})
	}
}

func (h *harness) messagesOf(s Store, group string, partition int32) *msgCheck {
	h.t.Helper()
	seg, err := s.Messages(h.ctx, group, "topic", partition)
	if err != nil {
		h.t.Fatalf("Messages: %v", err)
	}
	return &msgCheck{h: h, seg: seg}
}

func (h *harness) messages(partition int32) *msgCheck {
	h.t.Helper()
	return h.messagesOf(h.store, h.group, partition)
}

func (h *harness) timersOf(s Store, group string, partition int32) *timerCheck {
	h.t.Helper()
	seg, err := s.Timers(h.ctx, group, "topic", partition)
	if err != nil {
		h.t.Fatalf("Timers: %v", err)
	}
	return &timerCheck{h: h, seg: seg}
}

func (h *harness) timers(partition int32) *timerCheck {
	h.t.Helper()
	return h.timersOf(h.store, h.group, partition)
}

func (h *harness) check(err error, what string) {
	h.t.Helper()
	if err != nil {
		h.t.Fatalf("%s: %v", what, err)
	}
}

// msgCheck wraps a MessageSegment with assertions.
type msgCheck struct {
	h   *harness
	seg MessageSegment
}

func (m *msgCheck) first(key string, o int64) {
	m.h.t.Helper()
	m.h.check(m.seg.DeferFirst(m.h.ctx, key, o), "DeferFirst")
}

func (m *msgCheck) append(key string, offsets ...int64) {
	m.h.t.Helper()
	for _, o := range offsets {
		m.h.check(m.seg.Append(m.h.ctx, key, o), "Append")
	}
}

func (m *msgCheck) retries(key string, n uint32) {
	m.h.t.Helper()
	m.h.check(m.seg.SetRetries(m.h.ctx, key, n), "SetRetries")
}

// wantNext asserts the head; a negative offset means "no deferred offset".
func (m *msgCheck) wantNext(key string, offset int64, retries uint32) {
	m.h.t.Helper()
	o, r, ok, err := m.seg.Next(m.h.ctx, key)
	m.h.check(err, "Next")
	switch {
	case offset < 0 && ok:
		m.h.t.Fatalf("Next(%q) = %d (retries %d), want none", key, o, r)
	case offset >= 0 && (!ok || o != offset || r != retries):
		m.h.t.Fatalf("Next(%q) = %d, %d, %v; want %d, %d, true", key, o, r, ok, offset, retries)
	}
}

// complete asserts Complete's answer; a negative next means "none left".
func (m *msgCheck) complete(key string, offset, next int64) {
	m.h.t.Helper()
	n, more, err := m.seg.Complete(m.h.ctx, key, offset)
	m.h.check(err, "Complete")
	if (next < 0 && more) || (next >= 0 && (!more || n != next)) {
		m.h.t.Fatalf("Complete(%q, %d) = %d, %v; want %d", key, offset, n, more, next)
	}
}

// timerCheck wraps a TimerSegment with assertions.
type timerCheck struct {
	h   *harness
	seg TimerSegment
}

func dt(at timerstore.Time, span map[string]string) DeferredTimer {
	return DeferredTimer{Time: at, Span: span}
}

func (c *timerCheck) first(key string, t DeferredTimer) {
	c.h.t.Helper()
	c.h.check(c.seg.DeferFirst(c.h.ctx, key, t), "DeferFirst")
}

func (c *timerCheck) append(key string, ts ...DeferredTimer) {
	c.h.t.Helper()
	for _, t := range ts {
		c.h.check(c.seg.Append(c.h.ctx, key, t), "Append")
	}
}

func (c *timerCheck) retries(key string, n uint32) {
	c.h.t.Helper()
	c.h.check(c.seg.SetRetries(c.h.ctx, key, n), "SetRetries")
}

func (c *timerCheck) remove(key string, at timerstore.Time) {
	c.h.t.Helper()
	c.h.check(c.seg.Remove(c.h.ctx, key, at), "Remove")
}

// wantNext asserts the head; nil means "no deferred timer".
func (c *timerCheck) wantNext(key string, want *DeferredTimer, retries uint32) {
	c.h.t.Helper()
	got, r, ok, err := c.seg.Next(c.h.ctx, key)
	c.h.check(err, "Next")
	switch {
	case want == nil && ok:
		c.h.t.Fatalf("Next(%q) = %+v (retries %d), want none", key, got, r)
	case want != nil && (!ok || !reflect.DeepEqual(got, *want) || r != retries):
		c.h.t.Fatalf("Next(%q) = %+v, %d, %v; want %+v, %d, true", key, got, r, ok, *want, retries)
	}
}

func (c *timerCheck) complete(key string, at timerstore.Time, want *DeferredTimer) {
	c.h.t.Helper()
	got, more, err := c.seg.Complete(c.h.ctx, key, at)
	c.h.check(err, "Complete")
	if (want == nil && more) || (want != nil && (!more || !reflect.DeepEqual(got, *want))) {
		c.h.t.Fatalf("Complete(%q, %d) = %+v, %v; want %+v", key, at, got, more, want)
	}
}

func (c *timerCheck) wantTimes(key string, want ...timerstore.Time) {
	c.h.t.Helper()
	got, err := c.seg.Times(c.h.ctx, key)
	c.h.check(err, "Times")
	if (len(got) != 0 || len(want) != 0) && !reflect.DeepEqual(got, want) {
		c.h.t.Fatalf("Times(%q) = %v, want %v", key, got, want)
	}
}

func ptr(t DeferredTimer) *DeferredTimer { return &t }

func TestMemoryConformance(t *testing.T) {
	mem := func(*testing.T) func(*testing.T) Store {
		s := NewMemory()
		// One process, one memory: every "other" store is the same one.
		return func(*testing.T) Store { return s }
	}
	t.Run("messages", func(t *testing.T) { runConformance(t, mem, messageCases) })
	t.Run("timers", func(t *testing.T) { runConformance(t, mem, timerCases) })
}
