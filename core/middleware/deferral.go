package middleware

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/prosody-events/prosody-go/core/deferral"
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

// async finishes the waiting step of the running layer with what f
// returns, on a goroutine of its own: for a layer's store and Kafka I/O,
// which must not hold the walk's goroutine (a host's thread, in a run of
// Start). A run of Invoke waits for it, and tells the engine so (the
// blocking hint), so that a partition's driver does not hold its other
// keys meanwhile. A panic in f is the step's failure. Only the rare paths
// of deferral use it.
func (r *Run) async(f func(ctx context.Context) Step) Step {
	var resume func()
	if r.blocking {
		resume = r.ctx.Blocking()
	}
	go func() {
		st := func() (st Step) {
			defer func() {
				if p := recover(); p != nil {
					st = Result(fmt.Errorf("middleware panicked: %v", p))
				}
			}()
			return f(r.ctx)
		}()
		if resume != nil {
			resume()
		}
		r.Resume(st)
	}()
	return Wait
}
