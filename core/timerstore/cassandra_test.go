package timerstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/prosody-events/prosody-go/core/cassandra"
	"github.com/prosody-events/prosody-go/core/fault"
	"github.com/prosody-events/prosody-go/core/internal/cassandratest"
)

const testRetention = 24 * time.Hour

// cassandraEnv creates a fresh keyspace, dropped when the test ends, and
// returns an opener that connects a new session (closed at test end) each
// time.
func cassandraEnv(t *testing.T) func(t *testing.T) Store {
	t.Helper()
	opts := cassandratest.Keyspace(t, "timers")
	return func(t *testing.T) Store { return NewCassandra(cassandratest.Connect(t, opts), testRetention) }
}

func TestCassandraConformance(t *testing.T) { runConformance(t, cassandraEnv) }

// cassandraFixture is a store plus its session, for tests that look at the
// rows directly.
type cassandraFixture struct {
	s     *cassandra.Session
	store *cassandraStore
	ks    string
}

func newCassandraFixture(t *testing.T, retention time.Duration) cassandraFixture {
	open := cassandraEnv(t)
	st := open(t).(*cassandraStore)
	st.retention = retention
	return cassandraFixture{s: st.s, store: st, ks: st.s.Keyspace()}
}

func TestCassandraRowsCarryTTLs(t *testing.T) {
	f := newCassandraFixture(t, time.Hour)
	ctx := testCtx(t)
	seg, err := f.store.Segment(ctx, "g", "t", 0, 60)
	if err != nil {
		t.Fatal(err)
	}
	id := gocql.UUID(SegmentID("g", "t", 0))
	now := time.Now()
	at := TimeOf(now.Add(10 * time.Minute))
	slabEndTTL := int(slabEnd(SlabOf(at, 60), 60) - now.Unix() + 3600)
	timeTTL := int(int64(at) - now.Unix() + 3600)

	near := func(name string, got, want int) {
		t.Helper()
		if got < want-5 || got > want+1 {
			t.Errorf("%s TTL = %d, want about %d", name, got, want)
		}
	}
	ttlOf := func(stmt string, args ...any) int {
		t.Helper()
		var ttl *int
		if err := f.s.Query(ctx, stmt, args...).Scan(&ttl); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
		if ttl == nil {
			return 0
		}
		return *ttl
	}
	if err := seg.Add(ctx, Trigger{Key: "k", Time: at, Type: Application}); err != nil {
		t.Fatal(err)
	}
	near("slab index", ttlOf(`SELECT TTL(span) FROM `+f.ks+`.timer_typed_slabs WHERE segment_id = ? AND slab_size = 60 AND id = ?`,
		id, int32(SlabOf(at, 60))), slabEndTTL)
	near("inline state", ttlOf(`SELECT TTL(state[0]) FROM `+f.ks+`.timer_typed_keys WHERE segment_id = ? AND key = 'k'`, id), timeTTL)

	// Promotion: rows and marker live as long as the later timer.
	later := at + 600
	if err := seg.Add(ctx, Trigger{Key: "k", Time: later, Type: Application}); err != nil {
		t.Fatal(err)
	}
	near("promoted row", ttlOf(`SELECT TTL(span) FROM `+f.ks+`.timer_typed_keys WHERE segment_id = ? AND key = 'k' AND timer_type = 0 AND time = ?`,
		id, int32(at)), timeTTL+600)
	near("overflow marker", ttlOf(`SELECT TTL(state[0]) FROM `+f.ks+`.timer_typed_keys WHERE segment_id = ? AND key = 'k'`, id), timeTTL+600)

	// A timer in the past keeps its rows for the retention only.
	past := TimeOf(now.Add(-48 * time.Hour))
	if err := seg.Add(ctx, Trigger{Key: "p", Time: past, Type: Application}); err != nil {
		t.Fatal(err)
	}
	near("past state", ttlOf(`SELECT TTL(state[0]) FROM `+f.ks+`.timer_typed_keys WHERE segment_id = ? AND key = 'p'`, id), 3600)

	// Twenty years out: written without a TTL.
	far := TimeOf(now.Add(21 * 365 * 24 * time.Hour))
	if err := seg.Add(ctx, Trigger{Key: "f", Time: far, Type: Application}); err != nil {
		t.Fatal(err)
	}
	if got := ttlOf(`SELECT TTL(state[0]) FROM `+f.ks+`.timer_typed_keys WHERE segment_id = ? AND key = 'f'`, id); got != 0 {
		t.Errorf("far-future state TTL = %d, want none", got)
	}
}

