package middleware

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"

	"github.com/prosody-events/prosody-go/core/deferral"
	"github.com/prosody-events/prosody-go/core/fault"
	"github.com/prosody-events/prosody-go/core/timerstore"
)

// DeferPolicy is what the two defer layers share: whether a first
// failure may be deferred (defer_enabled and the failure-rate gate) and
// how far apart a deferred key's retries are.
type DeferPolicy struct {
	Enabled bool
	Gate    *deferral.Gate
	Backoff deferral.Backoff
	Logger  *slog.Logger
}

// allows reports whether a key's first transient failure may be deferred.
// Once deferred, a key's later failures always are.
func (p *DeferPolicy) allows() bool {
	if !p.Enabled {
		return false
	}
	return p.Gate == nil || p.Gate.Allows()
}

func (p *DeferPolicy) logger() *slog.Logger {
	if p.Logger == nil {
		return slog.Default()
	}
	return p.Logger
}

// deferralOf is the deferral state of r's partition, nil when the
// engine gave it none (outside pipeline mode, or in a test).
func deferralOf(r *Run) *deferral.Partition {
	env := r.ctx.Env()
	if env == nil {
		return nil
	}
	p, _ := env.Deferral.(*deferral.Partition)
	return p
}

// io runs f, a layer's store or Kafka I/O, and returns the step it
// stands for. In a run of Invoke the walk's goroutine is the engine's and
// may wait: f runs on it, after telling the engine it is about to block
// (the blocking hint, which hands a partition's intake to another
// goroutine) unless local says f does not wait on the network (stores in
// memory). In a run of Start the walk may be on a host's thread, which
// must not wait: f runs on a goroutine of its own and finishes the
// layer's step with Resume. A panic in f there is the step's terminal
// failure, as one on the run's goroutine is.
func (r *Run) io(local bool, f func(ctx context.Context) Step) Step {
	if r.blocking() {
		if !local {
			defer r.ctx.Blocking()()
		}
		return f(r.ctx)
	}
	go func() {
		st := func() (st Step) {
			defer func() {
				if p := recover(); p != nil {
					// As a panic of the layer's own step is (Run.advanceRecovering).
					st = Result(fault.Terminal(&LayerPanic{Value: p, Stack: debug.Stack()}))
				}
			}()
			return f(r.ctx)
		}()
		r.Resume(st)
	}()
	return Wait
}

// retryCounter is what both defer stores offer to count a key's retries.
type retryCounter interface {
	SetRetries(ctx context.Context, key string, retries uint32) error
}

// moveOn ends a deferred key's retry whose head left its queue for good
// (more: entries remain): the next one is retried at once, or the key's
// deferral ends, marked by set. The outcome is result.
func (p *DeferPolicy) moveOn(ctx context.Context, part *deferral.Partition, retry *deferral.Retry, more bool, set func(string, bool), result error) Step {
	var err error
	if more {
		err = part.ScheduleRetry(ctx, retry.Key, retry.Type, p.Backoff.Delay(0), retry.TraceContext)
	} else {
		set(retry.Key, false)
		err = part.Retries.ClearScheduled(ctx, retry.Key, retry.Type)
	}
	if err != nil {
		return Result(fmt.Errorf("moving on from a deferred retry of key %q: %w", retry.Key, err))
	}
	return Result(result)
}

// again counts the retries-th failure of a deferred key's retry in q and
// reschedules the retry with the backoff; cause, when set, is logged.
func (p *DeferPolicy) again(ctx context.Context, part *deferral.Partition, q retryCounter, retry *deferral.Retry, retries uint32, cause error) Step {
	if err := q.SetRetries(ctx, retry.Key, retries); err != nil {
		return Result(fmt.Errorf("counting a retry of key %q: %w", retry.Key, err))
	}
	delay := p.Backoff.Delay(retries)
	if err := part.ScheduleRetry(ctx, retry.Key, retry.Type, delay, retry.TraceContext); err != nil {
		return Result(fmt.Errorf("rescheduling the retry of key %q: %w", retry.Key, err))
	}
	if cause != nil {
		p.logger().Info("deferred retry failed again; retrying later", slog.String("key", retry.Key),
			slog.Int("type", int(retry.Type)), slog.Int("retries", int(retries)), slog.Duration("delay", delay), slog.Any("error", cause))
	}
	return Result(nil)
}

// endOrphan ends the deferral of key, whose retry timer found its queue
// empty (the timer was written and the queue was not, or it fired again
// after the queue emptied): q's entry goes, then the mark set keeps.
func endOrphan(ctx context.Context, key string, q interface {
	Delete(ctx context.Context, key string) error
}, set func(string, bool)) Step {
	if err := q.Delete(ctx, key); err != nil {
		return Result(fmt.Errorf("deleting the empty deferral of key %q: %w", key, err))
	}
	set(key, false)
	return Result(nil)
}

// deferFirst defers key, which was not deferred, with retry timers of typ:
// the retry timer first, so that a crash between the two writes leaves a
// timer that finds nothing rather than a queue that nothing retries. The
// key counts as deferred (set) from the moment its retry timer exists: a
// queue write (write) that fails may still have landed, and the event,
// run again by the outer retry, must then join the queue (appending what
// it holds is harmless) rather than run ahead of its stored copy.
func (p *DeferPolicy) deferFirst(ctx context.Context, part *deferral.Partition, key string, typ timerstore.Type,
	span map[string]string, set func(string, bool), write func() error) error {
	if err := part.ScheduleRetry(ctx, key, typ, p.Backoff.Delay(0), span); err != nil {
		return fmt.Errorf("scheduling its retry: %w", err)
	}
	set(key, true)
	return write()
}

// deferQueue is a key's stored queue of deferred events of type T (a
// deferstore segment's, for messages or for timers).
type deferQueue[T any] interface {
	Next(ctx context.Context, key string) (T, uint32, bool, error)
	Append(ctx context.Context, key string, v T) error
	DeferFirst(ctx context.Context, key string, v T) error
}

// startQueue is the queue write of a first deferral of v: it makes v the
// key's only entry, unless the store already holds a queue for the key,
// which v then joins. The key was not known as deferred because the
// partition's assignment lists deferred keys by their retry timers up to
// a horizon (defer_max_delay ahead): a retry set further out, under a
// longer defer_max_delay before or by a clock running ahead, is out of
// sight. Replacing that queue would lose its events, whose offsets were
// committed long ago.
func startQueue[T any](ctx context.Context, p *DeferPolicy, q deferQueue[T], key, what string, v T) error {
	_, _, queued, err := q.Next(ctx, key)
	switch {
	case err != nil:
		return fmt.Errorf("reading the key's deferred %s: %w", what, err)
	case queued:
		p.logger().Warn("the key already had deferred "+what+" this consumer did not know of (their retry was set further out than defer_max_delay); joining them",
			slog.String("key", key))
		return q.Append(ctx, key, v)
	}
	return q.DeferFirst(ctx, key, v)
}
