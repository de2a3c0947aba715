package timerstore

import (
	"context"
	"slices"
	"sync"
)

// NewMemory returns a Store that keeps timers in process memory for as long
// as the process lives. Data is keyed like the Cassandra layout (segment id,
// slab size, slab, type, key, time), so a partition revoked and assigned
// again in the same process finds its timers.
func NewMemory() Store { return &memoryStore{segments: map[[16]byte]*memSegment{}} }

type memoryStore struct {
	mu       sync.Mutex // guards segments and everything inside them
	segments map[[16]byte]*memSegment
}

type slabKey struct {
	size uint32
	id   uint32
}

type timerKey struct {
	typ  Type
	key  string
	time Time
}

type keyType struct {
	key string
	typ Type
}

// memSegment mirrors the three Cassandra tables of one segment.
type memSegment struct {
	name     string
	slabSize uint32
	slabs    map[uint32]struct{}                        // timer_segments rows
	slabIdx  map[slabKey]map[timerKey]map[string]string // timer_typed_slabs
	keyIdx   map[keyType]map[Time]map[string]string     // timer_typed_keys
}

func (s *memoryStore) Segment(_ context.Context, group, topic string, partition int32, slabSize uint32) (Segment, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := SegmentID(group, topic, partition)
	seg, ok := s.segments[id]
	if !ok {
		seg = &memSegment{
			name:     segmentName(group, topic, partition),
			slabSize: slabSize,
			slabs:    map[uint32]struct{}{},
			slabIdx:  map[slabKey]map[timerKey]map[string]string{},
			keyIdx:   map[keyType]map[Time]map[string]string{},
		}
		s.segments[id] = seg
	}
	if seg.slabSize != slabSize {
		seg.rebucket(slabSize)
	}
	return &memoryHandle{mu: &s.mu, seg: seg, slabSize: slabSize}, nil
}

// rebucket moves every trigger into slabs of the new size, like the
// Cassandra store does when the configured slab size changes.
func (m *memSegment) rebucket(size uint32) {
	old := m.slabSize
	moved := map[slabKey]map[timerKey]map[string]string{}
	for id := range m.slabs {
		for tk, span := range m.slabIdx[slabKey{old, id}] {
			nk := slabKey{size, SlabOf(tk.time, size)}
			if moved[nk] == nil {
				moved[nk] = map[timerKey]map[string]string{}
			}
			moved[nk][tk] = span
		}
		delete(m.slabIdx, slabKey{old, id})
	}
	m.slabs = map[uint32]struct{}{}
	for k, v := range moved {
		m.slabIdx[k] = v
		m.slabs[k.id] = struct{}{}
	}
	m.slabSize = size
}

// memoryHandle is a Segment. Like a Cassandra segment handle it keeps the
// slab size it was opened with.
type memoryHandle struct {
	mu       *sync.Mutex
	seg      *memSegment
	slabSize uint32
}

func (h *memoryHandle) SlabSize() uint32 { return h.slabSize }

func (h *memoryHandle) Slabs(context.Context) ([]uint32, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]uint32, 0, len(h.seg.slabs))
	for id := range h.seg.slabs {
		out = append(out, id)
	}
	slices.Sort(out)
	return out, nil
}

func (h *memoryHandle) SlabTriggers(_ context.Context, slab uint32) ([]Trigger, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []Trigger
	for tk, span := range h.seg.slabIdx[slabKey{h.slabSize, slab}] {
		out = append(out, Trigger{Key: tk.key, Time: tk.time, Type: tk.typ, Span: cloneSpan(span)})
	}
	sortTriggers(out)
	return out, nil
}

func (h *memoryHandle) KeyTimes(_ context.Context, key string, typ Type) ([]Time, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.keyTimes(key, typ), nil
}

func (h *memoryHandle) keyTimes(key string, typ Type) []Time {
	var out []Time
	for t := range h.seg.keyIdx[keyType{key, typ}] {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

func (h *memoryHandle) Add(_ context.Context, t Trigger) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.add(t)
	return nil
}

func (h *memoryHandle) add(t Trigger) {
	slab := SlabOf(t.Time, h.slabSize)
	h.seg.slabs[slab] = struct{}{}
	sk := slabKey{h.slabSize, slab}
	if h.seg.slabIdx[sk] == nil {
		h.seg.slabIdx[sk] = map[timerKey]map[string]string{}
	}
	h.seg.slabIdx[sk][timerKey{t.Type, t.Key, t.Time}] = cloneSpan(t.Span)
	kt := keyType{t.Key, t.Type}
	if h.seg.keyIdx[kt] == nil {
		h.seg.keyIdx[kt] = map[Time]map[string]string{}
	}
	h.seg.keyIdx[kt][t.Time] = cloneSpan(t.Span)
}

func (h *memoryHandle) Remove(_ context.Context, key string, at Time, typ Type) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.remove(key, at, typ)
	return nil
}

func (h *memoryHandle) remove(key string, at Time, typ Type) {
	sk := slabKey{h.slabSize, SlabOf(at, h.slabSize)}
	if idx := h.seg.slabIdx[sk]; idx != nil {
		delete(idx, timerKey{typ, key, at})
		if len(idx) == 0 {
			delete(h.seg.slabIdx, sk)
		}
	}
	kt := keyType{key, typ}
	if times := h.seg.keyIdx[kt]; times != nil {
		delete(times, at)
		if len(times) == 0 {
			delete(h.seg.keyIdx, kt)
		}
	}
}

func (h *memoryHandle) ClearAndSchedule(_ context.Context, t Trigger) ([]Time, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	old := h.keyTimes(t.Key, t.Type)
	h.add(t)
	var removed []Time
	for _, at := range old {
		if at != t.Time {
			h.remove(t.Key, at, t.Type)
			removed = append(removed, at)
		}
	}
	return removed, nil
}

func (h *memoryHandle) DeleteSlab(_ context.Context, slab uint32) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.seg.slabs, slab)
	return nil
}

// TypeKeys looks at listed slabs only, as the Cassandra store does: a
// timer in a slab dropped by DeleteSlab is not found there either.
func (h *memoryHandle) TypeKeys(_ context.Context, typ Type, through Time) ([]string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	seen := map[string]struct{}{}
	var out []string
	last := SlabOf(through, h.slabSize)
	for slab := range h.seg.slabs {
		if slab > last {
			continue
		}
		for tk := range h.seg.slabIdx[slabKey{h.slabSize, slab}] {
			if _, ok := seen[tk.key]; tk.typ == typ && !ok {
				seen[tk.key] = struct{}{}
				out = append(out, tk.key)
			}
		}
	}
	return out, nil
}

// sortTriggers orders triggers as the Cassandra slab index clusters them:
// by type, key, then time.
func sortTriggers(ts []Trigger) {
	slices.SortFunc(ts, func(a, b Trigger) int {
		switch {
		case a.Type != b.Type:
			return int(a.Type) - int(b.Type)
		case a.Key != b.Key:
			if a.Key < b.Key {
				return -1
			}
			return 1
		case a.Time < b.Time:
			return -1
		case a.Time > b.Time:
			return 1
		}
		return 0
	})
}
