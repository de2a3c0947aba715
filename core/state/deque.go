package state

import (
	"context"

	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/statestore"
)

// Deque is a double-ended queue collection of the event's key, in one
// attempt. A collection with a capacity drops the item at the far end when
// a push would exceed it (appending past capacity drops the oldest).
type Deque struct{ handle }

// DequeOf opens the deque collection name for the key of ctx's event.
func DequeOf(ctx *event.Context, name string) (*Deque, error) {
	h, err := open(ctx, name, config.CollectionDeque)
	if err != nil {
		return nil, err
	}
	return &Deque{h}, nil
}

// load reads the committed bounds on first use. The caller holds t.mu.
func (d *Deque) load() error {
	q := &d.s.dq
	if q.loaded {
		return nil
	}
	b, err := d.t.p.svc.store.DequeBounds(d.t.ctx, d.t.key(), d.s.def.Name)
	if err != nil {
		return storeError("reading "+d.s.def.Name, err)
	}
	q.loaded, q.base, q.cur = true, b, b
	return nil
}

// slot reads the item at absolute index i, which lies within the current
// bounds. The caller holds t.mu.
func (d *Deque) slot(i int64) ([]byte, error) {
	q := &d.s.dq
	if v, ok := q.slots[i]; ok {
		return v, nil
	}
	if d.s.cleared || i < q.base.Head || i >= q.base.Tail {
		return nil, nil
	}
	got, err := d.t.p.svc.store.DequeSlots(d.t.ctx, d.t.key(), d.s.def.Name, statestore.Range{From: i, To: i + 1},
		statestore.Forward, 1)
	if err != nil {
		return nil, storeError("reading "+d.s.def.Name, err)
	}
	if len(got) == 0 {
		return nil, nil
	}
	return got[0].Value, nil
}

func (d *Deque) write(i int64, item []byte) {
	q := &d.s.dq
	if q.slots == nil {
		q.slots = make(map[int64][]byte)
	}
	q.slots[i] = item
}

// PushBack stages item at the back.
func (d *Deque) PushBack(item []byte) error { return d.push(item, true) }

// PushFront stages item at the front.
func (d *Deque) PushFront(item []byte) error { return d.push(item, false) }

func (d *Deque) push(item []byte, back bool) error {
	if err := checkItem(d.s.def.Payload, item); err != nil {
		return err
	}
	if err := d.t.begin(); err != nil {
		return err
	}
	defer d.t.mu.Unlock()
	if err := d.load(); err != nil {
		return err
	}
	q := &d.s.dq
	if limit, ok := d.s.def.Capacity.Get(); ok && q.cur.Len() >= limit {
		// Drop from the far end, without reading what is dropped.
		if back {
			delete(q.slots, q.cur.Head)
			q.cur.Head++
		} else {
			q.cur.Tail--
			delete(q.slots, q.cur.Tail)
		}
	}
	if back {
		d.write(q.cur.Tail, clone(item))
		q.cur.Tail++
	} else {
		q.cur.Head--
		d.write(q.cur.Head, clone(item))
	}
	return nil
}

// PopFront removes and returns the front item; ok is false when empty.
func (d *Deque) PopFront() ([]byte, bool, error) { return d.end(true, true) }

// PopBack removes and returns the back item.
func (d *Deque) PopBack() ([]byte, bool, error) { return d.end(false, true) }

// PeekFront returns the front item without removing it.
func (d *Deque) PeekFront() ([]byte, bool, error) { return d.end(true, false) }

// PeekBack returns the back item without removing it.
func (d *Deque) PeekBack() ([]byte, bool, error) { return d.end(false, false) }

func (d *Deque) end(front, remove bool) ([]byte, bool, error) {
	if err := d.t.begin(); err != nil {
		return nil, false, err
	}
	defer d.t.mu.Unlock()
	if err := d.load(); err != nil {
		return nil, false, err
	}
	q := &d.s.dq
	if q.cur.Len() <= 0 {
		return nil, false, nil
	}
	i := q.cur.Tail - 1
	dir := statestore.Backward
	if front {
		i, dir = q.cur.Head, statestore.Forward
	}
	v, err := d.slot(i)
	if err != nil {
		return nil, false, err
	}
	if v == nil {
		// Items of a collection with a TTL expire one by one: the end
		// is the first item still there.
		live, err := d.live(d.t.ctx, i, dir, 1)
		if err != nil {
			return nil, false, err
		}
		i = q.cur.Head // none left: the removal empties it
		if front {
			i = q.cur.Tail - 1
		}
		if len(live) > 0 {
			i, v = live[0].Index, live[0].Value
		}
	}
	if remove {
		delete(q.slots, i)
		if front {
			q.cur.Head = i + 1
		} else {
			q.cur.Tail = i
		}
	}
	return v, v != nil, nil
}

// holes reports whether the deque can have gaps: its items expire one by
// one when the collection has a TTL.
func (d *Deque) holes() bool {
	_, ok := d.s.def.TTL.Get()
	return ok && !d.s.cleared
}

