// Package timers runs the durable per-key timers of one partition: it
// keeps each timer's state (scheduled, firing, firing and rescheduled),
// loads due timers from the store slab by slab, fires them when due, and
// applies the operations a handler's context exposes (schedule,
// clear-and-schedule, unschedule, clear, list).
//
// A fired timer does not run by itself: the Manager hands it to the
// partition, which puts it in the same per-key queue as messages, so a key's
// timer never runs at the same time as that key's messages. When its turn
// comes the partition calls Begin, which says whether it is still wanted
// (a timer unscheduled while it waited is skipped), and later Commit or
// Abort.
//
// Ownership follows the partition: a Manager exists while its partition is
// assigned, and the next owner's Manager loads every slab again, so overdue
// timers fire there. A timer fires at least once.
package timers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/prosody-events/prosody-go/core/fault"
	"github.com/prosody-events/prosody-go/core/timerstore"
)

// ErrStopped is returned by operations on a Manager whose partition has gone.
var ErrStopped = fault.Terminal(errors.New("prosody: the partition's timers are shut down"))

// ID identifies a timer.
type ID struct {
	Key  string
	Time timerstore.Time
	Type timerstore.Type
}

type status uint8

const (
	scheduled         status = iota // waiting in the delay queue (or in a slab not loaded yet)
	firing                          // handed to the partition and running
	firingRescheduled               // running, and scheduled again for the same time
)

type entry struct {
	status status
	queued bool // in the delay queue
	span   map[string]string
}

// Options configure a Manager.
type Options struct {
	Segment timerstore.Segment
	// Fire hands a due timer to the partition. It must not block.
	Fire func(timerstore.Trigger)
	// MaxInFlight bounds timers handed to the partition and not yet
	// committed or aborted; the delay queue waits while it is reached.
	MaxInFlight int
	// RetryDelay is the pause before a failed store operation is retried
	// in the background (loads, deletes after commit). Default 1 s.
	RetryDelay time.Duration
	Logger     *slog.Logger
	// Changed, if set, is told of each timer written to the store
	// (scheduled) and each removed from it, once the store has it. It is
	// called on the operation's goroutine and must not block.
	Changed func(t timerstore.Trigger, scheduled bool)
	// Now is the clock; tests may replace it.
	Now func() time.Time
}

// Manager is the timer state of one partition. It is safe for concurrent use.
type Manager struct {
	opts Options
	seg  timerstore.Segment
	log  *slog.Logger

	// loadMu keeps slab loads apart from operations: a load reads a slab
	// and then adds what it read, and an Unschedule landing in between would
	// otherwise be undone. Operations share it; a load (rare) takes it alone.
	loadMu sync.RWMutex

	mu      sync.Mutex
	entries map[ID]*entry
	queue   delayQueue
	perSlab map[uint32]int // in-memory timers per loaded slab
	// held counts, per slab, timers dropped from memory (aborted or
	// forgotten) but kept in the store for the next owner: their slab must
	// stay listed, or nobody would find them again.
	held     map[uint32]int
	loaded   map[uint32]bool
	maxOwned uint32 // highest slab whose timers are all in memory
	owned    bool   // maxOwned is meaningful (a first load finished)
	inFlight int
	stopped  bool

	wake chan struct{}
	stop chan struct{}
	done chan struct{}
}

