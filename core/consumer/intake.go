package consumer

import (
	"time"

	"github.com/IBM/sarama"

	"github.com/prosody-events/prosody-go/core/fetch"
	"github.com/prosody-events/prosody-go/core/middleware"
)

// A partition's intake and the goroutine that drives it.
//
// One goroutine at a time drives a partition's intake: it reads the claim's
// records, admits them, and then starts the runs they made ready itself,
// one after another (runReady). Handing every run to a worker goroutine
// cost more than a quick handler does: a wake-up per burst, and the
// partition's offsets, key queues and run queue moving between CPUs twice
// per event. On two CPUs the engine's own path took 0.9–1.4 µs per message
// that way and 0.6–0.9 µs inline.
//
// A run that is not quick must hold up neither the partition's other keys
// nor its intake:
//
//   - The rescuer (rescue.go) finds a driver that has been inside one run
//     for a few ticks and hands the intake to a new goroutine. The old
//     driver finishes its run, passes the key's next event to the
//     executor, and ends.
//   - Runs found slow twice in a row make the partition offload: a group
//     of runs (timed timedRuns at a time) that took longer than slowRun on
//     average, or a run the rescuer found stuck. slowRun is a few times
//     what handing a run to a worker costs: beyond it the hand-off is
//     cheap next to the run, and handlers that keep a CPU busy that long
//     gain from running on every CPU rather than on their partition's
//     driver alone.
//
// While a partition offloads, admitted runs go to the executor as soon as
// they are ready, so handlers that wait (for I/O, a lock, a slot) run
// concurrently up to max_concurrency, exactly as they would without inline
// runs. Wall-clock time cannot tell a handler that waits from one whose
// goroutine waits for a CPU (or helps the garbage collector), so an
// offload lasts minOffload at first, doubling up to maxOffload while the
// partition keeps coming back slow: a workload of waiting handlers settles
// in the executor, and a busy moment costs a short offload.
const (
	slowRun    = 10 * time.Microsecond
	timedRuns  = 16
	minOffload = 10 * time.Millisecond
	maxOffload = time.Second
)

// intake is what the driver of a partition keeps between bursts: the
// stream of fetched records, sarama's claim (whose end is the revocation
// signal), and what sizes the stream. Only the goroutine driving the
// partition touches it; a hand-over happens under the partition's lock,
// which orders the old driver's last use before the new one's first.
type intake struct {
	stream   *fetch.Stream
	claim    <-chan *sarama.ConsumerMessage
	mark     func(offset int64) // hands the commit offset to sarama
	tick     *time.Ticker       // poll interval: commit marks, stall checks, stream limit
	interval time.Duration

	holdLimit int
	rate      holdRate
	unread    int // fetched records left in the stream when the claim ended

	done chan struct{} // closed by the driver that sees the claim end
}

func newIntake(stream *fetch.Stream, claim <-chan *sarama.ConsumerMessage, interval time.Duration, holdLimit int,
	mark func(int64)) *intake {
	return &intake{
		stream: stream, claim: claim, mark: mark,
		tick: time.NewTicker(interval), interval: interval, holdLimit: holdLimit,
		done: make(chan struct{}),
	}
}

// admitQueued admits the oldest records of the stream, as many as the
// tracker takes, and reports whether it admitted any.
func (in *intake) admitQueued(p *partition) bool {
	rs := in.stream.Peek(maxBurst)
	if len(rs) == 0 {
		return false
	}
	n := p.admit(rs)
	in.stream.Take(n)
	in.rate.admitted += n
	return n > 0
}

// end is the last thing a driver does when the claim ends: nothing more is
// fetched for it, and what was fetched but not admitted is the next
// owner's to read again.
func (in *intake) end() {
	in.unread = in.stream.Queued()
	in.stream.Close()
	close(in.done)
}

// awaitEnd is the driver's last wait once the partition stops starting
// work (partition.stopStarting): for the claim to end, ignoring sarama's
// records as drive does.
func (in *intake) awaitEnd() {
	for range in.claim {
	}
	in.end()
}

// startIntake makes in the partition's intake and starts its first driver.
// in.done closes when the claim has ended.
func (p *partition) startIntake(in *intake) {
	p.in = in
	p.c.rescue.add(p)
	go p.drive(0)
}

// drive is the intake loop, run by the goroutine of driver generation gen
// until the claim ends or the intake is handed to another goroutine.
//
// The stream is the partition's backlog: what the tracker has no room for
// stays queued there, and the fetcher stops fetching the partition while
// the stream holds its limit (see holdRate.limit), which bounds memory to
// that plus one fetch response. A fetched record is never dropped while
// the partition is owned.
//
// sarama's own partition consumer of the claim is paused from the start
// (ConsumeClaim), but may have fetched before that: its records are read
// and ignored, since the stream fetches the same offsets. Its channel
// closing is the revocation signal.
func (p *partition) drive(gen uint64) {
	in := p.in
	// The driver's way through the middleware stack, reused by every event
	// it runs inline.
	way := new(middleware.Run)
	sizeDue := false // a tick came; the stream's limit is sized at the next wait
	for {
		if !p.runReady(gen, way) {
			return
		}
		if p.stopped.Load() {
			in.awaitEnd()
			return
		}
		// Between bursts, the claim's end (a revocation in a cooperative
		// rebalance) and the tick are looked for even while records keep
		// coming: the select below is reached only once the stream runs
		// dry or the window is full, which a backlog of quick handlers
		// may never do, and the commit offset would stay unmarked for as
		// long as the backlog lasts. The stream's limit is sized only when
		// the driver is about to wait: a stream that keeps the driver busy
		// has room enough.
		select {
		case _, ok := <-in.claim:
			if !ok {
				in.end()
				return
			}
		case <-in.tick.C:
			p.markProgress(in)
			sizeDue = true
		default:
		}
		if in.admitQueued(p) {
			continue
		}
		if sizeDue {
			sizeDue = false
			in.stream.SetLimit(in.rate.limit(time.Now(), in.holdLimit, in.interval))
		}
		select {
		case <-in.stream.Ready():
		case <-p.room:
		case _, ok := <-in.claim:
			if !ok {
				in.end()
				return
			}
		case <-in.tick.C:
			p.markProgress(in)
			sizeDue = true
		}
	}
}

