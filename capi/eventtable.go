package main

import "sync/atomic"

// eventTable maps event handles to the events the host holds. Every event
// passes through it twice (added when it is handed to the host, taken when
// the host completes it, on different threads), so those two are an atomic
// operation each: handles are numbered in sequence, which makes the
// sequence number modulo the ring's size a slot that is almost always free
// when the event comes. An event whose slot is still held by an older one
// (held by the host while eventRing newer handles were made) goes to a
// locked overflow map instead; lookups try the map only while it holds
// something.
type eventTable struct {
	ring     [eventRing]atomic.Pointer[pendingEvent]
	spilled  atomic.Int64 // entries in overflow
	overflow tableShard[*pendingEvent]
}

// eventRing slots (8 bytes each). A scan of the whole ring (the
// cancellation watch's, every noticeTick while the host holds events)
// costs about as much as a few events.
const (
	ringBits  = 14
	eventRing = 1 << ringBits
)

func newEventTable() *eventTable {
	t := &eventTable{}
	t.overflow.init()
	return t
}

// slot is where id's event goes: its sequence number modulo eventRing,
// with the low three bits moved to the top, so that consecutive handles
// (made by different partitions, on different CPUs) fall on different
// cache lines rather than eight to a line.
func (t *eventTable) slot(id uint64) *atomic.Pointer[pendingEvent] {
	seq := id >> 8
	return &t.ring[(seq&7)<<(ringBits-3)|(seq>>3)&(eventRing>>3-1)]
}

// add registers ev under ev.id, which must be new.
func (t *eventTable) add(ev *pendingEvent) {
	if t.slot(ev.id).CompareAndSwap(nil, ev) {
		return
	}
	t.spilled.Add(1)
	t.overflow.put(ev.id, ev)
}

// get returns the event of a live handle, or an INVALID_HANDLE error that
// says what is wrong with it.
func (t *eventTable) get(id uint64) (*pendingEvent, error) {
	if ev := t.slot(id).Load(); ev != nil && ev.id == id {
		return ev, nil
	}
	if t.spilled.Load() > 0 {
		if ev, ok := t.overflow.get(id); ok {
			return ev, nil
		}
	}
	return nil, invalidHandle(kindEvent, id)
}

// take removes a live handle and returns its event; only one caller can
// take a given handle, which makes release and completion exactly-once.
func (t *eventTable) take(id uint64) (*pendingEvent, error) { return t.takeUnless(id, nil) }

// takeUnless is take, except that an event for which refuse (if not nil)
// returns an error stays, and that error is returned. refuse must depend
// only on what does not change while the event is in the table, or changes
// one way only (an event once delivered stays delivered): a refusal that
// is out of date then only refuses a handle nobody holds yet.
func (t *eventTable) takeUnless(id uint64, refuse func(*pendingEvent) error) (*pendingEvent, error) {
	s := t.slot(id)
	if ev := s.Load(); ev != nil && ev.id == id {
		if refuse != nil {
			if err := refuse(ev); err != nil {
				return ev, err
			}
		}
		if s.CompareAndSwap(ev, nil) {
			return ev, nil
		}
		// Another caller took it first.
		return nil, invalidHandle(kindEvent, id)
	}
	if t.spilled.Load() > 0 {
		ev, ok, err := t.overflow.takeUnless(id, refuse)
		if err != nil {
			return ev, err
		}
		if ok {
			t.spilled.Add(-1)
			return ev, nil
		}
	}
	return nil, invalidHandle(kindEvent, id)
}

// takeWhere removes and returns every event for which match is true.
func (t *eventTable) takeWhere(match func(*pendingEvent) bool) []*pendingEvent {
	var out []*pendingEvent
	for i := range t.ring {
		s := &t.ring[i]
		if ev := s.Load(); ev != nil && match(ev) && s.CompareAndSwap(ev, nil) {
			out = append(out, ev)
		}
	}
	sh := &t.overflow
	sh.mu.Lock()
	for id, ev := range sh.m {
		if match(ev) {
			out = append(out, ev)
			delete(sh.m, id)
			t.spilled.Add(-1)
		}
	}
	sh.mu.Unlock()
	return out
}

// each calls f for every event in the table (the overflow map's under its
// lock: f must be quick and must not touch the table).
func (t *eventTable) each(f func(*pendingEvent)) {
	for i := range t.ring {
		if ev := t.ring[i].Load(); ev != nil {
			f(ev)
		}
	}
	if t.spilled.Load() == 0 {
		return
	}
	sh := &t.overflow
	sh.mu.Lock()
	for _, ev := range sh.m {
		f(ev)
	}
	sh.mu.Unlock()
}