// With a tiny retention, past timers vanish from every index (slab list
// included, whose TTL cannot be read directly).
func TestCassandraExpiredTimersVanish(t *testing.T) {
	f := newCassandraFixture(t, 2*time.Second)
	ctx := testCtx(t)
	seg, err := f.store.Segment(ctx, "g", "t", 0, 60)
	if err != nil {
		t.Fatal(err)
	}
	past := TimeOf(time.Now().Add(-time.Hour))
	for _, k := range []string{"a", "a", "b"} {
		if err := seg.Add(ctx, Trigger{Key: k, Time: past, Type: Application}); err != nil {
			t.Fatal(err)
		}
	}
	if err := seg.Add(ctx, Trigger{Key: "b", Time: past + 1, Type: Application}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3500 * time.Millisecond)
	slabs, err := seg.Slabs(ctx)
	if err != nil || len(slabs) != 0 {
		t.Fatalf("Slabs after expiry = %v, %v; want none", slabs, err)
	}
	triggers, err := seg.SlabTriggers(ctx, SlabOf(past, 60))
	if err != nil || len(triggers) != 0 {
		t.Fatalf("SlabTriggers after expiry = %v, %v", triggers, err)
	}
	for _, k := range []string{"a", "b"} {
		if ts, err := seg.KeyTimes(ctx, k, Application); err != nil || len(ts) != 0 {
			t.Fatalf("KeyTimes(%s) after expiry = %v, %v", k, ts, err)
		}
	}
	// The segment metadata has no TTL.
	if _, err := f.store.Segment(ctx, "g", "t", 0, 60); err != nil {
		t.Fatal(err)
	}
	var version int8
	if err := f.s.Query(ctx, `SELECT version FROM `+f.ks+`.timer_segments WHERE id = ? LIMIT 1`, gocql.UUID(SegmentID("g", "t", 0))).Scan(&version); err != nil || version != 3 {
		t.Fatalf("segment version = %d, %v", version, err)
	}
}

