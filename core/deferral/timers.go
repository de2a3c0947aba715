package deferral

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/prosody-events/prosody-go/core/deferstore"
	"github.com/prosody-events/prosody-go/core/fault"
	"github.com/prosody-events/prosody-go/core/internal/invocation"
	"github.com/prosody-events/prosody-go/core/timerstore"
)

// Timers are a pipeline partition's application timers as a handler's
// context offers them (core-behavior.md §4.5, the timer-defer context).
// While a key's timers are deferred, its new timers queue behind the
// deferred one instead of firing on their own, and the operations see
// both places: otherwise a timer scheduled for now would fire before the
// failing one it was meant to follow.
type Timers struct {
	App invocation.Timers // the partition's application timers
	P   *Partition
}

// Schedule implements invocation.Timers.
func (t Timers) Schedule(ctx context.Context, key string, at time.Time, span map[string]string) error {
	if !t.P.TimerDeferred(key) {
		return t.App.Schedule(ctx, key, at, span)
	}
	if err := timerstore.CheckTime(at); err != nil {
		return fault.Permanent(err) // as the application timers refuse it: a retry cannot help
	}
	if err := t.P.Timers.Append(ctx, key, deferstore.DeferredTimer{Time: timerstore.TimeOf(at), Span: span}); err != nil {
		return fmt.Errorf("scheduling a timer behind the key's deferred one: %w", err)
	}
	return nil
}

// ClearAndSchedule implements invocation.Timers: the key's deferred
// timers go too, so the new timer fires on its own.
func (t Timers) ClearAndSchedule(ctx context.Context, key string, at time.Time, span map[string]string) error {
	if err := t.clearDeferred(ctx, key); err != nil {
		return err
	}
	return t.App.ClearAndSchedule(ctx, key, at, span)
}

// Unschedule implements invocation.Timers.
func (t Timers) Unschedule(ctx context.Context, key string, at time.Time) error {
	if t.P.TimerDeferred(key) && timerstore.CheckTime(at) == nil {
		if err := t.P.Timers.Remove(ctx, key, timerstore.TimeOf(at)); err != nil {
			return fmt.Errorf("unscheduling a deferred timer: %w", err)
		}
	}
	return t.App.Unschedule(ctx, key, at)
}

// ClearScheduled implements invocation.Timers.
func (t Timers) ClearScheduled(ctx context.Context, key string) error {
	if err := t.clearDeferred(ctx, key); err != nil {
		return err
	}
	return t.App.ClearScheduled(ctx, key)
}

// Scheduled implements invocation.Timers: the key's pending and deferred
// times, earliest first, each once.
func (t Timers) Scheduled(ctx context.Context, key string) ([]time.Time, error) {
	out, err := t.App.Scheduled(ctx, key)
	if err != nil || !t.P.TimerDeferred(key) {
		return out, err
	}
	deferred, err := t.P.Timers.Times(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("listing deferred timers: %w", err)
	}
	for _, d := range deferred {
		out = append(out, d.Std())
	}
	slices.SortFunc(out, func(a, b time.Time) int { return a.Compare(b) })
	return slices.CompactFunc(out, func(a, b time.Time) bool { return a.Equal(b) }), nil
}

// clearDeferred drops key's deferred timers and their retry timer.
func (t Timers) clearDeferred(ctx context.Context, key string) error {
	if !t.P.TimerDeferred(key) {
		return nil
	}
	// The store first: a retry timer left behind finds nothing and ends.
	if err := t.P.Timers.Delete(ctx, key); err != nil {
		return fmt.Errorf("clearing deferred timers: %w", err)
	}
	t.P.SetTimerDeferred(key, false)
	if err := t.P.Retries.ClearScheduled(ctx, key, timerstore.DeferredTimer); err != nil {
		return fmt.Errorf("clearing the deferred timers' retry: %w", err)
	}
	return nil
}
