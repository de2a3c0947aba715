package statestore

import (
	"bytes"
	"errors"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/fault"
	"github.com/prosody-events/prosody-go/core/internal/cassandratest"
	"github.com/prosody-events/prosody-go/core/internal/testservices"
)

// cassandraEnv creates a fresh keyspace, dropped when the test ends, and
// returns an opener that connects a new session (closed at test end) each
// time.
func cassandraEnv(t testing.TB, opts ...CassandraOption) func(t testing.TB) *cassandraStore {
	t.Helper()
	o := cassandratest.Keyspace(t, "state")
	return func(t testing.TB) *cassandraStore {
		return NewCassandra(cassandratest.Connect(t, o), opts...).(*cassandraStore)
	}
}

func cassandraBackend(cacheBytes int64) backend {
	name := "cassandra"
	if cacheBytes > 0 {
		name = "cassandra+cached"
	}
	return backend{name: name, env: func(t *testing.T) func(t *testing.T) Store {
		open := cassandraEnv(t)
		return func(t *testing.T) Store { return cachedFor(t, open(t), cacheBytes) }
	}}
}

func TestCassandraConformance(t *testing.T) {
	runConformance(t, cassandraBackend(0), conformanceCases)
}

func TestCassandraCachedConformance(t *testing.T) {
	runConformance(t, cassandraBackend(testCacheBytes), conformanceCases)
}

var errCrash = errors.New("simulated crash")

// A large write interrupted after some of its parts is listed by Pending,
// and Settle completes it without overwriting rows written after it.
func TestCassandraSettlesAnInterruptedLargeWrite(t *testing.T) {
	for _, cacheBytes := range []int64{0, testCacheBytes} {
		t.Run(map[bool]string{false: "plain", true: "cached"}[cacheBytes > 0], func(t *testing.T) {
			raw := cassandraEnv(t, WithBatchLimit(4<<10))(t)
			store := cachedFor(t, raw, cacheBytes)
			h := &harness{t: t, ctx: testCtx(t), store: store, ns: testservices.UniqueName("ns")}
			// Kafka keys and map keys are arbitrary bytes: the record must
			// keep them as they are.
			k := h.key("\xff\xfek")
			h.change(k, mapPuts("m", "e00000", "old", "gone", "x"), mapPuts("bin", "\xfe", "removed"))
			h.wantMap(store, k, "m", map[string]string{"e00000": "old", "gone": "x"})

			const n, size = 300, 100
			w := largeWrite(n, size)
			w.Changes = append(w.Changes, Change{Collection: "bin", Kind: config.CollectionMap,
				Puts: []Entry{{Key: "\xff", Value: []byte("binary")}}, Removes: []string{"\xfe"}})
			raw.afterPart = func(part int) error {
				if part == 1 {
					return errCrash
				}
				return nil
			}
			// Part 1 fails every time, so settling at once fails too.
			var pe *PartialWriteError
			if err := store.Apply(h.ctx, k, w); !errors.Is(err, errCrash) || !errors.As(err, &pe) {
				t.Fatalf("interrupted Apply = %v, want a PartialWriteError of the crash", err)
			}
			raw.afterPart = nil
			// The marker goes in the last part: not applied.
			h.wantApplied(store, k, "big/0", 0, false)
			if got := h.scanAll(store, k, "m", Forward, 256, true); len(got) == 0 || len(got) >= n {
				t.Fatalf("after two parts the map has %d entries; want some, not all", len(got))
			}

			// Newer writes to a row of an applied part and of a part not
			// applied yet.
			h.change(k, mapPuts("m", "e00000", "newer-first", "e00299", "newer-last"))

			pending, err := store.Pending(h.ctx, h.ns)
			h.check(err, "Pending")
			if len(pending) != 1 {
				t.Fatalf("Pending = %d records, want 1", len(pending))
			}
			p := pending[0]
			if !reflect.DeepEqual(p, pe.Pending) {
				t.Fatalf("Pending lists %+v, the PartialWriteError holds %+v", p, pe.Pending)
			}
			if p.Key != k || p.Source != "big/0" || !reflect.DeepEqual(p.Write, w) {
				t.Fatalf("Pending record = key %+v, source %q, write equal %v", p.Key, p.Source, reflect.DeepEqual(p.Write, w))
			}
			if age := time.Since(p.Written); age < 0 || age > time.Minute {
				t.Fatalf("Pending written %v ago", age)
			}
			for range 2 { // settling again changes nothing
				h.check(store.Settle(h.ctx, p), "Settle")
			}
			pending, err = store.Pending(h.ctx, h.ns)
			h.check(err, "Pending")
			if len(pending) != 0 {
				t.Fatalf("Pending after Settle = %d records", len(pending))
			}
			h.wantMap(store, k, "m", map[string]string{"e00000": "newer-first", "e00299": "newer-last"}, "gone")
			got := h.scanAll(store, k, "m", Forward, 256, false)
			if len(got) != n {
				t.Fatalf("settled map has %d entries, want %d", len(got), n)
			}
			h.wantValue(store, k, "v", []byte("large"), true)
			h.wantBounds(store, k, "d", Bounds{0, 2})
			h.wantApplied(store, k, "big/0", 77, true)
			h.wantMap(store, k, "bin", map[string]string{"\xff": "binary"}, "\xfe", "\ufffd")
		})
	}
}