// The stored layout matches the original: segment metadata, u32 bits in int
// columns, and the inline / overflow forms of the key state.
func TestCassandraStoredLayout(t *testing.T) {
	f := newCassandraFixture(t, time.Hour)
	ctx := testCtx(t)
	seg, err := f.store.Segment(ctx, "grp", "top", 7, 3600)
	if err != nil {
		t.Fatal(err)
	}
	id := gocql.UUID(SegmentID("grp", "top", 7))
	var name string
	var size int32
	var version int8
	if err := f.s.Query(ctx, `SELECT name, slab_size, version FROM `+f.ks+`.timer_segments WHERE id = ? LIMIT 1`, id).
		Scan(&name, &size, &version); err != nil {
		t.Fatal(err)
	}
	if name != "grp:top/7" || size != 3600 || version != 3 {
		t.Fatalf("segment = (%q, %d, %d), want (grp:top/7, 3600, 3)", name, size, version)
	}

	high := Time(3_000_000_000) // beyond 2^31: stored negative
	span := map[string]string{"traceparent": "tp"}
	if err := seg.Add(ctx, Trigger{Key: "k", Time: high, Type: DeferredTimer, Span: span}); err != nil {
		t.Fatal(err)
	}
	var slabID int32
	if err := f.s.Query(ctx, `SELECT slab_id FROM `+f.ks+`.timer_segments WHERE id = ? AND slab_id = ?`, id, int32(SlabOf(high, 3600))).Scan(&slabID); err != nil {
		t.Fatalf("slab row: %v", err)
	}
	var state map[int8]keyTimerState
	var rows int
	readKey := func() {
		t.Helper()
		state = nil
		if err := f.s.Query(ctx, `SELECT state FROM `+f.ks+`.timer_typed_keys WHERE segment_id = ? AND key = 'k' LIMIT 1`, id).Scan(&state); err != nil && !errors.Is(err, gocql.ErrNotFound) {
			t.Fatal(err)
		}
		iter := f.s.Query(ctx, `SELECT time FROM `+f.ks+`.timer_typed_keys WHERE segment_id = ? AND key = 'k' AND timer_type = 2`, id).Iter()
		rows = iter.NumRows()
		if err := iter.Close(); err != nil {
			t.Fatal(err)
		}
	}
	readKey()
	if st := state[2]; !st.Inline || st.Time != int32(high) || st.Time >= 0 || st.Span["traceparent"] != "tp" || rows != 0 {
		t.Fatalf("one timer: state %+v with %d rows, want inline at %d and no rows", state, rows, int32(high))
	}
	if err := seg.Add(ctx, Trigger{Key: "k", Time: high + 1, Type: DeferredTimer}); err != nil {
		t.Fatal(err)
	}
	readKey()
	if st, ok := state[2]; !ok || st.Inline || rows != 2 {
		t.Fatalf("two timers: state %+v with %d rows, want overflow marker and 2 rows", state, rows)
	}
	if err := seg.Remove(ctx, "k", high, DeferredTimer); err != nil {
		t.Fatal(err)
	}
	readKey()
	if st := state[2]; !st.Inline || st.Time != int32(high+1) || rows != 0 {
		t.Fatalf("back to one: state %+v with %d rows, want inline and no rows", state, rows)
	}
	if err := seg.Remove(ctx, "k", high+1, DeferredTimer); err != nil {
		t.Fatal(err)
	}
	readKey()
	if _, ok := state[2]; ok || rows != 0 {
		t.Fatalf("none: state %+v with %d rows, want no entry", state, rows)
	}
}

// Segments written by the version 2 layout (typed tables, no state map) are
// upgraded on open so the state map describes every key.
func TestCassandraUpgradesVersion2Segments(t *testing.T) {
	f := newCassandraFixture(t, time.Hour)
	ctx := testCtx(t)
	id := gocql.UUID(SegmentID("g", "t", 0))
	ks := f.ks
	stmts := []struct {
		q    string
		args []any
	}{
		{`INSERT INTO ` + ks + `.timer_segments (id, name, slab_size, version) VALUES (?, 'g:t/0', 60, 2)`, []any{id}},
		{`INSERT INTO ` + ks + `.timer_segments (id, slab_id) VALUES (?, 0)`, []any{id}},
		{`INSERT INTO ` + ks + `.timer_typed_slabs (segment_id, slab_size, id, timer_type, key, time) VALUES (?, 60, 0, 0, 'one', 10)`, []any{id}},
		{`INSERT INTO ` + ks + `.timer_typed_slabs (segment_id, slab_size, id, timer_type, key, time) VALUES (?, 60, 0, 0, 'two', 10)`, []any{id}},
		{`INSERT INTO ` + ks + `.timer_typed_slabs (segment_id, slab_size, id, timer_type, key, time) VALUES (?, 60, 0, 0, 'two', 20)`, []any{id}},
		{`INSERT INTO ` + ks + `.timer_typed_keys (segment_id, key, timer_type, time) VALUES (?, 'one', 0, 10)`, []any{id}},
		{`INSERT INTO ` + ks + `.timer_typed_keys (segment_id, key, timer_type, time) VALUES (?, 'two', 0, 10)`, []any{id}},
		{`INSERT INTO ` + ks + `.timer_typed_keys (segment_id, key, timer_type, time) VALUES (?, 'two', 0, 20)`, []any{id}},
	}
	for _, s := range stmts {
		if err := f.s.Query(ctx, s.q, s.args...).Exec(); err != nil {
			t.Fatalf("%s: %v", s.q, err)
		}
	}
	seg, err := f.store.Segment(ctx, "g", "t", 0, 60)
	if err != nil {
		t.Fatal(err)
	}
	var version int8
	if err := f.s.Query(ctx, `SELECT version FROM `+ks+`.timer_segments WHERE id = ? LIMIT 1`, id).Scan(&version); err != nil || version != 3 {
		t.Fatalf("version = %d, %v; want 3", version, err)
	}
	for key, wantInline := range map[string]bool{"one": true, "two": false} {
		var state map[int8]keyTimerState
		if err := f.s.Query(ctx, `SELECT state FROM `+ks+`.timer_typed_keys WHERE segment_id = ? AND key = ? LIMIT 1`, id, key).Scan(&state); err != nil {
			t.Fatal(err)
		}
		if st, ok := state[0]; !ok || st.Inline != wantInline {
			t.Errorf("%s: state %+v, want inline=%v", key, state, wantInline)
		}
	}
	for key, want := range map[string][]Time{"one": {10}, "two": {10, 20}} {
		got, err := seg.KeyTimes(ctx, key, Application)
		if err != nil || len(got) != len(want) {
			t.Errorf("KeyTimes(%s) = %v, %v; want %v", key, got, err, want)
		}
	}
}

