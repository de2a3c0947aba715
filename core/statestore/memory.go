package statestore

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/google/btree"

	"github.com/prosody-events/prosody-go/core/fault"
)

// NewMemory returns a store that keeps everything in process memory, with
// the Cassandra store's semantics: rows in the same order, TTLs rounded up
// to whole seconds, every Write applied atomically. Nothing is ever half
// applied, so Pending is always empty.
func NewMemory() Store { return newMemory(time.Now) }

// NewMemoryClock is NewMemory with TTLs run on now instead of the wall
// clock, so that a test can step time past an expiry.
func NewMemoryClock(now func() time.Time) Store { return newMemory(now) }

// InMemory returns the process-wide memory store of mock mode: every
// client of the process sees the same state, as they would through one
// Cassandra keyspace, so a partition that moves between them keeps it.
func InMemory() Store { return processMemory() }

var processMemory = sync.OnceValue(NewMemory)

// memTreeDegree suits short rows: wide nodes keep the tree shallow without
// making in-node searches long.
const memTreeDegree = 32

type memoryStore struct {
	clock func() time.Time // the clock TTLs run on (fake in tests)

	// One mutex guards everything: Apply must be atomic against every
	// reader, and mock mode needs simplicity more than parallel reads.
	mu      sync.Mutex
	keys    map[Key]*btree.BTreeG[memRow]
	schemas map[string]map[string]Schema
	routes  map[[2]string]Route
	leases  map[[2]string]int64
}

// memRow is one row of a key; exp is zero when it never expires.
type memRow struct {
	coll, item string
	value      []byte
	exp        time.Time
}

func rowLess(a, b memRow) bool {
	if a.coll != b.coll {
		return a.coll < b.coll
	}
	return a.item < b.item
}

func newMemory(now func() time.Time) *memoryStore {
	return &memoryStore{
		clock:   now,
		keys:    map[Key]*btree.BTreeG[memRow]{},
		schemas: map[string]map[string]Schema{},
		routes:  map[[2]string]Route{},
		leases:  map[[2]string]int64{},
	}
}

var _ lifetimes = (*memoryStore)(nil)

func (m *memoryStore) now() time.Time { return m.clock() }

// InMemory tells the engine that the store's operations do not wait on
// the network.
func (m *memoryStore) InMemory() bool { return true }

func (m *memoryStore) Collections(_ context.Context, namespace string) (map[string]Schema, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]Schema, len(m.schemas[namespace]))
	for n, s := range m.schemas[namespace] {
		out[n] = s
	}
	return out, nil
}

func (m *memoryStore) Register(_ context.Context, namespace string, s Schema) (Schema, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ns := m.schemas[namespace]
	if ns == nil {
		ns = map[string]Schema{}
		m.schemas[namespace] = ns
	}
	if old, ok := ns[s.Name]; ok {
		return old, nil
	}
	ns[s.Name] = s
	return s, nil
}

func (m *memoryStore) Route(_ context.Context, subsystem, collection string) (Route, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.routes[[2]string{subsystem, collection}]
	return r, ok, nil
}

func (m *memoryStore) SetRoute(_ context.Context, r Route) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.routes[[2]string{r.Subsystem, r.Collection}] = r
	return nil
}

func (m *memoryStore) DeleteRoute(_ context.Context, subsystem, collection, namespace string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := [2]string{subsystem, collection}
	if r, ok := m.routes[k]; ok && r.Namespace == namespace {
		delete(m.routes, k)
	}
	return nil
}

// live returns the row if it exists and has not expired. An expired row
// met on the way is removed, so TTL'd state does not pile up in a
// long-lived mock process (Cassandra's compaction does the same).
func (m *memoryStore) live(k Key, coll, item string, now time.Time) (memRow, bool) {
	t := m.keys[k]
	if t == nil {
		return memRow{}, false
	}
	r, ok := t.Get(memRow{coll: coll, item: item})
	if !ok {
		return memRow{}, false
	}
	if expired(r, now) {
		m.purge(k, t, []memRow{r})
		return memRow{}, false
	}
	return r, true
}

// purge removes expired rows of k, and k when nothing is left of it.
func (m *memoryStore) purge(k Key, t *btree.BTreeG[memRow], rows []memRow) {
	for _, r := range rows {
		t.Delete(r)
	}
	if t.Len() == 0 {
		delete(m.keys, k)
	}
}

func expired(r memRow, now time.Time) bool { return !r.exp.IsZero() && !now.Before(r.exp) }

func (m *memoryStore) Value(ctx context.Context, k Key, collection string) ([]byte, bool, error) {
	v, ok, _, err := m.valueUntil(ctx, k, collection)
	return v, ok, err
}

func (m *memoryStore) valueUntil(_ context.Context, k Key, collection string) ([]byte, bool, time.Time, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.live(k, collection, valueItem, m.now())
	if !ok {
		return nil, false, time.Time{}, nil
	}
	return slices.Clone(r.value), true, r.exp, nil
}

func (m *memoryStore) MapGet(ctx context.Context, k Key, collection string, keys []string) ([][]byte, error) {
	out, _, err := m.mapGetUntil(ctx, k, collection, keys)
	return out, err
}

func (m *memoryStore) mapGetUntil(_ context.Context, k Key, collection string, keys []string) ([][]byte, []time.Time, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	out := make([][]byte, len(keys))
	exps := make([]time.Time, len(keys))
	for i, key := range keys {
		if r, ok := m.live(k, collection, key, now); ok {
			out[i], exps[i] = slices.Clone(r.value), r.exp
		}
	}
	return out, exps, nil
}