// Start creates the Manager and its goroutine, which loads slabs and fires
// due timers until Stop.
func Start(opts Options) *Manager {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.RetryDelay <= 0 {
		opts.RetryDelay = time.Second
	}
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = 64
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	m := &Manager{
		opts:    opts,
		seg:     opts.Segment,
		log:     opts.Logger,
		entries: make(map[ID]*entry),
		perSlab: make(map[uint32]int),
		held:    make(map[uint32]int),
		loaded:  make(map[uint32]bool),
		wake:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	go m.run()
	return m
}

// Stop ends the Manager: nothing more fires, background retries end, and
// operations fail with ErrStopped. Timers stay in the store for the next
// owner. Stop waits for the goroutine to exit.
func (m *Manager) Stop() {
	m.mu.Lock()
	if !m.stopped {
		m.stopped = true
		close(m.stop)
	}
	m.mu.Unlock()
	<-m.done
}

func (m *Manager) slabOf(t timerstore.Time) uint32 { return timerstore.SlabOf(t, m.seg.SlabSize()) }

func (m *Manager) poke() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// ownsLocked reports whether t's slab has been loaded, i.e. whether the
// in-memory state is authoritative for it: up to maxOwned once a load
// finished, and any slab a load that failed later on read whole.
func (m *Manager) ownsLocked(t timerstore.Time) bool {
	s := m.slabOf(t)
	return m.owned && s <= m.maxOwned || m.loaded[s]
}

// addLocked records a scheduled timer that this Manager owns and queues it.
func (m *Manager) addLocked(id ID, span map[string]string) {
	e := m.entries[id]
	if e == nil {
		e = &entry{}
		m.entries[id] = e
		m.perSlab[m.slabOf(id.Time)]++
	}
	e.status, e.span = scheduled, span
	if !e.queued {
		e.queued = true
		if m.queue.push(id) {
			m.poke()
		}
		m.compactLocked()
	}
}

// minCompact is the queue length below which stale copies are left to be
// skipped as they come due.
const minCompact = 1024

// compactLocked drops the queue's stale copies (of timers removed, or
// queued again) once they are at least half of it, so that a key whose
// timer is replaced on every message keeps one entry, not one per call.
func (m *Manager) compactLocked() {
	if n := m.queue.len(); n < minCompact || n < 2*len(m.entries) {
		return
	}
	seen := make(map[ID]bool, len(m.entries))
	m.queue.compact(func(id ID) bool {
		e := m.entries[id]
		if e == nil || !e.queued || seen[id] {
			return false
		}
		seen[id] = true
		return true
	})
}

func (m *Manager) removeLocked(id ID) {
	if _, ok := m.entries[id]; !ok {
		return
	}
	delete(m.entries, id)
	s := m.slabOf(id.Time)
	if m.perSlab[s]--; m.perSlab[s] <= 0 {
		delete(m.perSlab, s)
	}
}

// Begin is called when a fired timer's turn comes in the key queue. It
// returns false when the timer is no longer scheduled (it was unscheduled
// while it waited): the partition skips it silently.
func (m *Manager) Begin(id ID) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.entries[id]
	if m.stopped || e == nil || e.status != scheduled {
		m.releaseLocked()
		return false
	}
	e.status = firing
	return true
}

// Commit records that a fired timer is finished for good (success, a
// permanent failure, or retries spent): it is deleted, unless the handler
// scheduled it again for the same time, in which case it fires again.
//
// The delete happens before Commit returns, retried every RetryDelay until
// it succeeds or the Manager stops: the partition calls Commit while it
// still holds the key, so no other operation on the key's timers can
// interleave with it (the store does not serialise a key's writes).
func (m *Manager) Commit(id ID) {
	m.mu.Lock()
	m.releaseLocked()
	e := m.entries[id]
	if e == nil {
		m.mu.Unlock()
		return
	}
	if e.status == firingRescheduled {
		m.requeueLocked(id, e)
		m.mu.Unlock()
		return
	}
	m.removeLocked(id)
	stopped := m.stopped
	m.mu.Unlock()
	if !stopped {
		m.retry("deleting a fired timer", id, func(ctx context.Context) error {
			return m.seg.Remove(ctx, id.Key, id.Time, id.Type)
		})
	}
}

// Abort records that a fired timer was not finished (the partition is going
// away, or a terminal failure): it is forgotten in memory but stays in the
// store, so the partition's next owner fires it.
func (m *Manager) Abort(id ID) { m.drop(id, true) }

// Forget is Abort without the error Abort logs, for a timer the caller
// says why it leaves: one the partition has no handler for (a type this
// version does not handle), or one not run because the partition is
// going away. It stays in the store.
func (m *Manager) Forget(id ID) { m.drop(id, false) }