func TestCassandraRejectsUnknownSegmentVersion(t *testing.T) {
	f := newCassandraFixture(t, time.Hour)
	ctx := testCtx(t)
	id := gocql.UUID(SegmentID("g", "t", 0))
	if err := f.s.Query(ctx, `INSERT INTO `+f.ks+`.timer_segments (id, name, slab_size, version) VALUES (?, 'g:t/0', 60, 1)`, id).Exec(); err != nil {
		t.Fatal(err)
	}
	_, err := f.store.Segment(ctx, "g", "t", 0, 60)
	if err == nil || !fault.IsTerminal(err) || !strings.Contains(err.Error(), "version 1") {
		t.Fatalf("Segment on a version 1 segment: %v (class %v), want a terminal error naming the version", err, fault.ClassOf(err))
	}
}

// Failures are classified: a statement that no longer fits the schema is
// terminal (retrying cannot help), while a cancelled request is not.
func TestCassandraErrorsAreClassified(t *testing.T) {
	f := newCassandraFixture(t, time.Hour)
	ctx := testCtx(t)
	seg, err := f.store.Segment(ctx, "g", "t", 0, 60)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.s.Query(ctx, `DROP TABLE `+f.ks+`.timer_typed_keys`).Exec(); err != nil {
		t.Fatal(err)
	}
	err = seg.Add(ctx, Trigger{Key: "k", Time: 10, Type: Application})
	if err == nil || !fault.IsTerminal(err) {
		t.Fatalf("Add against a dropped table: %v (class %v), want terminal", err, fault.ClassOf(err))
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = seg.Slabs(cancelled)
	if err == nil || fault.IsTerminal(err) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Slabs with a cancelled context: %v (class %v), want a non-terminal context error", err, fault.ClassOf(err))
	}
}

