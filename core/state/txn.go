package state

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"

	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/internal/invocation"
	"github.com/prosody-events/prosody-go/core/statestore"
)

// Txn is one attempt's keyed state: what it staged in each collection it
// opened. Operations of an attempt's handles may come from several threads
// at once (a host awaiting several); mu serialises them, store I/O
// included, which keeps a collection's staged view and the store reads it
// merges with consistent.
type Txn struct {
	p   *Partition
	ctx *invocation.Context // the attempt

	mu    sync.Mutex
	ended bool // the attempt is over: handles expire
	colls map[string]*staged
	// early: a collection was committed before the attempt ended (Commit
	// on a handle), so the attempt's marker is due even if nothing is
	// left to write at its end.
	early bool
}

// staged is what an attempt wrote to one collection since its last
// commit: a value's new state, a map's changed entries, a deque's bounds
// and written slots.
type staged struct {
	def config.StateCollection

	// value
	valueSet bool
	value    []byte // nil: cleared

	// map: entries written (a nil value: removed); cleared drops every
	// stored entry the attempt did not write.
	cleared bool
	puts    map[string][]byte

	// deque
	dq deque
}

// deque is a deque's staged view: the committed bounds when first used
// (base), the current ones, and the slots written since. A slot inside
// cur not in slots is the committed one, unless the deque was cleared.
type deque struct {
	loaded    bool
	base, cur statestore.Bounds
	slots     map[int64][]byte
}

func (t *Txn) key() statestore.Key { return t.p.rowKey(t.ctx.Key()) }

// stage returns the staged part of collection c.
func (t *Txn) stage(c *collection) *staged {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.colls[c.def.Name]
	if s == nil {
		s = &staged{def: c.def}
		t.colls[c.def.Name] = s
	}
	return s
}

// begin locks the transaction for one operation, checking that the attempt
// is still on. The caller unlocks t.mu.
func (t *Txn) begin() error {
	t.mu.Lock()
	if t.ended {
		t.mu.Unlock()
		return ErrExpired
	}
	if err := t.ctx.Check(); err != nil {
		t.mu.Unlock()
		if errors.Is(err, invocation.ErrInvalidContext) {
			return ErrExpired
		}
		return err
	}
	return nil
}

// dirty reports whether s holds anything to write, without building it.
func (s *staged) dirty() bool {
	switch s.def.Kind {
	case config.CollectionValue:
		return s.valueSet
	case config.CollectionMap:
		return s.cleared || len(s.puts) > 0
	default:
		d := &s.dq
		return d.loaded && (s.cleared || d.cur != d.base || len(d.slots) > 0)
	}
}

// change is what s holds, as a store change; ok is false when s holds
// nothing to write.
func (s *staged) change() (c statestore.Change, ok bool) {
	if !s.dirty() {
		return c, false
	}
	c = statestore.Change{Collection: s.def.Name, Kind: s.def.Kind}
	if ttl, has := s.def.TTL.Get(); has {
		c.TTL = ttl
	}
	switch s.def.Kind {
	case config.CollectionValue:
		c.Value, c.Clear = s.value, s.value == nil
		return c, true
	case config.CollectionMap:
		c.Clear = s.cleared
		for _, k := range slices.Sorted(maps.Keys(s.puts)) {
			if v := s.puts[k]; v != nil {
				c.Puts = append(c.Puts, statestore.Entry{Key: k, Value: v})
			} else if !s.cleared {
				c.Removes = append(c.Removes, k)
			}
		}
		return c, true
	default:
		d := &s.dq
		c.Clear = s.cleared
		cur := d.cur
		c.Bounds = &cur
		for _, i := range slices.Sorted(maps.Keys(d.slots)) {
			if i >= cur.Head && i < cur.Tail {
				c.Slots = append(c.Slots, statestore.Slot{Index: i, Value: d.slots[i]})
			}
		}
		if !s.cleared {
			if b := min(cur.Head, d.base.Tail); b > d.base.Head {
				c.Drops = append(c.Drops, statestore.Range{From: d.base.Head, To: b})
			}
			if a := max(cur.Tail, d.base.Head); a < d.base.Tail {
				c.Drops = append(c.Drops, statestore.Range{From: a, To: d.base.Tail})
			}
		}
		return c, true
	}
}

// settled makes what s staged its committed base (after it was written),
// or drops it (rollback, a failed attempt).
func (s *staged) reset(committed bool) {
	s.valueSet, s.value = false, nil
	s.cleared, s.puts = false, nil
	if committed {
		s.dq.base = s.dq.cur
	} else {
		s.dq.cur = s.dq.base
	}
	s.dq.slots = nil
}

// commitOne writes one collection's staged changes now (Commit on a
// handle). It is not marked: the attempt's marker comes with its final
// write, if it succeeds.
func (t *Txn) commitOne(ctx context.Context, s *staged) error {
	c, ok := s.change()
	if !ok {
		return nil
	}
	if err := t.p.svc.store.Apply(ctx, t.key(), statestore.Write{Changes: []statestore.Change{c}}); err != nil {
		t.p.notePartial(t.ctx.Key(), err)
		return storeError("committing "+s.def.Name, err)
	}
	s.reset(true)
	if !s.def.ReadUncommitted {
		t.early = true
	}
	return nil
}

// Commit writes what the attempt staged, once it succeeded: the
// read_uncommitted collections first, each on its own, then the others in
// one atomic write with the marker of the message at offset (offset < 0:
// a timer, no marker). Nothing staged, nothing written: an attempt that
// only read leaves no marker.
func (t *Txn) Commit(ctx context.Context, offset int64) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ended = true
	var w statestore.Write
	for _, name := range slices.Sorted(maps.Keys(t.colls)) {
		s := t.colls[name]
		if s.def.ReadUncommitted {
			if err := t.commitOne(ctx, s); err != nil {
				return err
			}
			continue
		}
		if c, ok := s.change(); ok {
			w.Changes = append(w.Changes, c)
		}
	}
	if len(w.Changes) == 0 && (!t.early || offset < 0) {
		return nil
	}
	if offset >= 0 {
		if err := t.p.lease(ctx, offset); err != nil {
			return err
		}
		w.Marker = &statestore.Marker{Source: t.p.source, Offset: offset, TTL: t.p.svc.markerTTL}
	}
	if err := t.p.svc.store.Apply(ctx, t.key(), w); err != nil {
		t.p.notePartial(t.ctx.Key(), err)
		return storeError("committing the attempt's writes", err)
	}
	return nil
}

// Pending reports whether the attempt has anything to write: staged
// changes, or the marker of an early commit.
func (t *Txn) Pending() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.early {
		return true
	}
	for _, s := range t.colls {
		if s.dirty() {
			return true
		}
	}
	return false
}

// Discard drops what a failed attempt staged.
func (t *Txn) Discard() {
	t.mu.Lock()
	t.ended = true
	t.colls = nil
	t.mu.Unlock()
}