// live returns up to limit items still there, from absolute index from
// on, in direction dir, within the current bounds. The caller holds t.mu.
func (d *Deque) live(ctx context.Context, from int64, dir statestore.Direction, limit int) ([]statestore.Slot, error) {
	q := &d.s.dq
	var out []statestore.Slot
	for pos := from; len(out) < limit; {
		var a, b int64
		if dir == statestore.Forward {
			a, b = max(pos, q.cur.Head), min(pos+ChunkSize, q.cur.Tail)
		} else {
			a, b = max(pos-ChunkSize+1, q.cur.Head), min(pos+1, q.cur.Tail)
		}
		if a >= b {
			return out, nil
		}
		stored := map[int64][]byte{}
		if ra, rb := max(a, q.base.Head), min(b, q.base.Tail); !d.s.cleared && ra < rb {
			got, err := d.t.p.svc.store.DequeSlots(ctx, d.t.key(), d.s.def.Name, statestore.Range{From: ra, To: rb},
				dir, ChunkSize)
			if err != nil {
				return nil, storeError("reading "+d.s.def.Name, err)
			}
			for _, sl := range got {
				stored[sl.Index] = sl.Value
			}
		}
		add := func(i int64) {
			v, ok := q.slots[i]
			if !ok {
				v = stored[i]
			}
			if v != nil && len(out) < limit {
				out = append(out, statestore.Slot{Index: i, Value: v})
			}
		}
		if dir == statestore.Forward {
			for i := a; i < b; i++ {
				add(i)
			}
			pos = b
		} else {
			for i := b - 1; i >= a; i-- {
				add(i)
			}
			pos = a - 1
		}
	}
	return out, nil
}

// Get returns the item at index (0 is the front); ok is false past the
// end.
func (d *Deque) Get(index uint64) ([]byte, bool, error) {
	if err := d.t.begin(); err != nil {
		return nil, false, err
	}
	defer d.t.mu.Unlock()
	if err := d.load(); err != nil {
		return nil, false, err
	}
	q := &d.s.dq
	if index >= uint64(max(q.cur.Len(), 0)) {
		return nil, false, nil
	}
	if d.holes() {
		live, err := d.live(d.t.ctx, q.cur.Head, statestore.Forward, int(index)+1)
		if err != nil || uint64(len(live)) <= index {
			return nil, false, err
		}
		return live[index].Value, true, nil
	}
	v, err := d.slot(q.cur.Head + int64(index))
	return v, v != nil, err
}

// Len is the number of items.
func (d *Deque) Len() (uint64, error) {
	if err := d.t.begin(); err != nil {
		return 0, err
	}
	defer d.t.mu.Unlock()
	if err := d.load(); err != nil {
		return 0, err
	}
	n := max(d.s.dq.cur.Len(), 0)
	if d.holes() && n > 0 {
		live, err := d.live(d.t.ctx, d.s.dq.cur.Head, statestore.Forward, int(n))
		return uint64(len(live)), err
	}
	return uint64(n), nil
}

// IsEmpty reports whether the deque has no items.
func (d *Deque) IsEmpty() (bool, error) {
	n, err := d.Len()
	return n == 0, err
}

// Clear stages the removal of every item.
func (d *Deque) Clear() error {
	if err := d.t.begin(); err != nil {
		return err
	}
	defer d.t.mu.Unlock()
	if err := d.load(); err != nil {
		return err
	}
	d.s.cleared = true
	d.s.dq.cur, d.s.dq.slots = statestore.Bounds{}, nil
	return nil
}

// Scan returns a cursor over the items in order (dir), the attempt's own
// writes included.
func (d *Deque) Scan(dir statestore.Direction) (*Cursor, error) {
	if err := d.t.begin(); err != nil {
		return nil, err
	}
	defer d.t.mu.Unlock()
	if err := d.load(); err != nil {
		return nil, err
	}
	s := &dequeScan{d: d, dir: dir}
	return &Cursor{t: d.t, next: s.chunk}, nil
}

// dequeScan walks a deque's current bounds, reading each chunk's
// committed slots in one store call.
type dequeScan struct {
	d       *Deque
	dir     statestore.Direction
	started bool
	pos     int64 // the next index
}

func (s *dequeScan) chunk(ctx context.Context) ([]Item, error) {
	q := &s.d.s.dq
	if !s.started {
		s.started = true
		s.pos = q.cur.Head
		if s.dir == statestore.Backward {
			s.pos = q.cur.Tail - 1
		}
	}
	// The chunk's range [a, b), clipped to the current bounds (the
	// handler may have popped items since the scan began).
	var a, b int64
	if s.dir == statestore.Forward {
		a, b = max(s.pos, q.cur.Head), min(s.pos+ChunkSize, q.cur.Tail)
	} else {
		a, b = max(s.pos-ChunkSize+1, q.cur.Head), min(s.pos+1, q.cur.Tail)
	}
	if a >= b {
		return nil, nil
	}
	stored := map[int64][]byte{}
	if ra, rb := max(a, q.base.Head), min(b, q.base.Tail); !s.d.s.cleared && ra < rb {
		got, err := s.d.t.p.svc.store.DequeSlots(ctx, s.d.t.key(), s.d.s.def.Name, statestore.Range{From: ra, To: rb},
			s.dir, ChunkSize)
		if err != nil {
			return nil, storeError("scanning "+s.d.s.def.Name, err)
		}
		for _, sl := range got {
			stored[sl.Index] = sl.Value
		}
	}
	out := make([]Item, 0, b-a)
	add := func(i int64) {
		v, ok := q.slots[i]
		if !ok {
			v = stored[i]
		}
		if v != nil {
			out = append(out, Item{Value: v})
		}
	}
	if s.dir == statestore.Forward {
		for i := a; i < b; i++ {
			add(i)
		}
		s.pos = b
	} else {
		for i := b - 1; i >= a; i-- {
			add(i)
		}
		s.pos = a - 1
	}
	if len(out) == 0 {
		return s.chunk(ctx) // a chunk of slots that are all gone: go on
	}
	return out, nil
}