func (m *Manager) drop(id ID, logAbort bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.releaseLocked()
	e := m.entries[id]
	if e == nil {
		return
	}
	if e.status == firingRescheduled {
		m.requeueLocked(id, e)
		return
	}
	if logAbort && !m.stopped {
		m.log.Error("timer aborted while its partition is live; it fires again after the next rebalance",
			slog.String("key", id.Key), slog.Time("time", id.Time.Std()))
	}
	m.removeLocked(id)
	m.held[m.slabOf(id.Time)]++
}

// requeueLocked puts a timer that was scheduled again while it ran back in
// the delay queue; its time has passed, so it fires again at once.
func (m *Manager) requeueLocked(id ID, e *entry) {
	e.status = scheduled
	if !e.queued {
		e.queued = true
		m.queue.push(id)
		m.poke()
	}
}

// releaseLocked frees one in-flight slot, waking the delay queue if it was
// waiting for one.
func (m *Manager) releaseLocked() {
	if m.inFlight > 0 {
		m.inFlight--
		if m.inFlight == m.opts.MaxInFlight-1 {
			m.poke()
		}
	}
}

// untilStop is a context cancelled when the Manager stops (or cancel is
// called).
func (m *Manager) untilStop() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-m.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// retry runs op until it succeeds or the Manager stops, pausing RetryDelay
// between attempts and logging each failure.
func (m *Manager) retry(what string, id ID, op func(context.Context) error) {
	ctx, cancel := m.untilStop()
	defer cancel()
	for {
		err := op(ctx)
		if err == nil || ctx.Err() != nil {
			return
		}
		m.log.Warn("timer store operation failed; retrying", slog.String("operation", what),
			slog.String("key", id.Key), slog.Any("error", err))
		select {
		case <-ctx.Done():
			return
		case <-time.After(m.opts.RetryDelay):
		}
	}
}

// runningLocked handles an operation on the timer that is running right
// now, which needs no store write: if its state is from it becomes to. It
// reports whether the timer is running, and fails once the Manager stopped.
func (m *Manager) runningLocked(id ID, from, to status) (bool, error) {
	if m.stopped {
		return false, ErrStopped
	}
	e := m.entries[id]
	if e == nil || e.status == scheduled {
		return false, nil
	}
	if e.status == from {
		e.status = to
	}
	return true, nil
}

// Schedule adds a timer. Scheduling an existing timer again is harmless;
// scheduling the timer that is running right now makes it fire once more.
func (m *Manager) Schedule(ctx context.Context, t timerstore.Trigger) error {
	m.loadMu.RLock()
	defer m.loadMu.RUnlock()
	id := ID{t.Key, t.Time, t.Type}
	// The running timer is marked to fire again first: a Commit of its
	// run landing before the store write below then keeps its row rather
	// than deleting it.
	m.mu.Lock()
	running, err := m.runningLocked(id, firing, firingRescheduled)
	m.mu.Unlock()
	if err != nil {
		return err
	}
	// Written even for the timer running now: its row may be gone (its
	// handler replaced the key's timers with another first), and it must
	// be in the store to fire again after a revocation.
	if err := m.seg.Add(ctx, t); err != nil {
		return fmt.Errorf("scheduling timer: %w", err)
	}
	if !running {
		m.mu.Lock()
		if !m.stopped && m.ownsLocked(t.Time) {
			m.addLocked(id, t.Span)
		}
		m.mu.Unlock()
	}
	m.changed(t, true)
	return nil
}

func (m *Manager) changed(t timerstore.Trigger, scheduled bool) {
	if m.opts.Changed != nil {
		m.opts.Changed(t, scheduled)
	}
}

// Unschedule removes a timer. Unscheduling the timer that is running now
// has no effect on that run.
func (m *Manager) Unschedule(ctx context.Context, id ID) error {
	m.loadMu.RLock()
	defer m.loadMu.RUnlock()
	m.mu.Lock()
	running, err := m.runningLocked(id, firingRescheduled, firing)
	if !running && err == nil {
		m.removeLocked(id) // the queued copy is skipped when it comes due
	}
	m.mu.Unlock()
	if running || err != nil {
		return err
	}
	if err := m.seg.Remove(ctx, id.Key, id.Time, id.Type); err != nil {
		return fmt.Errorf("unscheduling timer: %w", err)
	}
	m.changed(timerstore.Trigger{Key: id.Key, Time: id.Time, Type: id.Type}, false)
	return nil
}

