package invocation

import (
	"context"
	"errors"
	"testing"
	"time"
)

type recordingTimers struct {
	calls []string
	spans []map[string]string
}

func (r *recordingTimers) Schedule(_ context.Context, key string, _ time.Time, span map[string]string) error {
	r.calls = append(r.calls, "schedule "+key)
	r.spans = append(r.spans, span)
	return nil
}
func (r *recordingTimers) ClearAndSchedule(_ context.Context, key string, _ time.Time, span map[string]string) error {
	r.calls = append(r.calls, "clear_and_schedule "+key)
	r.spans = append(r.spans, span)
	return nil
}
func (r *recordingTimers) Unschedule(_ context.Context, key string, _ time.Time) error {
	r.calls = append(r.calls, "unschedule "+key)
	return nil
}
func (r *recordingTimers) ClearScheduled(_ context.Context, key string) error {
	r.calls = append(r.calls, "clear_scheduled "+key)
	return nil
}
func (r *recordingTimers) Scheduled(_ context.Context, key string) ([]time.Time, error) {
	r.calls = append(r.calls, "scheduled "+key)
	return nil, nil
}

func TestTimerOperationsUseTheEventKey(t *testing.T) {
	rec := &recordingTimers{}
	c := NewInvocation(context.Background(), "k1")
	c.SetEnv(&Env{Timers: rec}, fixedTrace{"traceparent": "tp"})
	attempt := c.Attempt() // handlers run in attempt contexts
	now := time.Now()
	ops := []func() error{
		func() error { return attempt.Schedule(now) },
		func() error { return attempt.ClearAndSchedule(now) },
		func() error { return attempt.Unschedule(now) },
		attempt.ClearScheduled,
		func() error { _, err := attempt.Scheduled(); return err },
	}
	for _, op := range ops {
		if err := op(); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"schedule k1", "clear_and_schedule k1", "unschedule k1", "clear_scheduled k1", "scheduled k1"}
	for i := range want {
		if rec.calls[i] != want[i] {
			t.Fatalf("calls %v, want %v", rec.calls, want)
		}
	}
	for i, span := range rec.spans {
		if span["traceparent"] != "tp" {
			t.Fatalf("timer %d stored span %v, want the event's trace context", i, span)
		}
	}
}

// fixedTrace is the trace context of an event in these tests.
type fixedTrace map[string]string

func (f fixedTrace) TraceSpan() map[string]string { return f }

func TestTimerOperationsCheckTheContext(t *testing.T) {
	tests := []struct {
		name string
		ctx  func() *Context
		want error
	}{
		{"no timers", func() *Context { return NewContext(context.Background(), "k") }, ErrNoTimers},
		{"after the handler returned", func() *Context {
			c := NewContext(context.Background(), "k")
			c.SetEnv(&Env{Timers: &recordingTimers{}}, nil)
			c.Invalidate()
			return c
		}, ErrInvalidContext},
		{"partition revoked", func() *Context {
			scope := NewScope()
			c := NewContext(scope, "k")
			c.SetEnv(&Env{Timers: &recordingTimers{}}, nil)
			scope.Cancel(ErrRevoked)
			return c
		}, ErrRevoked},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.ctx().Schedule(time.Now()); !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestBlockingHint(t *testing.T) {
	c := NewContext(context.Background(), "k")
	c.Blocking()() // no env: a harmless no-op
	blocked, resumed := 0, 0
	c.SetEnv(&Env{Block: func() func() { blocked++; return func() { resumed++ } }}, nil)
	resume := c.Attempt().Blocking()
	resume()
	if blocked != 1 || resumed != 1 {
		t.Fatalf("blocked %d resumed %d", blocked, resumed)
	}
}