// A record whose header never made it was abandoned before anything of
// the write was applied: Pending skips it, and removes it once it is old.
func TestCassandraPendingDropsAbandonedRecords(t *testing.T) {
	raw := cassandraEnv(t)(t)
	ctx := testCtx(t)
	ns := testservices.UniqueName("ns")
	id := gocql.UUIDFromTime(time.Now())
	if err := raw.s.Query(ctx, raw.q.insertPending, ns, id, 1, []byte("{")).Exec(); err != nil {
		t.Fatal(err)
	}
	count := func() int {
		var n int
		if err := raw.s.Query(ctx, `SELECT COUNT(*) FROM `+raw.s.Keyspace()+`.state_pending WHERE namespace = ?`, ns).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if p, err := raw.Pending(ctx, ns); err != nil || len(p) != 0 {
		t.Fatalf("Pending = %+v, %v; want none", p, err)
	}
	if count() != 1 {
		t.Fatal("a fresh headerless record was removed")
	}
	raw.clock = func() time.Time { return time.Now().Add(2 * sinceRecorded) }
	if p, err := raw.Pending(ctx, ns); err != nil || len(p) != 0 {
		t.Fatalf("Pending = %+v, %v; want none", p, err)
	}
	if n := count(); n != 0 {
		t.Fatalf("an abandoned record kept %d rows", n)
	}
}

// Settle re-applies with TTLs shortened by the record's age, and skips
// puts whose TTL has run out meanwhile.
func TestCassandraSettleShortensTTLs(t *testing.T) {
	raw := cassandraEnv(t, WithBatchLimit(1<<10))(t)
	h := &harness{t: t, ctx: testCtx(t), store: raw, ns: testservices.UniqueName("ns")}
	k := h.key("k")
	w := largeWrite(40, 100)
	w.Changes[0].TTL = time.Hour
	w.Changes[1].TTL = 10 * time.Minute
	w.Marker.TTL = 2 * time.Hour
	raw.afterPart = func(int) error { return errCrash }
	if err := raw.Apply(h.ctx, k, w); !errors.Is(err, errCrash) {
		t.Fatalf("Apply = %v", err)
	}
	raw.afterPart = nil
	pending, err := raw.Pending(h.ctx, h.ns)
	if err != nil || len(pending) != 1 {
		t.Fatalf("Pending = %d, %v", len(pending), err)
	}
	raw.clock = func() time.Time { return time.Now().Add(30 * time.Minute) }
	h.check(raw.Settle(h.ctx, pending[0]), "Settle")
	var ttl int
	if err := raw.s.Query(h.ctx, `SELECT TTL(value) FROM `+raw.s.Keyspace()+`.state_entries WHERE namespace = ? AND key = ? AND collection = 'm' AND item = ?`,
		k.Namespace, k.Key, []byte("e00039")).Scan(&ttl); err != nil {
		t.Fatal(err)
	}
	if ttl > 1800 || ttl < 1700 {
		t.Fatalf("settled entry TTL = %d s, want about 1800", ttl)
	}
	h.wantValue(raw, k, "v", nil, false)
	// The marker keeps its own TTL, shortened like the rest.
	h.wantApplied(raw, k, "big/0", 77, true)
	if err := raw.s.Query(h.ctx, `SELECT TTL(value) FROM `+raw.s.Keyspace()+`.state_entries WHERE namespace = ? AND key = ? AND collection = '' AND item = ?`,
		k.Namespace, k.Key, []byte("big/0")).Scan(&ttl); err != nil {
		t.Fatal(err)
	}
	if ttl > 5400 || ttl < 5300 {
		t.Fatalf("settled marker TTL = %d s, want about 5400", ttl)
	}
}

// state_pending is one partition per namespace, read whole by Pending,
// and every settled record leaves a tombstone: they must not be kept for
// the default ten days.
func TestCassandraPendingTombstonesAreShortLived(t *testing.T) {
	raw := cassandraEnv(t)(t)
	ctx := testCtx(t)
	var grace int
	if err := raw.s.Query(ctx, `SELECT gc_grace_seconds FROM system_schema.tables WHERE keyspace_name = ? AND table_name = 'state_pending'`,
		raw.s.Keyspace()).Scan(&grace); err != nil {
		t.Fatal(err)
	}
	if grace != 3600 {
		t.Fatalf("state_pending gc_grace_seconds = %d, want 3600", grace)
	}
}

// push is one attempt's PushBack(item) of a deque, as the state package
// computes it from the committed bounds: over a 4 KiB batch limit, it is
// applied in three parts (bounds, slot, marker).
func push(h *harness, s Store, k Key) Write {
	h.t.Helper()
	b, err := s.DequeBounds(h.ctx, k, "d")
	h.check(err, "DequeBounds")
	item := bytes.Repeat([]byte("x"), 5000)
	nb := Bounds{b.Head, b.Tail + 1}
	return Write{Changes: []Change{{Collection: "d", Kind: config.CollectionDeque, Bounds: &nb,
		Slots: []Slot{{Index: b.Tail, Value: item}}}}, Marker: &Marker{Source: "t/0", Offset: 9}}
}

// wantPushedOnce checks that the deque holds exactly one pushed item, its
// marker is in, and no record is pending.
func wantPushedOnce(h *harness, s Store, k Key) {
	h.t.Helper()
	b, err := s.DequeBounds(h.ctx, k, "d")
	h.check(err, "DequeBounds")
	sl, err := s.DequeSlots(h.ctx, k, "d", Range{b.Head, b.Tail}, Forward, 10)
	h.check(err, "DequeSlots")
	if b != (Bounds{0, 1}) || len(sl) != 1 || len(sl[0].Value) != 5000 {
		h.t.Fatalf("deque bounds %+v, %d slots; want one pushed item", b, len(sl))
	}
	h.wantApplied(s, k, "t/0", 9, true)
	pending, err := s.Pending(h.ctx, h.ns)
	h.check(err, "Pending")
	if len(pending) != 0 {
		h.t.Fatalf("%d records pending", len(pending))
	}
}

func storeVariants(t *testing.T, run func(t *testing.T, raw *cassandraStore, h *harness)) {
	for _, cacheBytes := range []int64{0, testCacheBytes} {
		t.Run(map[bool]string{false: "plain", true: "cached"}[cacheBytes > 0], func(t *testing.T) {
			raw := cassandraEnv(t, WithBatchLimit(4<<10))(t)
			run(t, raw, &harness{t: t, ctx: testCtx(t), store: cachedFor(t, raw, cacheBytes), ns: testservices.UniqueName("ns")})
		})
	}
}

// A part that fails once is not left half-applied for the caller's retry
// to run on: Apply settles the write at once, and it is applied whole.
func TestCassandraLargeWriteFailureIsSettledAtOnce(t *testing.T) {
	storeVariants(t, func(t *testing.T, raw *cassandraStore, h *harness) {
		k := h.key("k")
		var failed atomic.Bool
		raw.afterPart = func(part int) error {
			if part == 0 && !failed.Swap(true) {
				return errCrash
			}
			return nil
		}
		h.check(h.store.Apply(h.ctx, k, push(h, h.store, k)), "Apply with a failing part")
		if !failed.Load() {
			t.Fatal("no part failed")
		}
		wantPushedOnce(h, h.store, k)
	})
}

// When settling at once fails too, Apply says the write is half applied
// and hands over its record, with which Settle completes it later.
func TestCassandraLargeWriteLeftHalfAppliedIsReported(t *testing.T) {
	storeVariants(t, func(t *testing.T, raw *cassandraStore, h *harness) {
		k := h.key("\xff\xfek")
		w := push(h, h.store, k)
		raw.afterPart = func(int) error { return errCrash }
		err := h.store.Apply(h.ctx, k, w)
		raw.afterPart = nil
		var pe *PartialWriteError
		if !errors.As(err, &pe) || !errors.Is(err, errCrash) {
			t.Fatalf("Apply = %v, want a PartialWriteError of the crash", err)
		}
		if pe.Pending.Key != k || pe.Pending.Source != "t/0" || !reflect.DeepEqual(pe.Pending.Write, w) {
			t.Fatalf("PartialWriteError.Pending = key %q, source %q, write equal %v", pe.Pending.Key, pe.Pending.Source, reflect.DeepEqual(pe.Pending.Write, w))
		}
		if fault.ClassOf(err) != fault.ClassTransient {
			t.Fatalf("class %v, want transient", fault.ClassOf(err))
		}
		// Half applied: the bounds (part 0) are in, the marker is not.
		h.wantBounds(h.store, k, "d", Bounds{0, 1})
		h.wantApplied(h.store, k, "t/0", 0, false)
		pending, err := h.store.Pending(h.ctx, h.ns)
		h.check(err, "Pending")
		if len(pending) != 1 || pending[0].Key != k {
			t.Fatalf("Pending = %+v, want the write's record", pending)
		}
		h.check(h.store.Settle(h.ctx, pe.Pending), "Settle")
		wantPushedOnce(h, h.store, k)
	})
}

// The reply to the record's header may be lost although the header
// landed: the write may be pending then, and is treated as a failed
// part. Settling writes the header again first, so that a settle cut
// short leaves a record that Pending lists, whether or not the first
// header landed.
func TestCassandraLargeWriteWhoseRecordReplyIsLost(t *testing.T) {
	t.Run("settled at once", func(t *testing.T) {
		storeVariants(t, func(t *testing.T, raw *cassandraStore, h *harness) {
			k := h.key("k")
			raw.afterRecord = func(gocql.UUID) error { return errLost }
			h.check(h.store.Apply(h.ctx, k, push(h, h.store, k)), "Apply")
			wantPushedOnce(h, h.store, k)
		})
	})
	t.Run("header never landed, settle cut short", func(t *testing.T) {
		storeVariants(t, func(t *testing.T, raw *cassandraStore, h *harness) {
			k := h.key("k")
			raw.afterRecord = func(id gocql.UUID) error {
				if err := raw.s.Query(h.ctx, `DELETE FROM `+raw.s.Keyspace()+`.state_pending WHERE namespace = ? AND id = ? AND chunk = 0`,
					k.Namespace, id).Exec(); err != nil {
					t.Error(err)
				}
				return errLost
			}
			raw.afterPart = func(int) error { return errCrash }
			err := h.store.Apply(h.ctx, k, push(h, h.store, k))
			raw.afterRecord, raw.afterPart = nil, nil
			var pe *PartialWriteError
			if !errors.As(err, &pe) || !errors.Is(err, errLost) || !errors.Is(err, errCrash) {
				t.Fatalf("Apply = %v, want a PartialWriteError of both failures", err)
			}
			pending, err := h.store.Pending(h.ctx, h.ns)
			h.check(err, "Pending")
			if len(pending) != 1 {
				t.Fatalf("Pending = %d records, want the half-applied write's", len(pending))
			}
			h.check(h.store.Settle(h.ctx, pending[0]), "Settle")
			wantPushedOnce(h, h.store, k)
		})
	})
}
