package timerstore

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prosody-events/prosody-go/core/internal/testservices"
)

// backend describes one Store implementation to the conformance suite.
// newEnv prepares isolated storage for one run and returns an opener; every
// Store the opener returns sees the same data (for Cassandra, each one has a
// session of its own), which is how persistence is checked.
type backend func(t *testing.T) (open func(t *testing.T) Store)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// runConformance runs every behavior the timer manager relies on against
// one implementation. Subtests use distinct groups, hence distinct segments.
func runConformance(t *testing.T, newEnv backend) {
	open := newEnv(t)
	store := open(t)
	for _, tc := range conformanceCases {
		t.Run(tc.name, func(t *testing.T) {
			h := &harness{t: t, ctx: testCtx(t), store: store, open: open, group: testservices.UniqueName("g")}
			tc.run(h)
		})
	}
}

type harness struct {
	t     *testing.T
	ctx   context.Context
	store Store
	open  func(t *testing.T) Store
	group string
}

const slabSize = 60

func (h *harness) segment(partition int32, size uint32) Segment {
	h.t.Helper()
	return h.segmentOf(h.store, h.group, partition, size)
}

func (h *harness) segmentOf(s Store, group string, partition int32, size uint32) Segment {
	h.t.Helper()
	seg, err := s.Segment(h.ctx, group, "topic", partition, size)
	if err != nil {
		h.t.Fatalf("Segment: %v", err)
	}
	if seg.SlabSize() != size {
		h.t.Fatalf("SlabSize = %d, want %d", seg.SlabSize(), size)
	}
	return seg
}

func (h *harness) add(seg Segment, key string, at Time, typ Type) {
	h.t.Helper()
	if err := seg.Add(h.ctx, Trigger{Key: key, Time: at, Type: typ}); err != nil {
		h.t.Fatalf("Add(%q, %d, %d): %v", key, at, typ, err)
	}
}

func (h *harness) remove(seg Segment, key string, at Time, typ Type) {
	h.t.Helper()
	if err := seg.Remove(h.ctx, key, at, typ); err != nil {
		h.t.Fatalf("Remove(%q, %d, %d): %v", key, at, typ, err)
	}
}

func (h *harness) wantTimes(seg Segment, key string, typ Type, want ...Time) {
	h.t.Helper()
	got, err := seg.KeyTimes(h.ctx, key, typ)
	if err != nil {
		h.t.Fatalf("KeyTimes(%q, %d): %v", key, typ, err)
	}
	if len(got) != 0 || len(want) != 0 {
		if !reflect.DeepEqual(got, want) {
			h.t.Fatalf("KeyTimes(%q, %d) = %v, want %v", key, typ, got, want)
		}
	}
}

func (h *harness) wantSlabs(seg Segment, want ...uint32) {
	h.t.Helper()
	got, err := seg.Slabs(h.ctx)
	if err != nil {
		h.t.Fatalf("Slabs: %v", err)
	}
	if len(got) != 0 || len(want) != 0 {
		if !reflect.DeepEqual(got, want) {
			h.t.Fatalf("Slabs = %v, want %v", got, want)
		}
	}
}

func (h *harness) wantTriggers(seg Segment, slab uint32, want ...Trigger) {
	h.t.Helper()
	got, err := seg.SlabTriggers(h.ctx, slab)
	if err != nil {
		h.t.Fatalf("SlabTriggers(%d): %v", slab, err)
	}
	if len(got) != 0 || len(want) != 0 {
		if !reflect.DeepEqual(got, want) {
			h.t.Fatalf("SlabTriggers(%d) = %+v, want %+v", slab, got, want)
		}
	}
}

func (h *harness) wantTypeKeys(seg Segment, typ Type, want ...string) {
	h.t.Helper()
	got, err := seg.TypeKeys(h.ctx, typ, ^Time(0))
	if err != nil {
		h.t.Fatalf("TypeKeys(%d): %v", typ, err)
	}
	slices.Sort(got)
	if len(got) != 0 || len(want) != 0 {
		if !reflect.DeepEqual(got, want) {
			h.t.Fatalf("TypeKeys(%d) = %v, want %v", typ, got, want)
		}
	}
}

func tr(key string, at Time, typ Type) Trigger { return Trigger{Key: key, Time: at, Type: typ} }