// ClearAndSchedule replaces every timer of (key, type) with t.
func (m *Manager) ClearAndSchedule(ctx context.Context, t timerstore.Trigger) error {
	m.loadMu.RLock()
	defer m.loadMu.RUnlock()
	m.mu.Lock()
	if m.stopped {
		m.mu.Unlock()
		return ErrStopped
	}
	m.mu.Unlock()
	// The store writes t before deleting the old timers, so a crash in
	// between leaves a duplicate rather than nothing.
	old, err := m.seg.ClearAndSchedule(ctx, t)
	if err != nil {
		return fmt.Errorf("replacing timers: %w", err)
	}
	// The store has the change whatever follows here.
	for _, at := range old {
		if at != t.Time {
			m.changed(timerstore.Trigger{Key: t.Key, Time: at, Type: t.Type}, false)
		}
	}
	m.changed(t, true)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped {
		return ErrStopped
	}
	for _, at := range old {
		if at == t.Time {
			continue
		}
		id := ID{t.Key, at, t.Type}
		if e := m.entries[id]; e != nil {
			if e.status == firingRescheduled {
				e.status = firing
			} else if e.status == scheduled {
				m.removeLocked(id)
			}
		}
	}
	id := ID{t.Key, t.Time, t.Type}
	if e := m.entries[id]; e != nil && (e.status == firing || e.status == firingRescheduled) {
		// The running timer, asked for again (once more, or after a
		// Schedule of it): it fires again once this run commits. Queued
		// as a new timer instead, it would be deleted by that commit.
		e.status = firingRescheduled
	} else if m.ownsLocked(t.Time) {
		m.addLocked(id, t.Span)
	}
	return nil
}

