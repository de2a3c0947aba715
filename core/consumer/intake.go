package consumer

import (
	"time"

	"github.com/IBM/sarama"
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
// claim's records, the records held back while the partition is full, and
// the pause state. Only the goroutine driving the partition touches it; a
// hand-over happens under the partition's lock, which orders the old
// driver's last use before the new one's first.
type intake struct {
	records  <-chan *sarama.ConsumerMessage
	mark     func(offset int64) // hands the commit offset to sarama
	pause    func()
	resume   func()
	tick     *time.Ticker // poll interval: commit marks, stall checks, hold marks
	interval time.Duration

	holdLimit int
	held      backlog
	burst     []*sarama.ConsumerMessage
	paused    bool
	rate      holdRate
	high, low int

	done chan struct{} // closed by the driver that sees the claim end
}

func newIntake(records <-chan *sarama.ConsumerMessage, interval time.Duration, holdLimit int,
	mark func(int64), pause, resume func()) *intake {
	return &intake{
		records: records, mark: mark, pause: pause, resume: resume,
		tick: time.NewTicker(interval), interval: interval,
		holdLimit: holdLimit, high: holdLimit, low: holdLimit / 2,
		done: make(chan struct{}),
	}
}

// hold keeps records the partition cannot admit yet, pausing it when too
// many are held.
func (in *intake) hold(rs []*sarama.ConsumerMessage) {
	in.held.push(rs)
	if !in.paused && in.held.len() >= in.high {
		in.pause()
		in.paused = true
	}
}

// admitHeld admits as many held records as the tracker has room for,
// resuming the partition once few are left.
func (in *intake) admitHeld(p *partition) {
	if in.held.len() == 0 {
		return
	}
	n := p.admit(in.held.records())
	in.rate.admitted += n
	in.held.drop(n)
	if in.paused && in.held.len() <= in.low {
		in.resume()
		in.paused = false
	}
}

// end is the last thing a driver does when the claim's channel closes.
func (in *intake) end() {
	if in.paused {
		// sarama remembers a pause across a reassignment: a later claim
		// of the partition would start paused and never resume.
		in.resume()
		in.paused = false
	}
	close(in.done)
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
// It keeps reading the claim even when the partition is at max_uncommitted,
// holding the records it cannot admit yet, because the claim's channel
// closing is the only revocation signal. A fetched record is therefore
// never dropped while the partition is owned.
//
// Holding is not pausing: records already fetched are in memory anyway, and
// pausing at the first full tracker would stop fetching each time a burst
// arrives and leave the partition idle for a fetch round trip once it
// drains. The partition is paused only when the held backlog reaches its
// high-water mark, which bounds memory to that plus one fetch response, and
// resumed when it is down to the low-water mark (see holdRate.marks).
func (p *partition) drive(gen uint64) {
	in := p.in
	for {
		if !p.runReady(gen) {
			return
		}
		if in.held.len() > 0 {
			// Held records go first. Reading more while the tracker has
			// room for held ones would only move records from sarama's
			// buffer into the backlog (a select picks among ready cases at
			// random) until the partition paused for nothing.
			select {
			case <-p.room:
				in.admitHeld(p)
				continue
			default:
			}
		}
		select {
		case r, ok := <-in.records:
			if !ok {
				in.end()
				return
			}
			// Take what sarama has already buffered too, and admit it as
			// one burst.
			in.burst = append(in.burst[:0], r)
			closed := false
		gather:
			for len(in.burst) < maxBurst {
				select {
				case r, ok := <-in.records:
					if !ok {
						closed = true
						break gather
					}
					in.burst = append(in.burst, r)
				default:
					break gather
				}
			}
			if in.held.len() > 0 {
				in.hold(in.burst)
			} else if n := p.admit(in.burst); n < len(in.burst) {
				in.rate.admitted += n
				in.hold(in.burst[n:])
			} else {
				in.rate.admitted += n
			}
			clear(in.burst)
			if closed {
				// What this burst made ready is left to the drain, which
				// hands it to the next owner.
				in.end()
				return
			}
		case <-p.room:
			in.admitHeld(p)
		case now := <-in.tick.C:
			in.high, in.low = in.rate.marks(now, in.holdLimit, in.interval)
			if o, ok := p.commitOffset(); ok {
				in.mark(o)
			}
			p.stalled(time.Now())
		}
	}
}

// runReady starts the ready runs on the calling goroutine, one after
// another, each going on with its key's next event, until none is left.
// It returns false once the goroutine no longer drives the intake: the
// rescuer handed it on while a run was under way.
func (p *partition) runReady(gen uint64) bool {
	p.mu.Lock()
	if p.driver != gen {
		p.mu.Unlock()
		return false
	}
	t, ok := p.ready.pop()
	p.mu.Unlock()
	if !ok {
		return true
	}

	it := t.it
	lease := permitLease{limiter: p.c.opts.Limiter}
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
		finished, async := p.runOne(it, p.inlineEnv, &lease)
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
			t, more = p.ready.pop()
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
	if ts := p.ready.takeAll(); ts != nil {
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
