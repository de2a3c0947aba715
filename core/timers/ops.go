package timers

import (
	"context"
	"time"

	"github.com/prosody-events/prosody-go/core/fault"
	"github.com/prosody-events/prosody-go/core/timerstore"
)

// Application exposes a Manager's application timers in the terms a
// handler's context uses: a key and wall-clock times. Times are kept at
// whole-second precision; a sub-second time rounds to the nearest second
// (half up), as the stored format requires.
type Application struct{ M *Manager }

func (a Application) trigger(key string, at time.Time, span map[string]string) timerstore.Trigger {
	return timerstore.Trigger{Key: key, Time: timerstore.TimeOf(at), Type: timerstore.Application, Span: span}
}

// checkTime refuses a time the store cannot hold, which would otherwise be
// clamped to its range: permanent, since a retry cannot help.
func checkTime(at time.Time) error {
	if err := timerstore.CheckTime(at); err != nil {
		return fault.Permanent(err)
	}
	return nil
}

// Schedule adds a timer for key at (rounded to the second), stored with
// span, the trace context its handler will run in.
func (a Application) Schedule(ctx context.Context, key string, at time.Time, span map[string]string) error {
	if err := checkTime(at); err != nil {
		return err
	}
	return a.M.Schedule(ctx, a.trigger(key, at, span))
}

// ClearAndSchedule replaces key's timers with one at at, stored with span.
func (a Application) ClearAndSchedule(ctx context.Context, key string, at time.Time, span map[string]string) error {
	if err := checkTime(at); err != nil {
		return err
	}
	return a.M.ClearAndSchedule(ctx, a.trigger(key, at, span))
}

// Unschedule removes key's timer at at (rounded to the second).
func (a Application) Unschedule(ctx context.Context, key string, at time.Time) error {
	if err := checkTime(at); err != nil {
		return err
	}
	return a.M.Unschedule(ctx, ID{Key: key, Time: timerstore.TimeOf(at), Type: timerstore.Application})
}

// ClearScheduled removes every timer of key.
func (a Application) ClearScheduled(ctx context.Context, key string) error {
	return a.M.ClearScheduled(ctx, key, timerstore.Application)
}

// Scheduled lists key's pending timers, earliest first.
func (a Application) Scheduled(ctx context.Context, key string) ([]time.Time, error) {
	times, err := a.M.Scheduled(ctx, key, timerstore.Application)
	if err != nil {
		return nil, err
	}
	out := make([]time.Time, len(times))
	for i, t := range times {
		out[i] = t.Std()
	}
	return out, nil
}