// TestCassandraKeyCacheMatchesTheStore: a segment keeps the key index of
// the keys it touched in memory, so that a write needs no read first. After
// every operation of a random sequence (adds, removes, replacements and
// listings over a few keys and times, so keys move between the inline and
// overflow forms), what the cache holds for the key is what Cassandra
// holds, spans included, with a cache large enough for every key and with
// one that evicts all the time.
func TestCassandraKeyCacheMatchesTheStore(t *testing.T) {
	f := newCassandraFixture(t, testRetention)
	ctx := testCtx(t)
	for _, size := range []int{keyCacheSize, 1} {
		seg, err := f.store.Segment(ctx, "cache", "topic", int32(size), 60)
		if err != nil {
			t.Fatal(err)
		}
		cs := seg.(*cassandraSegment)
		cs.keys = newKeyCache(size)
		rng := rand.New(rand.NewPCG(1, uint64(size)))
		base := TimeOf(time.Now().Add(time.Hour))
		for step := 0; step < 300; step++ {
			key := fmt.Sprintf("k%d", rng.IntN(3))
			typ := []Type{Application, DeferredMessage}[rng.IntN(2)]
			at := base + Time(rng.IntN(4)*30)
			span := map[string]string{"traceparent": fmt.Sprint(step)}
			var op string
			switch rng.IntN(4) {
			case 0, 1:
				op, err = "add", cs.Add(ctx, Trigger{Key: key, Time: at, Type: typ, Span: span})
			case 2:
				op, err = "remove", cs.Remove(ctx, key, at, typ)
			default:
				op = "clear and schedule"
				_, err = cs.ClearAndSchedule(ctx, Trigger{Key: key, Time: at, Type: typ, Span: span})
			}
			if err != nil {
				t.Fatalf("step %d: %s: %v", step, op, err)
			}
			cached, ok, _ := cs.keys.begin(key, time.Now().Unix())
			if !ok {
				if size == keyCacheSize {
					t.Fatalf("step %d: %s %s: the key is not cached after a write", step, op, key)
				}
				continue
			}
			stored, err := cs.readKey(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			for _, ty := range []Type{Application, DeferredMessage} {
				cf, ce := cached.entries(ty)
				sf, se := stored.entries(ty)
				if cf != sf || !reflect.DeepEqual(ce, se) {
					t.Fatalf("step %d, after %s %s %d type %d: cache holds form %d %v, Cassandra form %d %v",
						step, op, key, at, ty, cf, ce, sf, se)
				}
			}
		}
	}
}

// TestCassandraClearAndScheduleManyTimers: replacing the timers of a key
// that has more than fit in one batch removes every one of them from the
// slab index and reports each; a replacement that failed part-way owes
// its old timers, and the next one removes and reports them too.
func TestCassandraClearAndScheduleManyTimers(t *testing.T) {
	f := newCassandraFixture(t, testRetention)
	ctx := testCtx(t)
	seg, err := f.store.Segment(ctx, "many", "topic", 0, 3600)
	if err != nil {
		t.Fatal(err)
	}
	base := TimeOf(time.Now().Add(time.Hour))
	const n = 3*unslabChunk + 5
	for i := 0; i < n; i++ {
		if err := seg.Add(ctx, Trigger{Key: "k", Time: base + Time(i), Type: Application}); err != nil {
			t.Fatal(err)
		}
	}
	removed, err := seg.ClearAndSchedule(ctx, Trigger{Key: "k", Time: base + n, Type: Application})
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != n {
		t.Fatalf("removed %d timers, want %d", len(removed), n)
	}
	left := 0
	slabs, err := seg.Slabs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, slab := range slabs {
		ts, err := seg.SlabTriggers(ctx, slab)
		if err != nil {
			t.Fatal(err)
		}
		left += len(ts)
	}
	if left != 1 {
		t.Fatalf("the slab index holds %d timers, want only the replacement", left)
	}

	// Owed timers of a failed replacement: still in the slab index, gone
	// from the key index.
	cs := seg.(*cassandraSegment)
	stray := base + 2*n
	if err := cs.addToSlab(ctx, cs.slabSize, Trigger{Key: "k", Time: stray, Type: Application}); err != nil {
		t.Fatal(err)
	}
	cs.owed[ownedKey{"k", Application}] = []Time{stray}
	removed, err = seg.ClearAndSchedule(ctx, Trigger{Key: "k", Time: base + n + 1, Type: Application})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(removed, []Time{base + n, stray}) {
		t.Fatalf("removed %v, want the previous timer and the owed one", removed)
	}
	if len(cs.owed) != 0 {
		t.Fatalf("still owed after a successful replacement: %v", cs.owed)
	}
	ts, err := seg.SlabTriggers(ctx, SlabOf(stray, cs.slabSize))
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range ts {
		if tr.Time == stray {
			t.Fatal("the owed timer is still in the slab index")
		}
	}
}
