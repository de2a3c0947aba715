package statestore

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/fault"
)

// testCacheBytes is the cache size of the cached backends: large enough
// that nothing a case reads is evicted, so the cache answers.
const testCacheBytes = 64 << 20

func TestMemoryConformance(t *testing.T) { runConformance(t, memoryBackend(0), conformanceCases) }

func TestMemoryCachedConformance(t *testing.T) {
	runConformance(t, memoryBackend(testCacheBytes), conformanceCases)
}

var conformanceCases = []conformanceCase{
	{"value set, get and clear", func(h *harness) {
		k := h.key("k")
		for _, s := range []Store{h.store, h.store} { // the second read may come from a cache
			h.wantValue(s, k, "v", nil, false)
		}
		h.change(k, valueChange("v", "one"))
		h.wantValue(h.store, k, "v", []byte("one"), true)
		h.wantValue(h.store, k, "v", []byte("one"), true)
		h.change(k, valueChange("v", "two"))
		h.wantValue(h.store, k, "v", []byte("two"), true)
		// An empty value is a value, not an absence.
		h.change(k, valueChange("v", ""))
		h.wantValue(h.store, k, "v", []byte{}, true)
		// A nil value without Clear changes nothing.
		h.change(k, Change{Collection: "v", Kind: config.CollectionValue})
		h.wantValue(h.store, k, "v", []byte{}, true)
		h.change(k, Change{Collection: "v", Kind: config.CollectionValue, Clear: true})
		h.wantValue(h.store, k, "v", nil, false)
		h.change(k, Change{Collection: "v", Kind: config.CollectionValue, Clear: true, Value: []byte("three")})
		h.wantValue(h.store, k, "v", []byte("three"), true)
	}},
	{"answers are copies", func(h *harness) {
		k := h.key("k")
		val := []byte("abc")
		h.change(k, Change{Collection: "v", Kind: config.CollectionValue, Value: val})
		val[0] = 'X'
		for range 2 {
			v, _, err := h.store.Value(h.ctx, k, "v")
			h.check(err, "Value")
			if string(v) != "abc" {
				h.t.Fatalf("Value = %q after the caller changed its buffers, want abc", v)
			}
			v[0] = 'Y'
		}
		h.change(k, mapPuts("m", "a", "1"))
		for range 2 {
			got := h.mapGet(h.store, k, "m", "a", "a")
			if string(got[0]) != "1" || string(got[1]) != "1" {
				h.t.Fatalf("MapGet = %q", got)
			}
			got[0][0] = 'Z'
		}
	}},
	{"map puts, removes and point reads", func(h *harness) {
		k := h.key("k")
		h.wantMap(h.store, k, "m", nil, "a", "b")
		h.change(k, mapPuts("m", "a", "1", "b", "2", "c", "3", "", "empty key", "é", "accent"))
		h.wantMap(h.store, k, "m", map[string]string{"a": "1", "b": "2", "c": "3", "": "empty key", "é": "accent"}, "x", "A")
		got := h.mapGet(h.store, k, "m", "a", "x", "a", "c", "x")
		want := []string{"1", "", "1", "3", ""}
		for i := range want {
			if (want[i] == "") != (got[i] == nil) || string(got[i]) != want[i] {
				h.t.Fatalf("MapGet with duplicates = %q, want %q (\"\" absent)", got, want)
			}
		}
		h.change(k, Change{Collection: "m", Kind: config.CollectionMap, Removes: []string{"b", "never"},
			Puts: []Entry{{Key: "c", Value: []byte("33")}}})
		h.wantMap(h.store, k, "m", map[string]string{"a": "1", "c": "33"}, "b", "never")
		// Removing and putting one key in one write keeps the put.
		h.change(k, Change{Collection: "m", Kind: config.CollectionMap, Removes: []string{"a"},
			Puts: []Entry{{Key: "a", Value: []byte("again")}}})
		h.wantMap(h.store, k, "m", map[string]string{"a": "again"})
		// An empty entry value is present.
		h.change(k, mapPuts("m", "z", ""))
		if got := h.mapGet(h.store, k, "m", "z"); got[0] == nil || len(got[0]) != 0 {
			h.t.Fatalf("empty entry = %q (nil %v), want present and empty", got[0], got[0] == nil)
		}
		if got := h.mapGet(h.store, k, "m"); len(got) != 0 {
			h.t.Fatalf("MapGet of no keys = %q", got)
		}
		// Many keys at once (more than one IN chunk).
		var ch Change
		ch.Collection, ch.Kind = "many", config.CollectionMap
		var keys []string
		for i := range 250 {
			mk := fmt.Sprintf("k%03d", i)
			keys = append(keys, mk)
			if i%2 == 0 {
				ch.Puts = append(ch.Puts, Entry{Key: mk, Value: []byte(mk)})
			}
		}
		h.change(k, ch)
		for range 2 {
			got := h.mapGet(h.store, k, "many", keys...)
			for i, mk := range keys {
				if (i%2 == 0) != (got[i] != nil) || (got[i] != nil && string(got[i]) != mk) {
					h.t.Fatalf("MapGet(%q) = %q", mk, got[i])
				}
			}
		}
	}},
	{"map scans in chunks, both directions", func(h *harness) {
		k := h.key("k")
		var keys []string
		ch := Change{Collection: "m", Kind: config.CollectionMap}
		for i := range 333 {
			// Mixed lengths, a shared prefix, multibyte UTF-8 and the
			// empty key: bytewise order is not numeric order here.
			mk := fmt.Sprintf("%d", i*7919%1000)
			switch i % 5 {
			case 1:
				mk = "ü" + mk
			case 2:
				mk = mk + "\x00z"
			case 3:
				mk = "k" + strings.Repeat("x", i%17)
			}
			if i == 0 {
				mk = ""
			}
			if slices.Contains(keys, mk) {
				continue
			}
			keys = append(keys, mk)
			ch.Puts = append(ch.Puts, Entry{Key: mk, Value: []byte("v" + mk)})
		}
		// Neighbours that a scan must not wander into.
		h.change(k, ch, mapPuts("l", "zz", "before"), mapPuts("m\x00", "", "after"), mapPuts("n", "a", "after"),
			valueChange("ma", "a value"))
		sort.Strings(keys) // Go compares strings bytewise, as Cassandra compares blobs
		rev := slices.Clone(keys)
		slices.Reverse(rev)
		for _, tc := range []struct {
			dir  Direction
			want []string
		}{{Forward, keys}, {Backward, rev}} {
			for _, keysOnly := range []bool{false, true} {
				for _, limit := range []int{256, 100, 1} {
					got := h.scanAll(h.store, k, "m", tc.dir, limit, keysOnly)
					var gotKeys []string
					for _, e := range got {
						gotKeys = append(gotKeys, e.Key)
						if keysOnly && e.Value != nil {
							h.t.Fatalf("keys-only scan returned value %q for %q", e.Value, e.Key)
						}
						if !keysOnly && string(e.Value) != "v"+e.Key {
							h.t.Fatalf("scan returned %q = %q", e.Key, e.Value)
						}
					}
					if !slices.Equal(gotKeys, tc.want) {
						h.t.Fatalf("scan dir %d limit %d keysOnly %v: %d keys %q..., want %d %q...",
							tc.dir, limit, keysOnly, len(gotKeys), head(gotKeys), len(tc.want), head(tc.want))
					}
				}
			}
		}
		// Resuming after a key that is not in the map starts at its place.
		const absent = "k\x01"
		got, err := h.store.MapScan(h.ctx, k, "m", Forward, absent, true, 3, true)
		h.check(err, "MapScan")
		i := sort.SearchStrings(keys, absent)
		if len(got) != 3 || got[0].Key != keys[i] {
			h.t.Fatalf("scan after absent key = %+v, want from %q", got, keys[i])
		}
		got, err = h.store.MapScan(h.ctx, k, "m", Backward, absent, true, 1, true)
		h.check(err, "MapScan")
		if len(got) != 1 || got[0].Key != keys[i-1] {
			h.t.Fatalf("backward scan before absent key = %+v, want %q", got, keys[i-1])
		}
		if got := h.scanAll(h.store, k, "absent", Forward, 10, false); len(got) != 0 {
			h.t.Fatalf("scan of an absent map = %+v", got)
		}
		if got, err := h.store.MapScan(h.ctx, k, "m", Forward, "", false, 0, false); err != nil || len(got) != 0 {
			h.t.Fatalf("scan with limit 0 = %+v, %v", got, err)
		}
	}},
	{"clear then puts in one write keeps exactly the puts", func(h *harness) {
		k := h.key("k")
		h.change(k, mapPuts("m", "a", "1", "b", "2", "c", "3"))
		h.wantMap(h.store, k, "m", map[string]string{"a": "1", "b": "2", "c": "3"}) // cached, where there is a cache
		ch := mapPuts("m", "b", "new", "d", "4")
		ch.Clear = true
		h.change(k, ch)
		h.wantMap(h.store, k, "m", map[string]string{"b": "new", "d": "4"}, "a", "c")
		if got := h.scanAll(h.store, k, "m", Forward, 10, true); len(got) != 2 || got[0].Key != "b" || got[1].Key != "d" {
			h.t.Fatalf("scan after clear = %+v, want b, d", got)
		}
		// A clear alone empties the map; other collections keep theirs.
		h.change(k, mapPuts("other", "a", "kept"))
		h.change(k, Change{Collection: "m", Kind: config.CollectionMap, Clear: true})
		h.wantMap(h.store, k, "m", nil, "b", "d")
		h.wantMap(h.store, k, "other", map[string]string{"a": "kept"})
		// Clearing a deque with new bounds and slots in one write.
		h.change(k, Change{Collection: "d", Kind: config.CollectionDeque, Bounds: &Bounds{0, 3}, Slots: slots(0, 1, 2)})
		h.change(k, Change{Collection: "d", Kind: config.CollectionDeque, Clear: true, Bounds: &Bounds{7, 8}, Slots: slots(7)})
		h.wantBounds(h.store, k, "d", Bounds{7, 8})
		h.wantSlots(h.store, k, "d", Range{math.MinInt64, math.MaxInt64}, Forward, 10, 7)
	}},
	{"deque bounds, slots, drops and scans", func(h *harness) {
		k := h.key("k")
		h.wantBounds(h.store, k, "d", Bounds{})
		h.wantSlots(h.store, k, "d", Range{-10, 10}, Forward, 10)
		// Push back 0..4, then front -1 and -2.
		h.change(k, Change{Collection: "d", Kind: config.CollectionDeque, Bounds: &Bounds{0, 5}, Slots: slots(0, 1, 2, 3, 4)})
		h.wantBounds(h.store, k, "d", Bounds{0, 5})
		h.change(k, Change{Collection: "d", Kind: config.CollectionDeque, Bounds: &Bounds{-2, 5}, Slots: slots(-1, -2)})
		h.wantBounds(h.store, k, "d", Bounds{-2, 5})
		if (Bounds{-2, 5}).Len() != 7 {
			h.t.Fatal("Len")
		}
		h.wantSlots(h.store, k, "d", Range{-2, 5}, Forward, 100, -2, -1, 0, 1, 2, 3, 4)
		h.wantSlots(h.store, k, "d", Range{-2, 5}, Backward, 100, 4, 3, 2, 1, 0, -1, -2)
		h.wantSlots(h.store, k, "d", Range{-2, 5}, Forward, 3, -2, -1, 0)
		h.wantSlots(h.store, k, "d", Range{-2, 5}, Backward, 3, 4, 3, 2)
		h.wantSlots(h.store, k, "d", Range{-1, 2}, Forward, 100, -1, 0, 1)
		h.wantSlots(h.store, k, "d", Range{-1, 2}, Backward, 100, 1, 0, -1)
		h.wantSlots(h.store, k, "d", Range{3, 3}, Forward, 100)
		h.wantSlots(h.store, k, "d", Range{4, 2}, Backward, 100)
		// Pop two from the front, drop the back one (a capacity).
		h.change(k, Change{Collection: "d", Kind: config.CollectionDeque, Bounds: &Bounds{0, 4}, Drops: []Range{{-2, 0}, {4, 5}}})
		h.wantBounds(h.store, k, "d", Bounds{0, 4})
		h.wantSlots(h.store, k, "d", Range{math.MinInt64, math.MaxInt64}, Forward, 100, 0, 1, 2, 3)
		h.wantSlots(h.store, k, "d", Range{math.MinInt64, math.MaxInt64}, Backward, 100, 3, 2, 1, 0)
		// Extreme indices keep their numeric order.
		far := []int64{math.MinInt64, -1 << 40, -256, 255, 256, 1 << 40, math.MaxInt64 - 1}
		h.change(k, Change{Collection: "far", Kind: config.CollectionDeque, Bounds: &Bounds{math.MinInt64, math.MaxInt64}, Slots: slots(far...)})
		h.wantSlots(h.store, k, "far", Range{math.MinInt64, math.MaxInt64}, Forward, 100, far...)
		rev := slices.Clone(far)
		slices.Reverse(rev)
		h.wantSlots(h.store, k, "far", Range{math.MinInt64, math.MaxInt64}, Backward, 100, rev...)
		h.wantSlots(h.store, k, "far", Range{-256, 256}, Forward, 100, -256, 255)
		h.wantBounds(h.store, k, "far", Bounds{math.MinInt64, math.MaxInt64})
		// Dropping and writing one slot in one write keeps the write.
		h.change(k, Change{Collection: "d", Kind: config.CollectionDeque, Drops: []Range{{0, 4}}, Slots: slots(2)})
		h.wantSlots(h.store, k, "d", Range{-10, 10}, Forward, 100, 2)
		h.change(k, Change{Collection: "d", Kind: config.CollectionDeque, Clear: true})
		h.wantBounds(h.store, k, "d", Bounds{})
		h.wantSlots(h.store, k, "d", Range{math.MinInt64, math.MaxInt64}, Forward, 100)
	}},
	{"rows expire after their TTL", func(h *harness) {
		k := h.key("k")
		const ttl = 2 * time.Second
		h.apply(k, Write{Changes: []Change{
			{Collection: "v", Kind: config.CollectionValue, TTL: ttl, Value: []byte("short")},
			{Collection: "m", Kind: config.CollectionMap, TTL: ttl, Puts: []Entry{{Key: "a", Value: []byte("1")}}},
			{Collection: "d", Kind: config.CollectionDeque, TTL: ttl, Bounds: &Bounds{0, 1}, Slots: slots(0)},
			{Collection: "forever", Kind: config.CollectionValue, Value: []byte("stays")},
		}, Marker: &Marker{Source: "t/0", Offset: 1}})
		h.apply(k, Write{Changes: []Change{
			{Collection: "m2", Kind: config.CollectionMap, TTL: ttl, Puts: []Entry{{Key: "b", Value: []byte("2")}}},
		}, Marker: &Marker{Source: "t/1", Offset: 9, TTL: ttl}})
		// Read everything once, so a cache holds it.
		h.wantValue(h.store, k, "v", []byte("short"), true)
		h.wantMap(h.store, k, "m", map[string]string{"a": "1"})
		h.wantBounds(h.store, k, "d", Bounds{0, 1})
		h.wantApplied(h.store, k, "t/1", 9, true)
		h.expire(ttl, "rows with a TTL to expire", func() bool {
			_, ok, err := h.store.Value(h.ctx, k, "v")
			h.check(err, "Value")
			got := h.mapGet(h.store, k, "m", "a")
			b, err := h.store.DequeBounds(h.ctx, k, "d")
			h.check(err, "DequeBounds")
			sl, err := h.store.DequeSlots(h.ctx, k, "d", Range{0, 1}, Forward, 1)
			h.check(err, "DequeSlots")
			sc := h.scanAll(h.store, k, "m2", Forward, 10, false)
			_, marked, err := h.store.Applied(h.ctx, k, "t/1")
			h.check(err, "Applied")
			return !ok && got[0] == nil && b == (Bounds{}) && len(sl) == 0 && len(sc) == 0 && !marked
		})
		h.wantValue(h.store, k, "forever", []byte("stays"), true)
		// The first write's marker has no TTL.
		h.wantApplied(h.store, k, "t/0", 1, true)
	}},
	{"a marker lives exactly its own TTL", func(h *harness) {
		k := h.key("k")
		const ttl = 2 * time.Second
		// A marked write of a long-lived collection, then one of a short-
		// lived collection from the same source: the second marker keeps
		// the TTL it was given (none), not one derived from its changes,
		// so the first write stays protected.
		h.apply(k, Write{Changes: []Change{valueChange("long", "x")}, Marker: &Marker{Source: "t/0", Offset: 1}})
		h.apply(k, Write{Changes: []Change{{Collection: "short", Kind: config.CollectionValue, TTL: ttl, Value: []byte("y")}},
			Marker: &Marker{Source: "t/0", Offset: 2}})
		// A marker with a TTL expires although its changes do not.
		h.apply(k, Write{Changes: []Change{valueChange("long", "z")}, Marker: &Marker{Source: "t/1", Offset: 5, TTL: ttl}})
		// And a marker alone can carry one.
		h.apply(k, Write{Marker: &Marker{Source: "t/2", Offset: 7, TTL: ttl}})
		h.wantApplied(h.store, k, "t/1", 5, true)
		h.wantApplied(h.store, k, "t/2", 7, true)
		h.expire(ttl, "markers with a TTL to expire", func() bool {
			_, ok, err := h.store.Value(h.ctx, k, "short")
			h.check(err, "Value")
			_, m1, err := h.store.Applied(h.ctx, k, "t/1")
			h.check(err, "Applied")
			_, m2, err := h.store.Applied(h.ctx, k, "t/2")
			h.check(err, "Applied")
			return !ok && !m1 && !m2
		})
		h.wantApplied(h.store, k, "t/0", 2, true)
		h.wantValue(h.store, k, "long", []byte("z"), true)
		for _, ttl := range []time.Duration{-time.Second, maxTTL + time.Second} {
			if err := h.store.Apply(h.ctx, k, Write{Marker: &Marker{Source: "t/3", Offset: 1, TTL: ttl}}); err == nil {
				h.t.Fatalf("a marker with TTL %v was accepted", ttl)
			}
		}
	}},
	{"markers", func(h *harness) {
		k := h.key("k")
		h.wantApplied(h.store, k, "orders/3", 0, false)
		h.apply(k, Write{Changes: []Change{valueChange("v", "x")}, Marker: &Marker{Source: "orders/3", Offset: 41}})
		h.wantApplied(h.store, k, "orders/3", 41, true)
		h.apply(k, Write{Changes: []Change{valueChange("v", "y")}, Marker: &Marker{Source: "orders/3", Offset: 42}})
		h.wantApplied(h.store, k, "orders/3", 42, true)
		// A write of no changes may carry a marker alone.
		h.apply(k, Write{Marker: &Marker{Source: "orders/4", Offset: 0}})
		h.wantApplied(h.store, k, "orders/4", 0, true)
		h.wantApplied(h.store, k, "orders/3", 42, true)
		h.wantApplied(h.store, h.key("other"), "orders/3", 0, false)
		if err := h.store.Apply(h.ctx, k, Write{Changes: []Change{valueChange("", "x")}}); err == nil {
			h.t.Fatal("a change to the collection named \"\" was accepted")
		}
		if err := h.store.Apply(h.ctx, k, Write{Changes: []Change{{Collection: "x", Kind: "list"}}}); err == nil {
			h.t.Fatal("a change of unknown kind was accepted")
		}
	}},
	{"leases only rise", func(h *harness) {
		if _, ok, err := h.store.Lease(h.ctx, h.ns, "t/0"); err != nil || ok {
			h.t.Fatalf("Lease before any = %v, %v", ok, err)
		}
		for _, step := range []struct{ set, want int64 }{{10, 10}, {5, 10}, {10, 10}, {11, 11}, {0, 11}, {1 << 40, 1 << 40}} {
			h.check(h.store.SetLease(h.ctx, h.ns, "t/0", step.set), "SetLease")
			if got, ok, err := h.store.Lease(h.ctx, h.ns, "t/0"); err != nil || !ok || got != step.want {
				h.t.Fatalf("after SetLease(%d): Lease = %d, %v, %v; want %d", step.set, got, ok, err, step.want)
			}
		}
		if _, ok, err := h.store.Lease(h.ctx, h.ns, "t/1"); err != nil || ok {
			h.t.Fatalf("Lease of another source = %v, %v", ok, err)
		}
		if _, ok, err := h.store.Lease(h.ctx, h.ns+"x", "t/0"); err != nil || ok {
			h.t.Fatalf("Lease of another namespace = %v, %v", ok, err)
		}
	}},
	{"register keeps the older schema", func(h *harness) {
		got, err := h.store.Collections(h.ctx, h.ns)
		h.check(err, "Collections")
		if len(got) != 0 {
			h.t.Fatalf("Collections of a new namespace = %v", got)
		}
		a := Schema{Name: "cart", Kind: config.CollectionMap, Payload: config.PayloadJSON}
		if s, err := h.store.Register(h.ctx, h.ns, a); err != nil || s != a {
			h.t.Fatalf("Register = %+v, %v; want %+v", s, err, a)
		}
		b := Schema{Name: "cart", Kind: config.CollectionDeque, Payload: config.PayloadMessage}
		if s, err := h.store.Register(h.ctx, h.ns, b); err != nil || s != a {
			h.t.Fatalf("conflicting Register = %+v, %v; want the older %+v", s, err, a)
		}
		c := Schema{Name: "total", Kind: config.CollectionValue, Payload: config.PayloadJSON}
		if s, err := h.store.Register(h.ctx, h.ns, c); err != nil || s != c {
			h.t.Fatalf("Register = %+v, %v", s, err)
		}
		got, err = h.store.Collections(h.ctx, h.ns)
		h.check(err, "Collections")
		if len(got) != 2 || got["cart"] != a || got["total"] != c {
			h.t.Fatalf("Collections = %+v", got)
		}
		if other, err := h.store.Collections(h.ctx, h.ns+"x"); err != nil || len(other) != 0 {
			h.t.Fatalf("Collections of another namespace = %+v, %v", other, err)
		}
	}},
	{"routes", func(h *harness) {
		sub := h.ns // subsystems are unique per case too
		if _, ok, err := h.store.Route(h.ctx, sub, "cart"); err != nil || ok {
			h.t.Fatalf("Route before any = %v, %v", ok, err)
		}
		r := Route{Subsystem: sub, Collection: "cart", Namespace: "group-a", Topic: "orders", Kind: config.CollectionMap, Payload: config.PayloadJSON}
		h.check(h.store.SetRoute(h.ctx, r), "SetRoute")
		wantRoute := func(want Route, wantOK bool) {
			h.t.Helper()
			got, ok, err := h.store.Route(h.ctx, sub, "cart")
			h.check(err, "Route")
			if ok != wantOK || (ok && got != want) {
				h.t.Fatalf("Route = %+v, %v; want %+v, %v", got, ok, want, wantOK)
			}
		}
		wantRoute(r, true)
		r2 := r
		r2.Namespace, r2.Topic, r2.Kind = "group-b", "orders-v2", config.CollectionValue
		h.check(h.store.SetRoute(h.ctx, r2), "SetRoute replacing")
		wantRoute(r2, true)
		// The old owner's delete must not remove the new owner's route.
		h.check(h.store.DeleteRoute(h.ctx, sub, "cart", "group-a"), "DeleteRoute")
		wantRoute(r2, true)
		h.check(h.store.DeleteRoute(h.ctx, sub, "cart", "group-b"), "DeleteRoute")
		wantRoute(Route{}, false)
		h.check(h.store.DeleteRoute(h.ctx, sub, "cart", "group-b"), "DeleteRoute of nothing")
		h.check(h.store.SetRoute(h.ctx, r), "SetRoute after delete")
		wantRoute(r, true)
		// A route may name no topic; replacing one clears it.
		r3 := r
		r3.Topic = ""
		h.check(h.store.SetRoute(h.ctx, r3), "SetRoute without a topic")
		wantRoute(r3, true)
	}},
	{"persists across a second store", func(h *harness) {
		k := h.key("k")
		h.apply(k, Write{Changes: []Change{
			valueChange("v", "kept"),
			mapPuts("m", "a", "1"),
			{Collection: "d", Kind: config.CollectionDeque, Bounds: &Bounds{-1, 1}, Slots: slots(-1, 0)},
		}, Marker: &Marker{Source: "t/0", Offset: 7}})
		h.check(h.store.SetLease(h.ctx, h.ns, "t/0", 9), "SetLease")
		s := Schema{Name: "m", Kind: config.CollectionMap, Payload: config.PayloadJSON}
		_, err := h.store.Register(h.ctx, h.ns, s)
		h.check(err, "Register")
		other := h.open(h.t)
		h.wantValue(other, k, "v", []byte("kept"), true)
		h.wantMap(other, k, "m", map[string]string{"a": "1"})
		h.wantBounds(other, k, "d", Bounds{-1, 1})
		h.wantSlots(other, k, "d", Range{-1, 1}, Forward, 10, -1, 0)
		h.wantApplied(other, k, "t/0", 7, true)
		if high, ok, err := other.Lease(h.ctx, h.ns, "t/0"); err != nil || !ok || high != 9 {
			h.t.Fatalf("Lease in the second store = %d, %v, %v", high, ok, err)
		}
		if got, err := other.Collections(h.ctx, h.ns); err != nil || got["m"] != s {
			h.t.Fatalf("Collections in the second store = %+v, %v", got, err)
		}
	}},
	{"a write too large for one batch is applied whole", func(h *harness) {
		k := h.key("big")
		h.change(k, mapPuts("m", "stale", "x"))
		w := largeWrite(1200, 100)
		h.apply(k, w)
		h.wantLargeWrite(h.store, k, 1200, 100)
		h.wantMap(h.store, k, "m", nil, "stale")
		pending, err := h.store.Pending(h.ctx, h.ns)
		h.check(err, "Pending")
		if len(pending) != 0 {
			h.t.Fatalf("Pending after a successful large write = %d records", len(pending))
		}
	}},
	{"an item over MaxItemSize is refused before anything is written", func(h *harness) {
		k := h.key("k")
		big := bytes.Repeat([]byte("x"), MaxItemSize+1)
		for _, tc := range []struct {
			what string
			ch   Change
		}{
			{"value", Change{Collection: "huge", Kind: config.CollectionValue, Value: big}},
			{"map entry", Change{Collection: "huge", Kind: config.CollectionMap,
				Puts: []Entry{{Key: "small", Value: []byte("1")}, {Key: "k", Value: big[:MaxItemSize]}}}},
			{"deque slot", Change{Collection: "huge", Kind: config.CollectionDeque, Bounds: &Bounds{0, 2},
				Slots: []Slot{{Index: 0, Value: []byte("1")}, {Index: 1, Value: big}}}},
		} {
			// A small change of the same write goes first: it must not
			// land either.
			err := h.store.Apply(h.ctx, k, Write{Changes: []Change{valueChange("v", tc.what), tc.ch},
				Marker: &Marker{Source: "t/0", Offset: 1}})
			if !fault.IsPermanent(err) {
				h.t.Fatalf("%s of %d bytes: Apply = %v, want a permanent error", tc.what, MaxItemSize+1, err)
			}
			if msg := err.Error(); !strings.Contains(msg, `"huge"`) || !strings.Contains(msg, fmt.Sprint(MaxItemSize+1)) {
				h.t.Fatalf("%s: the error %q names neither the collection nor the size", tc.what, msg)
			}
			h.wantValue(h.store, k, "v", nil, false)
			h.wantApplied(h.store, k, "t/0", 0, false)
		}
		h.wantValue(h.store, k, "huge", nil, false)
		h.wantMap(h.store, k, "huge", nil, "small", "k")
		h.wantBounds(h.store, k, "huge", Bounds{})
		pending, err := h.store.Pending(h.ctx, h.ns)
		h.check(err, "Pending")
		if len(pending) != 0 {
			h.t.Fatalf("a refused write left %d pending records", len(pending))
		}
		// Items of exactly MaxItemSize are fine.
		h.change(k, Change{Collection: "v", Kind: config.CollectionValue, Value: big[:MaxItemSize]},
			Change{Collection: "m", Kind: config.CollectionMap, Puts: []Entry{{Key: "k", Value: big[:MaxItemSize-1]}}})
		v, ok, err := h.store.Value(h.ctx, k, "v")
		h.check(err, "Value")
		if !ok || len(v) != MaxItemSize {
			h.t.Fatalf("value of MaxItemSize bytes read back as %d bytes, %v", len(v), ok)
		}
		if got := h.mapGet(h.store, k, "m", "k"); len(got[0]) != MaxItemSize-1 {
			h.t.Fatalf("map entry of MaxItemSize bytes read back as %d bytes", len(got[0]))
		}
	}},
	{"namespaces and keys are isolated", func(h *harness) {
		keys := []Key{h.key("a"), h.key("b"), {Namespace: h.ns + "-other", Key: "a"}, h.key(""), {Namespace: h.ns, Key: "a\x00b"}, {Namespace: h.ns + "a", Key: ""}}
		for i, k := range keys {
			v := fmt.Sprint(i)
			h.apply(k, Write{Changes: []Change{
				valueChange("v", v), mapPuts("m", "e", v),
				{Collection: "d", Kind: config.CollectionDeque, Bounds: &Bounds{0, int64(i + 1)}},
			}, Marker: &Marker{Source: "t/0", Offset: int64(i)}})
		}
		for i, k := range keys {
			v := fmt.Sprint(i)
			h.wantValue(h.store, k, "v", []byte(v), true)
			h.wantMap(h.store, k, "m", map[string]string{"e": v})
			h.wantBounds(h.store, k, "d", Bounds{0, int64(i + 1)})
			h.wantApplied(h.store, k, "t/0", int64(i), true)
			if got := h.scanAll(h.store, k, "m", Forward, 10, false); len(got) != 1 {
				h.t.Fatalf("key %+v: scan = %+v", k, got)
			}
		}
		h.change(keys[0], Change{Collection: "m", Kind: config.CollectionMap, Clear: true})
		h.wantMap(h.store, keys[0], "m", nil, "e")
		h.wantMap(h.store, keys[1], "m", map[string]string{"e": "1"})
		h.wantMap(h.store, keys[2], "m", map[string]string{"e": "2"})
	}},
}

