package consumer

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prosody-events/prosody-go/core/watchdog"
)

const (
	// rescueTick is how often the rescuer looks for drivers stuck in a run.
	rescueTick = time.Millisecond
	// stuckScans is how many scans in a row must find a driver in the same
	// run before its intake moves: a quick run can be caught at two scans
	// when its goroutine waited for a CPU or helped the garbage collector.
	stuckScans = 2
)

// rescuer watches the drivers of a consumer's partitions (intake.go). A
// driver that announces the same run at stuckScans+1 ticks in a row has
// been in it for at least stuckScans ticks (runs are numbered across
// calls, so a repeated announcement is one run): its intake moves to a new goroutine,
// so the partition keeps reading records and starting other keys while
// that run goes on. The rescuer sleeps while no driver is in a run.
type rescuer struct {
	mu    sync.Mutex
	parts []*partition // every partition with an intake
	// off stops rescues: a seam for tests whose point is what one driver
	// does, which a rescue on a loaded machine would blur.
	off atomic.Bool
	// scans counts the scans, for tests that wait for some to pass.
	scans atomic.Int64

	ticker *watchdog.Ticker // sleeps while no driver is in a run
	stop   chan struct{}
	done   chan struct{}
}

func newRescuer() *rescuer {
	r := &rescuer{ticker: watchdog.NewTicker(rescueTick), stop: make(chan struct{}), done: make(chan struct{})}
	go r.run()
	return r
}

func (r *rescuer) add(p *partition) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.parts = append(r.parts, p)
}

func (r *rescuer) remove(p *partition) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, q := range r.parts {
		if q == p {
			last := len(r.parts) - 1
			r.parts[i] = r.parts[last]
			r.parts[last] = nil
			r.parts = r.parts[:last]
			return
		}
	}
}

// watch wakes the rescuer if it sleeps. A driver calls it after announcing
// a run.
func (r *rescuer) watch() { r.ticker.Wake() }

// close stops the rescuer. Call it once no intake runs.
func (r *rescuer) close() {
	close(r.stop)
	<-r.done
}

func (r *rescuer) run() {
	defer close(r.done)
	var parts []*partition
	// The rescan before sleeping cannot count a stuck run twice: it follows
	// a scan that found no driver in a run.
	r.ticker.Run(r.stop, func(bool) bool { return r.scan(&parts) })
}

// scan rescues the drivers stuck in one run and reports whether any
// driver is in a run.
func (r *rescuer) scan(parts *[]*partition) (busy bool) {
	r.scans.Add(1)
	r.mu.Lock()
	*parts = append((*parts)[:0], r.parts...)
	r.mu.Unlock()
	for _, p := range *parts {
		v := p.inline.Load()
		if v&1 == 0 || v != p.seen || r.off.Load() {
			p.stuck = 0
		} else if p.stuck++; p.stuck >= stuckScans {
			// Counted again from here, whether or not the rescue happens
			// (it does not when the run ended meanwhile, or was rescued
			// before and goes on in the goroutine the intake left).
			p.stuck = 0
			p.rescue(v)
		}
		busy = busy || v&1 != 0
		p.seen = v
	}
	clear(*parts)
	return busy
}

// rescue hands the intake of a partition whose driver is still in the run
// announced as v to a new goroutine; the partition offloads if its runs
// were slow before too. A draining partition is rescued as well: only the
// goroutine driving the intake sees the claim end, and the drain, whose
// budget cancels the runs still under way, starts only then. The new
// driver starts nothing; it waits for the claim's end (awaitEnd).
func (p *partition) rescue(v uint64) {
	p.mu.Lock()
	// Only the current driver's run: a run that was rescued before goes on
	// in the goroutine the intake left, announced under an older
	// generation.
	if p.inline.Load() != v || v>>32 != p.driver&(1<<32-1) {
		p.mu.Unlock()
		return
	}
	p.driver++
	gen := p.driver
	p.c.stats.handovers.Add(1)
	if p.slowLocked(true) {
		p.offloadLocked(monotonic())
	}
	p.mu.Unlock()
	p.log.Debug("a handler is taking its time; the partition's intake moves to a new goroutine", slog.Uint64("driver", gen))
	go p.drive(gen)
}