// Scheduled lists the times of (key, type) that will fire: stored timers,
// less the one running right now unless it was scheduled again.
func (m *Manager) Scheduled(ctx context.Context, key string, typ timerstore.Type) ([]timerstore.Time, error) {
	times, err := m.seg.KeyTimes(ctx, key, typ)
	if err != nil {
		return nil, fmt.Errorf("listing timers: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := times[:0]
	for _, at := range times {
		if e := m.entries[ID{key, at, typ}]; e != nil && e.status == firing {
			continue
		}
		out = append(out, at)
	}
	return out, nil
}

// ClearScheduled unschedules every timer of (key, type).
func (m *Manager) ClearScheduled(ctx context.Context, key string, typ timerstore.Type) error {
	times, err := m.Scheduled(ctx, key, typ)
	if err != nil {
		return err
	}
	var errs []error
	for _, at := range times {
		if err := m.Unschedule(ctx, ID{key, at, typ}); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// run is the Manager's goroutine: it loads slabs as they come within the
// preload window and fires timers as they come due.
func (m *Manager) run() {
	defer close(m.done)
	// Stop ends a load under way: the store's calls would otherwise hold
	// the partition's revocation up to their timeouts, slab after slab.
	ctx, cancel := m.untilStop()
	defer cancel()
	nextLoad := m.opts.Now() // load at once
	var fireTimer, loadTimer *time.Timer
	defer func() {
		for _, t := range []*time.Timer{fireTimer, loadTimer} {
			if t != nil {
				t.Stop()
			}
		}
	}()
	for {
		now := m.opts.Now()
		if !now.Before(nextLoad) {
			if next, err := m.load(ctx, now); err != nil {
				if ctx.Err() == nil {
					m.log.Warn("loading timers failed; retrying", slog.Any("error", err))
				}
				nextLoad = now.Add(m.opts.RetryDelay)
			} else {
				nextLoad = next
			}
		}
		due, wait := m.takeDue(m.opts.Now())
		for _, t := range due {
			m.opts.Fire(t)
		}
		if d := nextLoad.Sub(m.opts.Now()); d < wait {
			wait = d
		}
		fireTimer = resetTimer(fireTimer, max(wait, 0))
		select {
		case <-m.stop:
			return
		case <-m.wake:
		case <-fireTimer.C:
		}
	}
}

func resetTimer(t *time.Timer, d time.Duration) *time.Timer {
	if t == nil {
		return time.NewTimer(d)
	}
	t.Reset(d)
	return t
}

// takeDue removes the due timers from the delay queue (as many as there
// are in-flight slots) and returns them with how long until the next one
// is due. The caller hands them to the partition without holding the lock.
func (m *Manager) takeDue(now time.Time) ([]timerstore.Trigger, time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var due []timerstore.Trigger
	for m.inFlight < m.opts.MaxInFlight {
		id, ok := m.queue.peek()
		if !ok {
			break
		}
		if at := id.Time.Std(); at.After(now) {
			return due, at.Sub(now)
		}
		m.queue.pop()
		e := m.entries[id]
		if e == nil || !e.queued {
			continue // unscheduled while it waited
		}
		e.queued = false
		if e.status != scheduled {
			continue
		}
		m.inFlight++
		due = append(due, timerstore.Trigger{Key: id.Key, Time: id.Time, Type: id.Type, Span: e.span})
	}
	// Nothing due soon, or no slot free: a push or a freed slot wakes us.
	return due, time.Hour
}

// load brings every slab up to the preload horizon into memory and returns
// when the next load is due: the start of the following slab less a
// preload window drawn at random in [60 s, slab size], so that the
// partitions of a fleet do not all read Cassandra at the same moment.
func (m *Manager) load(ctx context.Context, now time.Time) (time.Time, error) {
	size := m.seg.SlabSize()
	preload := time.Duration(60+rand.Int64N(int64(max(size, 61)-60)+1)) * time.Second
	target := m.slabOf(timerstore.TimeOf(now.Add(preload)))
	// The slab list must be read under the load lock: a timer scheduled
	// between reading it and taking the lock would be stored in a slab this
	// load does not know of, yet counted as owned (and so never loaded).
	m.loadMu.Lock()
	defer m.loadMu.Unlock()
	slabs, err := m.seg.Slabs(ctx)
	if err != nil {
		return time.Time{}, err
	}
	m.mu.Lock()
	first := !m.owned
	from := m.maxOwned + 1
	m.mu.Unlock()
	for _, s := range slabs {
		if s > target || (!first && s < from) {
			continue
		}
		m.mu.Lock()
		loaded := m.loaded[s]
		m.mu.Unlock()
		if loaded {
			// Read by a load that failed on a later slab, and kept up in
			// memory since (ownsLocked): reading it again would bring back
			// timers fired and committed meanwhile whose store delete is
			// still being retried, and fire them twice.
			continue
		}
		triggers, err := m.seg.SlabTriggers(ctx, s)
		if err != nil {
			return time.Time{}, err
		}
		m.mu.Lock()
		for _, t := range triggers {
			id := ID{t.Key, t.Time, t.Type}
			if _, known := m.entries[id]; !known {
				m.addLocked(id, t.Span)
			}
		}
		m.loaded[s] = true
		m.mu.Unlock()
	}
	m.mu.Lock()
	m.maxOwned, m.owned = target, true
	// Slabs that are fully in the past and hold no timer any more can leave
	// the segment's slab list, so later loads skip them.
	current := m.slabOf(timerstore.TimeOf(now))
	var empty []uint32
	for s := range m.loaded {
		if s < current && m.perSlab[s] == 0 && m.held[s] == 0 {
			empty = append(empty, s)
			delete(m.loaded, s)
		}
	}
	m.mu.Unlock()
	slices.Sort(empty)
	for _, s := range empty {
		if err := m.seg.DeleteSlab(ctx, s); err != nil {
			m.log.Warn("dropping an empty timer slab failed", slog.Uint64("slab", uint64(s)), slog.Any("error", err))
		}
	}
	if size == 0 {
		return now.Add(time.Minute), nil
	}
	nextStart := time.Unix(int64(target+1)*int64(size), 0)
	return nextStart.Add(-preload), nil
}