var conformanceCases = []struct {
	name string
	run  func(h *harness)
}{
	{"add indexes by slab and key", func(h *harness) {
		seg := h.segment(0, slabSize)
		h.add(seg, "k", 130, Application)
		h.add(seg, "k", 10, Application)
		h.add(seg, "k", 70, Application)
		h.wantTimes(seg, "k", Application, 10, 70, 130)
		h.wantSlabs(seg, 0, 1, 2)
		h.wantTriggers(seg, 0, tr("k", 10, Application))
		h.wantTriggers(seg, 1, tr("k", 70, Application))
		h.wantTriggers(seg, 3)
	}},
	{"add and remove are idempotent", func(h *harness) {
		seg := h.segment(0, slabSize)
		h.add(seg, "k", 10, Application)
		h.add(seg, "k", 10, Application)
		h.wantTimes(seg, "k", Application, 10)
		h.wantTriggers(seg, 0, tr("k", 10, Application))
		h.remove(seg, "k", 10, Application)
		h.remove(seg, "k", 10, Application)
		h.remove(seg, "never", 5, DeferredTimer)
		h.wantTimes(seg, "k", Application)
		h.wantTriggers(seg, 0)
		// Removing timers leaves the slab listed: only DeleteSlab drops it.
		h.wantSlabs(seg, 0)
	}},
	{"remove deletes one timer only", func(h *harness) {
		seg := h.segment(0, slabSize)
		for _, at := range []Time{10, 20, 30} {
			h.add(seg, "k", at, Application)
		}
		h.remove(seg, "k", 20, Application)
		h.wantTimes(seg, "k", Application, 10, 30)
		h.wantTriggers(seg, 0, tr("k", 10, Application), tr("k", 30, Application))
		h.remove(seg, "k", 25, Application) // not scheduled
		h.wantTimes(seg, "k", Application, 10, 30)
	}},
	{"inline and overflow forms are invisible", func(h *harness) {
		// 1 → 2 → 3 → 2 → 1 → 0 → 1 timers of one key and type; each step
		// crosses or stays within a storage form of the key index.
		seg := h.segment(0, slabSize)
		h.add(seg, "k", 100, DeferredMessage)
		h.wantTimes(seg, "k", DeferredMessage, 100)
		h.add(seg, "k", 50, DeferredMessage)
		h.wantTimes(seg, "k", DeferredMessage, 50, 100)
		h.add(seg, "k", 200, DeferredMessage)
		h.wantTimes(seg, "k", DeferredMessage, 50, 100, 200)
		h.remove(seg, "k", 100, DeferredMessage)
		h.wantTimes(seg, "k", DeferredMessage, 50, 200)
		h.remove(seg, "k", 200, DeferredMessage)
		h.wantTimes(seg, "k", DeferredMessage, 50)
		h.add(seg, "k", 50, DeferredMessage) // same timer again while inline
		h.wantTimes(seg, "k", DeferredMessage, 50)
		h.remove(seg, "k", 50, DeferredMessage)
		h.wantTimes(seg, "k", DeferredMessage)
		h.add(seg, "k", 7, DeferredMessage)
		h.wantTimes(seg, "k", DeferredMessage, 7)
		h.add(seg, "k", 8, DeferredMessage)
		h.remove(seg, "k", 7, DeferredMessage)
		h.remove(seg, "k", 8, DeferredMessage)
		h.wantTimes(seg, "k", DeferredMessage)
		h.wantTriggers(seg, 0)
		h.wantTriggers(seg, 1)
		h.wantTriggers(seg, 3)
	}},
	{"keys and types are isolated", func(h *harness) {
		seg := h.segment(0, slabSize)
		for _, typ := range []Type{Application, DeferredMessage, DeferredTimer} {
			h.add(seg, "a", 10, typ)
		}
		h.add(seg, "a", 20, Application)
		h.add(seg, "b", 10, Application)
		h.wantTriggers(seg, 0,
			tr("a", 10, Application), tr("a", 20, Application), tr("b", 10, Application),
			tr("a", 10, DeferredMessage), tr("a", 10, DeferredTimer))
		h.remove(seg, "a", 10, DeferredMessage)
		h.wantTimes(seg, "a", Application, 10, 20)
		h.wantTimes(seg, "a", DeferredMessage)
		h.wantTimes(seg, "a", DeferredTimer, 10)
		h.wantTimes(seg, "b", Application, 10)
		h.wantTimes(seg, "b", DeferredTimer)
		h.wantTimes(seg, "c", Application)
	}},
	{"segments are isolated", func(h *harness) {
		p0 := h.segment(0, slabSize)
		p1 := h.segment(1, slabSize)
		other := h.segmentOf(h.store, h.group+"x", 0, slabSize)
		h.add(p0, "k", 10, Application)
		h.add(p1, "k", 130, Application)
		h.wantTimes(p0, "k", Application, 10)
		h.wantTimes(p1, "k", Application, 130)
		h.wantTimes(other, "k", Application)
		h.wantSlabs(p0, 0)
		h.wantSlabs(p1, 2)
		h.wantSlabs(other)
		h.wantTriggers(p1, 0)
		if _, err := p0.ClearAndSchedule(h.ctx, tr("k", 20, Application)); err != nil {
			h.t.Fatal(err)
		}
		h.wantTimes(p1, "k", Application, 130)
	}},
	{"clear and schedule replaces the timers of one key and type", func(h *harness) {
		seg := h.segment(0, slabSize)
		cs := func(at Time, wantRemoved ...Time) {
			h.t.Helper()
			removed, err := seg.ClearAndSchedule(h.ctx, Trigger{Key: "k", Time: at, Type: Application,
				Span: map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}})
			if err != nil {
				h.t.Fatalf("ClearAndSchedule(%d): %v", at, err)
			}
			if len(removed) != 0 || len(wantRemoved) != 0 {
				if !reflect.DeepEqual(removed, wantRemoved) {
					h.t.Fatalf("ClearAndSchedule(%d) removed %v, want %v", at, removed, wantRemoved)
				}
			}
			h.wantTimes(seg, "k", Application, at)
		}
		h.add(seg, "k", 5, DeferredTimer) // other type: untouched
		h.add(seg, "other", 40, Application)
		cs(30)     // from absent
		cs(30)     // same time again: nothing removed
		cs(90, 30) // from inline
		h.add(seg, "k", 100, Application)
		h.add(seg, "k", 150, Application)
		cs(100, 90, 150) // from overflow, keeping one of the old times
		h.wantTriggers(seg, 0, tr("other", 40, Application), tr("k", 5, DeferredTimer))
		h.wantTriggers(seg, 1, Trigger{Key: "k", Time: 100, Type: Application,
			Span: map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}})
		h.wantTriggers(seg, 2)
		h.wantTimes(seg, "k", DeferredTimer, 5)
		h.wantTimes(seg, "other", Application, 40)
		// Back through the forms after a clear.
		h.add(seg, "k", 101, Application)
		h.remove(seg, "k", 100, Application)
		h.wantTimes(seg, "k", Application, 101)
	}},
	{"spans round trip and refresh", func(h *harness) {
		seg := h.segment(0, slabSize)
		span := map[string]string{"traceparent": "00-abc-def-01", "tracestate": "x=1", "baggage": "k=v"}
		if err := seg.Add(h.ctx, Trigger{Key: "k", Time: 10, Type: Application, Span: span}); err != nil {
			h.t.Fatal(err)
		}
		h.add(seg, "n", 10, Application) // nil span
		span["baggage"] = "mutated after Add"
		h.wantTriggers(seg, 0,
			Trigger{Key: "k", Time: 10, Type: Application, Span: map[string]string{"traceparent": "00-abc-def-01", "tracestate": "x=1", "baggage": "k=v"}},
			tr("n", 10, Application))
		if err := seg.Add(h.ctx, Trigger{Key: "k", Time: 10, Type: Application, Span: map[string]string{"traceparent": "new"}}); err != nil {
			h.t.Fatal(err)
		}
		h.wantTriggers(seg, 0,
			Trigger{Key: "k", Time: 10, Type: Application, Span: map[string]string{"traceparent": "new"}},
			tr("n", 10, Application))
	}},
	{"slabs list ascending unsigned and delete", func(h *harness) {
		seg := h.segment(0, 1)
		high := Time(math.MaxUint32 - 5) // slab id above 2^31
		mid := Time(1 << 31)
		h.add(seg, "k", high, Application)
		h.add(seg, "k", 7, Application)
		h.add(seg, "k", mid, Application)
		h.wantSlabs(seg, 7, uint32(mid), uint32(high))
		h.wantTimes(seg, "k", Application, 7, mid, high)
		h.wantTriggers(seg, uint32(high), tr("k", high, Application))
		if err := seg.DeleteSlab(h.ctx, uint32(mid)); err != nil {
			h.t.Fatal(err)
		}
		if err := seg.DeleteSlab(h.ctx, 12345); err != nil { // never listed
			h.t.Fatal(err)
		}
		h.wantSlabs(seg, 7, uint32(high))
		// DeleteSlab touches the slab list only.
		h.wantTriggers(seg, uint32(mid), tr("k", mid, Application))
		// A new timer lists the slab again.
		h.add(seg, "j", mid, Application)
		h.wantSlabs(seg, 7, uint32(mid), uint32(high))
	}},
	{"slab size change rebuckets every trigger", func(h *harness) {
		seg := h.segment(0, 10)
		for _, at := range []Time{5, 15, 25, 100} {
			h.add(seg, "k", at, Application)
		}
		h.add(seg, "j", 15, DeferredTimer)
		h.wantSlabs(seg, 0, 1, 2, 10)
		seg = h.segment(0, 50)
		h.wantSlabs(seg, 0, 2)
		h.wantTriggers(seg, 0, tr("k", 5, Application), tr("k", 15, Application), tr("k", 25, Application), tr("j", 15, DeferredTimer))
		h.wantTriggers(seg, 2, tr("k", 100, Application))
		h.wantTimes(seg, "k", Application, 5, 15, 25, 100)
		h.remove(seg, "k", 15, Application)
		h.wantTriggers(seg, 0, tr("k", 5, Application), tr("k", 25, Application), tr("j", 15, DeferredTimer))
		// Reopening with the same size changes nothing; going back works.
		seg = h.segment(0, 50)
		h.wantSlabs(seg, 0, 2)
		seg = h.segment(0, 10)
		h.wantSlabs(seg, 0, 1, 2, 10)
		h.wantTriggers(seg, 1, tr("j", 15, DeferredTimer))
		h.wantTriggers(seg, 10, tr("k", 100, Application))
	}},
	{"type keys lists each key with a timer of the type once", func(h *harness) {
		seg := h.segment(0, slabSize)
		h.wantTypeKeys(seg, DeferredMessage)
		h.add(seg, "a", 10, DeferredMessage)
		h.add(seg, "a", 130, DeferredMessage) // another slab, same key
		h.add(seg, "b", 70, DeferredMessage)
		h.add(seg, "c", 10, DeferredTimer)
		h.add(seg, "d", 10, Application)
		h.wantTypeKeys(seg, DeferredMessage, "a", "b")
		h.wantTypeKeys(seg, DeferredTimer, "c")
		h.wantTypeKeys(seg, Application, "d")
		h.remove(seg, "b", 70, DeferredMessage)
		h.remove(seg, "a", 10, DeferredMessage)
		h.wantTypeKeys(seg, DeferredMessage, "a")
		// Another partition's keys are not listed.
		h.add(h.segment(1, slabSize), "e", 10, DeferredMessage)
		h.wantTypeKeys(seg, DeferredMessage, "a")
		// Only slabs up to the bound are searched.
		if got, err := seg.TypeKeys(h.ctx, DeferredMessage, 119); err != nil || len(got) != 0 {
			h.t.Fatalf("TypeKeys through 119 = %v, %v; the timer at 130 is beyond it", got, err)
		}
		if got, err := seg.TypeKeys(h.ctx, DeferredMessage, 120); err != nil || len(got) != 1 {
			h.t.Fatalf("TypeKeys through 120 = %v, %v; its slab starts at 120", got, err)
		}
		// Only listed slabs are searched.
		if err := seg.DeleteSlab(h.ctx, 2); err != nil {
			h.t.Fatal(err)
		}
		h.wantTypeKeys(seg, DeferredMessage)
	}},
	{"data persists for another store", func(h *harness) {
		seg := h.segment(3, slabSize)
		h.add(seg, "k", 10, Application)
		h.add(seg, "k", 20, Application)
		h.add(seg, "s", 70, DeferredMessage)
		again := h.segmentOf(h.open(h.t), h.group, 3, slabSize)
		h.wantTimes(again, "k", Application, 10, 20)
		h.wantTimes(again, "s", DeferredMessage, 70)
		h.wantSlabs(again, 0, 1)
		h.wantTriggers(again, 1, tr("s", 70, DeferredMessage))
	}},
	{"two stores open one segment concurrently", func(h *harness) {
		stores := []Store{h.store, h.open(h.t)}
		segs := make([]Segment, len(stores))
		errs := make([]error, len(stores))
		var wg sync.WaitGroup
		for i, s := range stores {
			wg.Go(func() {
				segs[i], errs[i] = s.Segment(h.ctx, h.group, "topic", 9, slabSize)
				if errs[i] == nil {
					// Different keys: stores do not serialize writers of one
					// key (the timer manager does), so the same key could
					// lose an update here.
					errs[i] = segs[i].Add(h.ctx, Trigger{Key: fmt.Sprint("k", i), Time: Time(10 + i), Type: Application})
				}
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				h.t.Fatalf("store %d: %v", i, err)
			}
		}
		for _, seg := range segs {
			h.wantTimes(seg, "k0", Application, 10)
			h.wantTimes(seg, "k1", Application, 11)
			h.wantTriggers(seg, 0, tr("k0", 10, Application), tr("k1", 11, Application))
			h.wantSlabs(seg, 0)
		}
	}},
}

func TestMemoryConformance(t *testing.T) {
	runConformance(t, func(t *testing.T) func(t *testing.T) Store {
		s := NewMemory()
		// One process, one memory: every "other" store is the same one.
		return func(*testing.T) Store { return s }
	})
}