func (m *memoryStore) MapScan(_ context.Context, k Key, collection string, dir Direction, after string, hasAfter bool,
	limit int, keysOnly bool) ([]Entry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.keys[k]
	if t == nil || limit <= 0 {
		return nil, nil
	}
	now := m.now()
	var out []Entry
	var dead []memRow
	defer func() { m.purge(k, t, dead) }()
	visit := func(r memRow) bool {
		if r.coll != collection {
			// Descending from the pivot past the collection's end may
			// first meet a later collection's rows: skip those, stop at
			// an earlier one.
			return dir == Backward && r.coll > collection
		}
		if expired(r, now) {
			dead = append(dead, r)
			return true
		}
		if hasAfter && r.item == after {
			return true
		}
		e := Entry{Key: r.item}
		if !keysOnly {
			e.Value = slices.Clone(r.value)
		}
		out = append(out, e)
		return len(out) < limit
	}
	switch {
	case dir == Forward && hasAfter:
		t.AscendGreaterOrEqual(memRow{coll: collection, item: after}, visit)
	case dir == Forward:
		t.AscendGreaterOrEqual(memRow{coll: collection}, visit)
	case hasAfter:
		t.DescendLessOrEqual(memRow{coll: collection, item: after}, visit)
	default:
		// The first row past every item of the collection.
		t.DescendLessOrEqual(memRow{coll: collection + "\x00"}, visit)
	}
	return out, nil
}

func (m *memoryStore) DequeBounds(ctx context.Context, k Key, collection string) (Bounds, error) {
	b, _, err := m.boundsUntil(ctx, k, collection)
	return b, err
}

func (m *memoryStore) boundsUntil(_ context.Context, k Key, collection string) (Bounds, time.Time, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.live(k, collection, boundsItem, m.now())
	if !ok {
		return Bounds{}, time.Time{}, nil
	}
	b, err := decodeBounds(r.value)
	if err != nil {
		return Bounds{}, time.Time{}, fault.Terminal(err)
	}
	return b, r.exp, nil
}

func (m *memoryStore) DequeSlots(_ context.Context, k Key, collection string, r Range, dir Direction, limit int) ([]Slot, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.keys[k]
	if t == nil || limit <= 0 || r.From >= r.To {
		return nil, nil
	}
	now := m.now()
	var out []Slot
	var dead []memRow
	defer func() { m.purge(k, t, dead) }()
	var err error
	visit := func(row memRow) bool {
		if expired(row, now) {
			dead = append(dead, row)
			return true
		}
		var i int64
		if i, err = slotIndex([]byte(row.item)); err != nil {
			return false
		}
		out = append(out, Slot{Index: i, Value: slices.Clone(row.value)})
		return len(out) < limit
	}
	first, last := slotItem(r.From), slotItem(r.To-1)
	within := func(row memRow) bool { return row.coll == collection && row.item >= first && row.item <= last }
	if dir == Forward {
		t.AscendGreaterOrEqual(memRow{coll: collection, item: first}, func(row memRow) bool { return within(row) && visit(row) })
	} else {
		t.DescendLessOrEqual(memRow{coll: collection, item: last}, func(row memRow) bool { return within(row) && visit(row) })
	}
	if err != nil {
		return nil, fault.Terminal(err)
	}
	return out, nil
}

func (m *memoryStore) Applied(_ context.Context, k Key, source string) (int64, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.live(k, markerColl, source, m.now())
	if !ok {
		return 0, false, nil
	}
	o, err := decodeOffset(r.value)
	if err != nil {
		return 0, false, fault.Terminal(err)
	}
	return o, true, nil
}

func (m *memoryStore) Apply(_ context.Context, k Key, w Write) error {
	c, err := compile(w, 0)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	t := m.keys[k]
	if t == nil {
		t = btree.NewG(memTreeDegree, rowLess)
		m.keys[k] = t
	}
	for _, op := range c.deletes {
		switch op.kind {
		case opDeleteCollection:
			deleteRange(t, memRow{coll: op.coll}, memRow{coll: op.coll + "\x00"})
		case opDeleteRange:
			deleteRange(t, memRow{coll: op.coll, item: op.item}, memRow{coll: op.coll, item: op.to})
		case opDeleteRow:
			t.Delete(memRow{coll: op.coll, item: op.item})
		}
	}
	for _, op := range c.puts {
		r := memRow{coll: op.coll, item: op.item, value: slices.Clone(op.value)}
		if s := ttlSeconds(op.ttl); s > 0 {
			r.exp = now.Add(time.Duration(s) * time.Second)
		}
		t.ReplaceOrInsert(r)
	}
	m.purge(k, t, nil)
	return nil
}

// deleteRange removes the rows in [from, to). Collecting first keeps the
// tree unchanged while it is iterated.
func deleteRange(t *btree.BTreeG[memRow], from, to memRow) {
	var doomed []memRow
	t.AscendRange(from, to, func(r memRow) bool {
		doomed = append(doomed, r)
		return true
	})
	for _, r := range doomed {
		t.Delete(r)
	}
}

func (m *memoryStore) Lease(_ context.Context, namespace, source string) (int64, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	h, ok := m.leases[[2]string{namespace, source}]
	return h, ok, nil
}

func (m *memoryStore) SetLease(_ context.Context, namespace, source string, high int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := [2]string{namespace, source}
	if old, ok := m.leases[k]; !ok || high > old {
		m.leases[k] = high
	}
	return nil
}

// Pending is always empty: Apply never leaves a write half done.
func (m *memoryStore) Pending(context.Context, string) ([]Pending, error) { return nil, nil }

func (m *memoryStore) Settle(context.Context, Pending) error {
	return fault.Terminal(errors.New("statestore: the memory store has no pending writes to settle"))
}
