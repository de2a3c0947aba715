//go:build capitest

package main

import (
	"errors"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"
)

// tableEvent is an event whose handle has the sequence number
// lap*eventRing+seq: events with the same seq share a ring slot.
func tableEvent(seq, lap uint64) *pendingEvent {
	return &pendingEvent{id: (lap*eventRing+seq)<<8 | uint64(kindEvent)}
}

// Every sequence number modulo the ring has a slot of its own, and eight
// consecutive handles use eight cache lines.
func TestEventTableSlotsSpreadAcrossLines(t *testing.T) {
	tab := newEventTable()
	index := func(seq uint64) int {
		off := uintptr(unsafe.Pointer(tab.slot(tableEvent(seq, 1).id))) - uintptr(unsafe.Pointer(&tab.ring[0]))
		i := int(off / unsafe.Sizeof(tab.ring[0]))
		if i < 0 || i >= eventRing {
			t.Fatalf("slot of %d outside the ring", seq)
		}
		return i
	}
	seen := make(map[int]bool, eventRing)
	for seq := uint64(0); seq < eventRing; seq++ {
		i := index(seq)
		if seen[i] {
			t.Fatalf("sequence %d shares slot %d", seq, i)
		}
		seen[i] = true
		if seq > 0 && i/8 == index(seq-1)/8 {
			t.Fatalf("sequences %d and %d share a cache line", seq-1, seq)
		}
	}
}

func TestEventTableSlotsAndOverflow(t *testing.T) {
	tests := []struct {
		name   string
		events []*pendingEvent
	}{
		{"one", []*pendingEvent{tableEvent(5, 1)}},
		{"distinct slots", []*pendingEvent{tableEvent(1, 1), tableEvent(2, 1), tableEvent(eventRing-1, 1)}},
		// An event held while eventRing newer handles were made: the newer
		// one with its slot goes to the overflow map.
		{"same slot", []*pendingEvent{tableEvent(7, 1), tableEvent(7, 2), tableEvent(7, 3)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tab := newEventTable()
			for _, ev := range tt.events {
				tab.add(ev)
			}
			for _, ev := range tt.events {
				if got, err := tab.get(ev.id); err != nil || got != ev {
					t.Fatalf("get(%#x) = %p, %v; want %p", ev.id, got, err, ev)
				}
			}
			var seen []uint64
			tab.each(func(ev *pendingEvent) { seen = append(seen, ev.id) })
			if len(seen) != len(tt.events) {
				t.Fatalf("each saw %d events, want %d", len(seen), len(tt.events))
			}
			// Taking the first frees its slot; the others stay findable.
			for i, ev := range tt.events {
				if got, err := tab.take(ev.id); err != nil || got != ev {
					t.Fatalf("take(%#x) = %p, %v", ev.id, got, err)
				}
				if _, err := tab.take(ev.id); err == nil {
					t.Fatalf("a second take of %#x must fail", ev.id)
				}
				if _, err := tab.get(ev.id); err == nil {
					t.Fatalf("get(%#x) after take must fail", ev.id)
				}
				for _, rest := range tt.events[i+1:] {
					if _, err := tab.get(rest.id); err != nil {
						t.Fatalf("get(%#x) after taking %#x: %v", rest.id, ev.id, err)
					}
				}
			}
			if tab.spilled.Load() != 0 {
				t.Fatalf("overflow still counts %d", tab.spilled.Load())
			}
		})
	}
}

func TestEventTableRefusalAndTakeWhere(t *testing.T) {
	tab := newEventTable()
	direct, spilledDirect := tableEvent(3, 1), tableEvent(3, 2)
	direct.direct, spilledDirect.direct = true, true
	other := tableEvent(4, 1)
	for _, ev := range []*pendingEvent{direct, spilledDirect, other} {
		tab.add(ev)
	}
	for _, ev := range []*pendingEvent{direct, spilledDirect} {
		if _, err := tab.takeUnless(ev.id, refuseUnheld); !errors.Is(err, errDirectOutcome) {
			t.Fatalf("takeUnless(%#x) = %v, want the refusal", ev.id, err)
		}
		if _, err := tab.get(ev.id); err != nil {
			t.Fatalf("a refused event must stay: %v", err)
		}
	}
	got := tab.takeWhere(func(ev *pendingEvent) bool { return ev.direct })
	ids := []uint64{}
	for _, ev := range got {
		ids = append(ids, ev.id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	if len(ids) != 2 || ids[0] != direct.id || ids[1] != spilledDirect.id {
		t.Fatalf("takeWhere took %#x, want %#x and %#x", ids, direct.id, spilledDirect.id)
	}
	if _, err := tab.get(other.id); err != nil {
		t.Fatalf("takeWhere took a non-matching event: %v", err)
	}
	if _, err := tab.get(tableEvent(9, 1).id); err == nil {
		t.Fatal("an unknown handle must be invalid")
	}
}

// Completion and the client's release race for the same events: each event
// is taken exactly once.
func TestEventTableTakesOnce(t *testing.T) {
	tab := newEventTable()
	const n = 4 * eventRing // laps of the ring: a quarter in the slots, the rest overflowing
	evs := make([]*pendingEvent, n)
	for i := range evs {
		evs[i] = tableEvent(uint64(i%eventRing), uint64(i/eventRing+1))
		tab.add(evs[i])
	}
	var taken atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, ev := range evs {
				if _, err := tab.take(ev.id); err == nil {
					taken.Add(1)
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		taken.Add(int64(len(tab.takeWhere(func(*pendingEvent) bool { return true }))))
	}()
	wg.Wait()
	if taken.Load() != n {
		t.Fatalf("%d takes succeeded, want exactly %d", taken.Load(), n)
	}
}