// markProgress is the driver's periodic report: the commit offset handed
// to sarama, and the stall check.
func (p *partition) markProgress(in *intake) {
	if o, ok := p.commitOffset(); ok {
		in.mark(o)
	}
	p.stalled(time.Now())
}

// runReady starts the ready runs on the calling goroutine, whose run is
// way, one after another, each going on with its key's next event, until
// none is left. It returns false once the goroutine no longer drives the
// intake: the rescuer handed it on while a run was under way.
func (p *partition) runReady(gen uint64, way *middleware.Run) bool {
	p.mu.Lock()
	if p.driver != gen {
		p.mu.Unlock()
		return false
	}
	t, ok := p.ready.Pop()
	p.mu.Unlock()
	if !ok {
		return true
	}

	it := t.it
	lease := permitLease{scheduler: p.c.opts.Scheduler}
	defer lease.end()
	// Runs are timed a group of up to timedRuns at a time: reading the
	// clock around each one cost more than a quick run itself.
	since, timed := monotonic(), 0
	for {
		// The number goes on across calls (and drivers), so that two
		// scans of the rescuer never mistake two runs for one.
		p.runSeq++
		run := inlineRun(gen, p.runSeq)
		p.inline.Store(run | 1)
		// After announcing the run: either the rescuer sees it before it
		// sleeps, or this sees the rescuer asleep and wakes it.
		p.c.rescue.watch()
		finished, async := p.runOne(it, p.inlineEnv, &lease, way)
		// Only if nothing else was announced since: after a hand-over the
		// word belongs to the new driver.
		p.inline.CompareAndSwap(run|1, run)
		timed++

		p.mu.Lock()
		var next item
		more := false
		if !async {
			next, more = p.advanceLocked(it, finished)
		}
		driving := p.driver == gen
		if driving && !more {
			var t task
			t, more = p.ready.Pop()
			next = t.it
		}
		// A group is judged when full, and when the runs end before it is,
		// unless it is too short for one preempted run not to dominate it.
		if driving && (timed == timedRuns || !more && timed >= timedRuns/4) {
			now := monotonic()
			if p.slowLocked(now-since > int64(timed)*int64(p.c.slowRun)) {
				p.offloadLocked(now)
			}
			since, timed = now, 0
		}
		if more && (!driving || p.offloadingLocked(since)) {
			// Handed on while the run was under way, or offloading: the
			// next run goes to the executor rather than keeping slow runs
			// on a driver.
			p.c.exec.submit(task{p: p, it: next})
			more = false
		}
		signal := p.roomLocked()
		p.mu.Unlock()
		if signal {
			p.signalRoom()
		}
		if !more {
			return driving
		}
		it = next
	}
}

// inlineRun is how a driver announces its seq-th run in partition.inline:
// its generation in the high half, the run's number above the low bit,
// which is set while the run is under way. The number only has to change
// between two scans of the rescuer, so it may wrap.
func inlineRun(gen, seq uint64) uint64 { return gen<<32 | (seq<<1)&(1<<32-1) }

// offloadLocked sends the partition's runs to the executor for a while
// (see minOffload), starting with those ready now. The caller holds p.mu.
func (p *partition) offloadLocked(now int64) {
	if now < p.offloadTill {
		return
	}
	p.c.stats.offloads.Add(1)
	if now < p.offloadTill+4*p.offloadSpan {
		// Slow again soon after the last offload ended (finding out takes
		// a few groups of runs, which can take longer than the offload).
		p.offloadSpan = min(2*p.offloadSpan, int64(maxOffload))
	} else {
		p.offloadSpan = int64(minOffload)
	}
	p.offloadTill = now + p.offloadSpan
	// Coming back from the offload, one slow group is enough to offload
	// again.
	p.lastSlow = true
	if ts := p.ready.TakeAll(); ts != nil {
		p.c.exec.submit(ts...)
	}
}

// slowLocked records whether the last group of timed runs (or a run the
// rescuer found stuck) was slow, and reports whether the evidence before
// it said so too: the partition should offload. The caller holds p.mu.
func (p *partition) slowLocked(slow bool) bool {
	both := slow && p.lastSlow
	p.lastSlow = slow && !both
	return both
}

// offloading reports whether admitted runs go to the executor now. The
// caller holds p.mu.
func (p *partition) offloadingLocked(now int64) bool { return now < p.offloadTill }

// monoBase anchors monotonic.
var monoBase = time.Now()

// monotonic is a cheap monotonic clock in nanoseconds.
func monotonic() int64 { return monotonicAt(time.Now()) }

// monotonicAt is monotonic for a time already read.
func monotonicAt(t time.Time) int64 { return int64(t.Sub(monoBase)) }