func head(s []string) []string { return s[:min(len(s), 5)] }

// largeWrite is n map entries of size bytes each, a value, a deque and a
// marker: over the default batch limit whenever n*size is.
func largeWrite(n, size int) Write {
	ch := Change{Collection: "m", Kind: config.CollectionMap, Clear: true}
	for i := range n {
		ch.Puts = append(ch.Puts, Entry{Key: fmt.Sprintf("e%05d", i), Value: bytes.Repeat([]byte{byte('a' + i%26)}, size)})
	}
	return Write{Changes: []Change{
		ch,
		valueChange("v", "large"),
		{Collection: "d", Kind: config.CollectionDeque, Bounds: &Bounds{0, 2}, Slots: slots(0, 1)},
	}, Marker: &Marker{Source: "big/0", Offset: 77}}
}

func (h *harness) wantLargeWrite(s Store, k Key, n, size int) {
	h.t.Helper()
	got := h.scanAll(s, k, "m", Forward, 256, false)
	if len(got) != n {
		h.t.Fatalf("large map has %d entries, want %d", len(got), n)
	}
	for i, e := range got {
		if e.Key != fmt.Sprintf("e%05d", i) || !bytes.Equal(e.Value, bytes.Repeat([]byte{byte('a' + i%26)}, size)) {
			h.t.Fatalf("entry %d = %q (%d bytes)", i, e.Key, len(e.Value))
		}
	}
	h.wantValue(s, k, "v", []byte("large"), true)
	h.wantBounds(s, k, "d", Bounds{0, 2})
	h.wantSlots(s, k, "d", Range{0, 2}, Forward, 10, 0, 1)
	h.wantApplied(s, k, "big/0", 77, true)
}
