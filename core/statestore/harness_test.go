package statestore

import (
	"context"
	"io"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/internal/testservices"
)

// backend prepares isolated storage for one run and returns an opener;
// every Store the opener returns sees the same data (for Cassandra, each
// one has a session of its own), which is how persistence is checked.
// clock is the fake clock the store's TTLs run on, nil for real time.
type backend struct {
	name  string
	clock *fakeClock
	env   func(t *testing.T) (open func(t *testing.T) Store)
}

// fakeClock is the memory store's injectable time.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *fakeClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

func memoryBackend(cacheBytes int64) backend {
	clock := newFakeClock()
	name := "memory"
	if cacheBytes > 0 {
		name = "memory+cached"
	}
	return backend{name: name, clock: clock, env: func(t *testing.T) func(t *testing.T) Store {
		mem := newMemory(clock.Now)
		// One process, one memory: every other store is a new view of it.
		return func(t *testing.T) Store { return cachedFor(t, mem, cacheBytes) }
	}}
}

// cachedFor wraps s in a cache closed at test end (cacheBytes 0: none).
func cachedFor(t testing.TB, s Store, cacheBytes int64) Store {
	if cacheBytes <= 0 {
		return s
	}
	c := Cached(s, cacheBytes)
	t.Cleanup(func() { _ = c.(io.Closer).Close() })
	return c
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

type harness struct {
	t     *testing.T
	ctx   context.Context
	store Store
	open  func(t *testing.T) Store
	clock *fakeClock
	ns    string // unique per case: cases never see each other's data
}

type conformanceCase struct {
	name string
	run  func(h *harness)
}

func runConformance(t *testing.T, b backend, cases []conformanceCase) {
	open := b.env(t)
	store := open(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.run(&harness{t: t, ctx: testCtx(t), store: store, open: open, clock: b.clock, ns: testservices.UniqueName("ns")})
		})
	}
}

func (h *harness) key(k string) Key { return Key{Namespace: h.ns, Key: k} }

func (h *harness) check(err error, what string) {
	h.t.Helper()
	if err != nil {
		h.t.Fatalf("%s: %v", what, err)
	}
}

func (h *harness) apply(k Key, w Write) {
	h.t.Helper()
	h.check(h.store.Apply(h.ctx, k, w), "Apply")
}

func (h *harness) change(k Key, ch ...Change) {
	h.t.Helper()
	h.apply(k, Write{Changes: ch})
}

// expire lets TTLs of up to ttl run out, then insists on cond: the fake
// clock jumps past them, real time is waited on (observable state, not a
// fixed sleep).
func (h *harness) expire(ttl time.Duration, what string, cond func() bool) {
	h.t.Helper()
	if h.clock != nil {
		h.clock.Advance(ttl + time.Second)
		if !cond() {
			h.t.Fatalf("%s: not so after the clock passed the TTL", what)
		}
		return
	}
	testservices.WaitFor(h.t, ttl+20*time.Second, what, cond)
}

func (h *harness) wantValue(s Store, k Key, coll string, want []byte, wantOK bool) {
	h.t.Helper()
	v, ok, err := s.Value(h.ctx, k, coll)
	h.check(err, "Value")
	if ok != wantOK || (wantOK && (v == nil || string(v) != string(want))) {
		h.t.Fatalf("Value(%q, %q) = %q, %v; want %q, %v", k.Key, coll, v, ok, want, wantOK)
	}
}

func (h *harness) mapGet(s Store, k Key, coll string, keys ...string) [][]byte {
	h.t.Helper()
	got, err := s.MapGet(h.ctx, k, coll, keys)
	h.check(err, "MapGet")
	if len(got) != len(keys) {
		h.t.Fatalf("MapGet of %d keys returned %d answers", len(keys), len(got))
	}
	return got
}

// wantMap checks point reads: want[key] present, every other key of
// absent absent.
func (h *harness) wantMap(s Store, k Key, coll string, want map[string]string, absent ...string) {
	h.t.Helper()
	var keys []string
	for mk := range want {
		keys = append(keys, mk)
	}
	keys = append(keys, absent...)
	got := h.mapGet(s, k, coll, keys...)
	for i, mk := range keys {
		w, present := want[mk]
		switch {
		case present && (got[i] == nil || string(got[i]) != w):
			h.t.Fatalf("MapGet %q = %q (nil %v), want %q", mk, got[i], got[i] == nil, w)
		case !present && got[i] != nil:
			h.t.Fatalf("MapGet %q = %q, want absent", mk, got[i])
		}
	}
}

// scanAll pages through a map with MapScan and returns every entry.
func (h *harness) scanAll(s Store, k Key, coll string, dir Direction, limit int, keysOnly bool) []Entry {
	h.t.Helper()
	var out []Entry
	after, hasAfter := "", false
	for {
		page, err := s.MapScan(h.ctx, k, coll, dir, after, hasAfter, limit, keysOnly)
		h.check(err, "MapScan")
		if len(page) > limit {
			h.t.Fatalf("MapScan returned %d entries, limit %d", len(page), limit)
		}
		out = append(out, page...)
		if len(page) < limit {
			return out
		}
		after, hasAfter = page[len(page)-1].Key, true
	}
}

func (h *harness) wantBounds(s Store, k Key, coll string, want Bounds) {
	h.t.Helper()
	b, err := s.DequeBounds(h.ctx, k, coll)
	h.check(err, "DequeBounds")
	if b != want {
		h.t.Fatalf("DequeBounds(%q) = %+v, want %+v", coll, b, want)
	}
}

func (h *harness) wantSlots(s Store, k Key, coll string, r Range, dir Direction, limit int, want ...int64) {
	h.t.Helper()
	got, err := s.DequeSlots(h.ctx, k, coll, r, dir, limit)
	h.check(err, "DequeSlots")
	idx := make([]int64, len(got))
	for i, sl := range got {
		idx[i] = sl.Index
		if string(sl.Value) != slotValue(sl.Index) {
			h.t.Fatalf("slot %d holds %q, want %q", sl.Index, sl.Value, slotValue(sl.Index))
		}
	}
	if (len(idx) != 0 || len(want) != 0) && !reflect.DeepEqual(idx, want) {
		h.t.Fatalf("DequeSlots(%+v, dir %d, limit %d) = %v, want %v", r, dir, limit, idx, want)
	}
}

func (h *harness) wantApplied(s Store, k Key, source string, want int64, wantOK bool) {
	h.t.Helper()
	o, ok, err := s.Applied(h.ctx, k, source)
	h.check(err, "Applied")
	if ok != wantOK || (ok && o != want) {
		h.t.Fatalf("Applied(%q, %q) = %d, %v; want %d, %v", k.Key, source, o, ok, want, wantOK)
	}
}

func slotValue(i int64) string { return "slot" + time.Duration(i).String() }

func slots(idx ...int64) []Slot {
	out := make([]Slot, len(idx))
	for i, x := range idx {
		out[i] = Slot{Index: x, Value: []byte(slotValue(x))}
	}
	return out
}

func valueChange(coll, v string) Change {
	return Change{Collection: coll, Kind: config.CollectionValue, Value: []byte(v)}
}

func mapPuts(coll string, kv ...string) Change {
	ch := Change{Collection: coll, Kind: config.CollectionMap}
	for i := 0; i+1 < len(kv); i += 2 {
		ch.Puts = append(ch.Puts, Entry{Key: kv[i], Value: []byte(kv[i+1])})
	}
	return ch
}
