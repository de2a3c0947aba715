package state

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/fault"
	"github.com/prosody-events/prosody-go/core/internal/invocation"
	"github.com/prosody-events/prosody-go/core/statestore"
)

// fixture is a partition's keyed state over a store, and a way to run
// attempts of one key against it.
type fixture struct {
	t     *testing.T
	store statestore.Store
	svc   *Service
	p     *Partition
}

func collections() []config.StateCollection {
	return []config.StateCollection{
		{Name: "counter", Kind: config.CollectionValue, Payload: config.PayloadJSON},
		{Name: "m", Kind: config.CollectionMap, Payload: config.PayloadJSON},
		{Name: "d", Kind: config.CollectionDeque, Payload: config.PayloadJSON},
		{Name: "capped", Kind: config.CollectionDeque, Payload: config.PayloadJSON, Capacity: config.Some[int64](3)},
		{Name: "msgs", Kind: config.CollectionDeque, Payload: config.PayloadMessage},
		{Name: "loose", Kind: config.CollectionValue, Payload: config.PayloadJSON, ReadUncommitted: true},
	}
}

func newFixture(t *testing.T, store statestore.Store) *fixture {
	t.Helper()
	return fixtureOf(t, store, collections()...)
}

// attempt is one attempt of an event of key: its context, and settling it.
type attempt struct {
	f   *fixture
	ctx *invocation.Context
}

func (f *fixture) attempt(key string) *attempt {
	ctx := invocation.NewContext(context.Background(), key)
	ctx.SetEnv(&invocation.Env{State: f.p}, nil)
	return &attempt{f: f, ctx: ctx}
}

func (a *attempt) ectx() *event.Context { return (*event.Context)(a.ctx) }

// succeed commits the attempt as the message at offset (-1: a timer).
func (a *attempt) succeed(offset int64) {
	a.f.t.Helper()
	if tx := a.f.p.Take(a.ctx); tx != nil {
		if err := tx.Commit(context.Background(), offset); err != nil {
			a.f.t.Fatalf("commit: %v", err)
		}
	}
	a.ctx.Invalidate()
}

func (a *attempt) fail() {
	if tx := a.f.p.Take(a.ctx); tx != nil {
		tx.Discard()
	}
	a.ctx.Invalidate()
}

// must returns v, panicking on err (the test then fails with the stack).
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (a *attempt) value(name string) *Value { return must(ValueOf(a.ectx(), name)) }
func (a *attempt) mapOf(name string) *Map   { return must(MapOf(a.ectx(), name)) }
func (a *attempt) deque(name string) *Deque { return must(DequeOf(a.ectx(), name)) }

func (a *attempt) get(name string) string {
	a.f.t.Helper()
	item, ok, err := a.value(name).Get()
	if err != nil {
		a.f.t.Fatal(err)
	}
	if !ok {
		return "<absent>"
	}
	return string(item)
}

func TestValueStagedCommittedDiscarded(t *testing.T) {
	f := newFixture(t, statestore.NewMemory())
	a := f.attempt("k")
	if got := a.get("counter"); got != "<absent>" {
		t.Fatalf("fresh value = %s", got)
	}
	if err := a.value("counter").Set([]byte("1")); err != nil {
		t.Fatal(err)
	}
	if got := a.get("counter"); got != "1" {
		t.Fatalf("own write not visible: %s", got)
	}
	a.succeed(0)

	b := f.attempt("k")
	if got := b.get("counter"); got != "1" {
		t.Fatalf("committed value = %s", got)
	}
	check(t, b.value("counter").Set([]byte("2")))
	b.fail()
	if got := f.attempt("k").get("counter"); got != "1" {
		t.Fatalf("a failed attempt's write is visible: %s", got)
	}
	if got := f.attempt("other").get("counter"); got != "<absent>" {
		t.Fatalf("keys are not isolated: %s", got)
	}

	c := f.attempt("k")
	check(t, c.value("counter").Clear())
	c.succeed(1)
	if got := f.attempt("k").get("counter"); got != "<absent>" {
		t.Fatalf("cleared value = %s", got)
	}
}

func TestCommitAndRollbackPerCollection(t *testing.T) {
	f := newFixture(t, statestore.NewMemory())
	a := f.attempt("k")
	v := a.value("counter")
	check(t, v.Set([]byte("10")))
	if err := v.Commit(); err != nil {
		t.Fatal(err)
	}
	check(t, v.Set([]byte("11")))
	check(t, v.Rollback())
	if got := a.get("counter"); got != "10" {
		t.Fatalf("after rollback = %s, want the committed 10", got)
	}
	check(t, a.mapOf("m").Set("x", []byte(`"staged"`)))
	a.fail()
	b := f.attempt("k")
	if got := b.get("counter"); got != "10" {
		t.Fatalf("an early commit did not survive the attempt's failure: %s", got)
	}
	if _, ok, _ := b.mapOf("m").Get("x"); ok {
		t.Fatal("an uncommitted map write survived the failure")
	}
}

func TestReadUncommittedIsWrittenWithoutMarker(t *testing.T) {
	f := newFixture(t, statestore.NewMemory())
	a := f.attempt("k")
	check(t, a.value("loose").Set([]byte("1")))
	a.succeed(5)
	if got := f.attempt("k").get("loose"); got != "1" {
		t.Fatalf("read_uncommitted value = %s", got)
	}
	if _, ok, _ := f.store.Applied(context.Background(), f.p.rowKey("k"), "topic/0"); ok {
		t.Fatal("an attempt that wrote only read_uncommitted state left a marker")
	}
}

func TestHandlesExpireWithTheirAttempt(t *testing.T) {
	f := newFixture(t, statestore.NewMemory())
	a := f.attempt("k")
	v := a.value("counter")
	d := a.deque("d")
	check(t, d.PushBack([]byte("1")))
	cur := must(d.Scan(statestore.Forward))
	a.succeed(0)
	checks := map[string]error{
		"set":  v.Set([]byte("1")),
		"get":  func() error { _, _, err := v.Get(); return err }(),
		"scan": func() error { _, err := cur.Next(); return err }(),
		"open": func() error { _, err := ValueOf(a.ectx(), "counter"); return err }(),
	}
	for name, err := range checks {
		if !errors.Is(err, ErrExpired) || fault.ClassOf(err) != fault.ClassTransient {
			t.Errorf("%s after the attempt: %v, want a transient ErrExpired", name, err)
		}
	}
}

func TestItemsAndRegistrationErrors(t *testing.T) {
	f := newFixture(t, statestore.NewMemory())
	a := f.attempt("k")
	tests := []struct {
		name  string
		err   error
		class error
	}{
		{"null", a.value("counter").Set([]byte(" null ")), ErrNullValue},
		{"not json", a.value("counter").Set([]byte("{")), ErrInvalidItem},
		{"json into a message collection", a.deque("msgs").PushBack([]byte(`{"a":1}`)), ErrInvalidItem},
		{"unregistered", func() error { _, err := ValueOf(a.ectx(), "nope"); return err }(), ErrUnregistered},
		{"wrong kind", func() error { _, err := MapOf(a.ectx(), "counter"); return err }(), ErrUnregistered},
	}
	for _, tc := range tests {
		if !errors.Is(tc.err, tc.class) {
			t.Errorf("%s: %v, want %v", tc.name, tc.err, tc.class)
		}
	}
	if !fault.IsPermanent(tests[3].err) || fault.IsPermanent(tests[0].err) {
		t.Error("unregistered must be permanent and null transient")
	}
	if _, err := ValueOf(event.NewContext(context.Background(), "k"), "counter"); !errors.Is(err, ErrNoState) {
		t.Errorf("a context without keyed state: %v", err)
	}
}

func TestDurableSchemaMismatchIsPermanent(t *testing.T) {
	store := statestore.NewMemory()
	newFixture(t, store)
	defs := []config.StateCollection{{Name: "counter", Kind: config.CollectionMap, Payload: config.PayloadJSON}}
	svc := NewService(store, "group", "", defs, true, nil)
	if err := svc.Register(context.Background(), []string{"topic"}); err != nil {
		t.Fatal(err)
	}
	p := must(svc.Partition(context.Background(), "topic", 0))
	ctx := invocation.NewContext(context.Background(), "k")
	ctx.SetEnv(&invocation.Env{State: p}, nil)
	_, err := MapOf((*event.Context)(ctx), "counter")
	if !errors.Is(err, ErrUnregistered) || !fault.IsPermanent(err) {
		t.Fatalf("a collection registered durably as a value, opened as a map: %v", err)
	}
}

func TestMessageItemsRoundTrip(t *testing.T) {
	f := newFixture(t, statestore.NewMemory())
	m := &event.Message{Topic: "t", Partition: 3, Offset: 42, Key: "k", Timestamp: time.UnixMilli(1700000000123),
		Payload: []byte(`{"x":[1,2]}`)}
	a := f.attempt("k")
	check(t, a.deque("msgs").PushBack(must(MessageItem(m))))
	a.succeed(0)
	item, ok := must2(t)(f.attempt("k").deque("msgs").PeekFront())
	if !ok {
		t.Fatal("no message")
	}
	got := must(DecodeMessage(item))
	if got.Topic != m.Topic || got.Partition != m.Partition || got.Offset != m.Offset || got.Key != m.Key ||
		!got.Timestamp.Equal(m.Timestamp) || string(got.Payload) != string(m.Payload) {
		t.Fatalf("round trip: %+v, want %+v", got, m)
	}
}

func must2(t *testing.T) func([]byte, bool, error) ([]byte, bool) {
	return func(b []byte, ok bool, err error) ([]byte, bool) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return b, ok
	}
}

// drain reads a cursor to the end, checking the chunk bound.
func drain(t *testing.T, c *Cursor) []Item {
	t.Helper()
	var all []Item
	for {
		chunk, err := c.Next()
		if err != nil {
			t.Fatal(err)
		}
		if chunk == nil {
			return all
		}
		if len(chunk) > ChunkSize {
			t.Fatalf("a chunk of %d items", len(chunk))
		}
		all = append(all, chunk...)
	}
}

// The map's view is checked against a plain Go map through attempts that
// commit or fail at random, scanned both ways over more than a chunk.
func TestMapAgainstModel(t *testing.T) {
	f := newFixture(t, statestore.NewMemory())
	rng := rand.New(rand.NewPCG(1, 2))
	committed := map[string]string{}
	for round := range 12 {
		a := f.attempt("k")
		m := a.mapOf("m")
		view := cloneMap(committed)
		for range 120 {
			k := fmt.Sprintf("k%03d", rng.IntN(400))
			switch r := rng.IntN(10); {
			case r < 6:
				v := strconv.Itoa(rng.IntN(1000))
				check(t, m.Set(k, []byte(v)))
				view[k] = v
			case r < 9:
				check(t, m.Remove(k))
				delete(view, k)
			case round == 7:
				check(t, m.Clear())
				clear(view)
			}
		}
		if round < 3 {
			for i := range 150 { // enough entries to span chunks
				k := fmt.Sprintf("bulk%03d", i)
				check(t, m.Set(k, []byte("0")))
				view[k] = "0"
			}
		}
		checkMap(t, m, view)
		if rng.IntN(3) == 0 {
			a.fail()
			continue
		}
		a.succeed(int64(round))
		committed = view
		checkMap(t, f.attempt("k").mapOf("m"), committed)
	}
}

func cloneMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func checkMap(t *testing.T, m *Map, want map[string]string) {
	t.Helper()
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, dir := range []statestore.Direction{statestore.Forward, statestore.Backward} {
		for _, keysOnly := range []bool{false, true} {
			got := drain(t, must(m.Scan(dir, keysOnly)))
			wantKeys := slices.Clone(keys)
			if dir == statestore.Backward {
				slices.Reverse(wantKeys)
			}
			gotKeys := make([]string, len(got))
			for i, it := range got {
				gotKeys[i] = it.Key
				if !keysOnly && string(it.Value) != want[it.Key] {
					t.Fatalf("scan value at %s = %s, want %s", it.Key, it.Value, want[it.Key])
				}
				if keysOnly && it.Value != nil {
					t.Fatal("a keys-only scan returned a value")
				}
			}
			if !slices.Equal(gotKeys, wantKeys) {
				t.Fatalf("scan (dir %d) returned %d keys, want %d (ordered, distinct)", dir, len(gotKeys), len(wantKeys))
			}
		}
	}
	probe := append(slices.Clone(keys[:min(5, len(keys))]), "absent", "absent")
	got := must(m.GetMany(probe))
	for i, k := range probe {
		if w, ok := want[k]; (got[i] != nil) != ok || (ok && string(got[i]) != w) {
			t.Fatalf("GetMany[%d] (%s) = %s, want %s", i, k, got[i], w)
		}
	}
}

// The deque is checked against a slice through attempts that commit or
// fail at random, with capacity on the capped collection.
func TestDequeAgainstModel(t *testing.T) {
	for _, name := range []string{"d", "capped"} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, statestore.NewMemory())
			limit := 0
			if name == "capped" {
				limit = 3
			}
			rng := rand.New(rand.NewPCG(3, 4))
			var committed []string
			n := 0
			for round := range 20 {
				a := f.attempt("k")
				d := a.deque(name)
				q := &dequeModel{t: t, d: d, view: slices.Clone(committed), limit: limit}
				for range 60 {
					n++
					v := strconv.Itoa(n)
					switch r := rng.IntN(13); {
					case r < 4:
						q.pushBack(v)
					case r < 6:
						q.pushFront(v)
					case r < 8:
						q.popFront()
					case r < 10:
						q.popBack()
					case r < 11:
						i := uint64(rng.IntN(len(q.view) + 2))
						got, ok := must2(t)(d.Get(i))
						if (int(i) < len(q.view)) != ok || (ok && string(got) != q.view[i]) {
							t.Fatalf("Get(%d) = %s %v, view %v", i, got, ok, q.view)
						}
					case r < 12:
						if round%5 == 4 {
							q.clear()
						}
					default:
						if got := must(d.Len()); got != uint64(len(q.view)) {
							t.Fatalf("Len = %d, want %d", got, len(q.view))
						}
					}
				}
				view := q.view
				if round == 2 && limit == 0 {
					for i := range 300 {
						check(t, d.PushBack([]byte(strconv.Itoa(100000+i))))
						view = append(view, strconv.Itoa(100000+i))
					}
				}
				checkDeque(t, d, view)
				if rng.IntN(3) == 0 {
					a.fail()
					continue
				}
				a.succeed(int64(round))
				committed = view
				checkDeque(t, f.attempt("k").deque(name), committed)
			}
		})
	}
}

// dequeModel runs operations on a deque handle and on a slice of what it
// must hold, checking what pops return.
type dequeModel struct {
	t     *testing.T
	d     *Deque
	view  []string
	limit int // the collection's capacity, 0 for none
}

func (q *dequeModel) pushBack(v string) {
	check(q.t, q.d.PushBack([]byte(v)))
	q.view = append(q.view, v)
	if q.limit > 0 && len(q.view) > q.limit {
		q.view = q.view[1:]
	}
}

func (q *dequeModel) pushFront(v string) {
	check(q.t, q.d.PushFront([]byte(v)))
	q.view = append([]string{v}, q.view...)
	if q.limit > 0 && len(q.view) > q.limit {
		q.view = q.view[:q.limit]
	}
}

func (q *dequeModel) popFront() {
	got, ok := must2(q.t)(q.d.PopFront())
	checkEnd(q.t, "pop front", got, ok, q.view, true)
	if len(q.view) > 0 {
		q.view = q.view[1:]
	}
}

func (q *dequeModel) popBack() {
	got, ok := must2(q.t)(q.d.PopBack())
	checkEnd(q.t, "pop back", got, ok, q.view, false)
	if len(q.view) > 0 {
		q.view = q.view[:len(q.view)-1]
	}
}

func (q *dequeModel) clear() {
	check(q.t, q.d.Clear())
	q.view = nil
}

func checkEnd(t *testing.T, what string, got []byte, ok bool, view []string, front bool) {
	t.Helper()
	if len(view) == 0 {
		if ok {
			t.Fatalf("%s of an empty deque = %s", what, got)
		}
		return
	}
	want := view[len(view)-1]
	if front {
		want = view[0]
	}
	if !ok || string(got) != want {
		t.Fatalf("%s = %s %v, want %s", what, got, ok, want)
	}
}

func checkDeque(t *testing.T, d *Deque, want []string) {
	t.Helper()
	for _, dir := range []statestore.Direction{statestore.Forward, statestore.Backward} {
		var got []string
		for _, it := range drain(t, must(d.Scan(dir))) {
			got = append(got, string(it.Value))
		}
		w := slices.Clone(want)
		if dir == statestore.Backward {
			slices.Reverse(w)
		}
		if !slices.Equal(got, w) {
			t.Fatalf("scan (dir %d) = %v, want %v", dir, got, w)
		}
	}
	if n := must(d.Len()); n != uint64(len(want)) {
		t.Fatalf("Len = %d, want %d", n, len(want))
	}
}

func TestMarkersAndLease(t *testing.T) {
	store := statestore.NewMemory()
	f := newFixture(t, store)
	a := f.attempt("k")
	check(t, a.value("counter").Set([]byte("1")))
	a.succeed(7)
	ctx := context.Background()
	if applied := must(f.p.Applied(ctx, "k", 7)); !applied {
		t.Fatal("the committed message is not marked applied")
	}
	if applied := must(f.p.Applied(ctx, "k", 8)); applied {
		t.Fatal("a later message counts as applied")
	}
	// A timer's attempt leaves no marker.
	b := f.attempt("k")
	check(t, b.value("counter").Set([]byte("2")))
	b.succeed(-1)
	if !must(f.p.Applied(ctx, "k", 7)) {
		t.Fatal("the marker went away")
	}

	// The next owner of the partition checks offsets up to the lease.
	next := must(f.svc.Partition(ctx, "topic", 0))
	if !next.NeedsCheck("k", 7, false) || !next.NeedsCheck("x", 7+LeaseAhead, false) || next.NeedsCheck("x", 8+LeaseAhead, false) {
		t.Fatal("the next owner's check window is not [.., lease]")
	}
	if f.p.NeedsCheck("k", 8, false) {
		t.Fatal("the owner that wrote the lease checks its own first attempts")
	}
	if !f.p.NeedsCheck("k", 8, true) {
		t.Fatal("a retry is not checked")
	}
}

// publishing is a fixture of subsystem "checkout" with defs registered
// on partition 0 of "topic".
func publishing(t *testing.T, store statestore.Store, defs []config.StateCollection) *fixture {
	t.Helper()
	svc := NewService(store, "owners", "checkout", defs, true, nil)
	ctx := context.Background()
	check(t, svc.Register(ctx, []string{"topic"}))
	return &fixture{t: t, store: store, svc: svc, p: must(svc.Partition(ctx, "topic", 0))}
}

func TestReaderSeesCommittedStateOnly(t *testing.T) {
	store := statestore.NewMemory()
	defs := []config.StateCollection{
		{Name: "order", Kind: config.CollectionValue, Payload: config.PayloadJSON, Published: true},
		{Name: "lines", Kind: config.CollectionMap, Payload: config.PayloadJSON, Published: true},
		{Name: "log", Kind: config.CollectionDeque, Payload: config.PayloadJSON, Published: true},
	}
	f := publishing(t, store, defs)
	ctx := context.Background()

	a := f.attempt("o1")
	check(t, a.value("order").Set([]byte(`"open"`)))
	check(t, a.mapOf("lines").Set("sku", []byte("2")))
	check(t, a.deque("log").PushBack([]byte(`"created"`)))
	a.succeed(0)

	rs := must(NewReaders(store, 1<<20, 0))
	defer rs.Close()
	order := rs.Open("checkout", "order", config.CollectionValue, config.None[time.Duration]())
	lines := rs.Open("checkout", "lines", config.CollectionMap, config.None[time.Duration]())
	log := rs.Open("checkout", "log", config.CollectionDeque, config.None[time.Duration]())

	b := f.attempt("o1")
	check(t, b.value("order").Set([]byte(`"in flight"`)))
	if got, _ := must2(t)(order.Value(ctx, "o1")); string(got) != `"open"` {
		t.Fatalf("reader saw %s, want the committed value", got)
	}
	b.fail()
	if got := must(lines.MapGet(ctx, "o1", []string{"sku", "none"})); string(got[0]) != "2" || got[1] != nil {
		t.Fatalf("map read = %q", got)
	}
	if n := must(log.Len(ctx, "o1")); n != 1 {
		t.Fatalf("deque len = %d", n)
	}
	items := drain(t, must(lines.Scan(ctx, "o1", statestore.Forward, false)))
	if len(items) != 1 || items[0].Key != "sku" {
		t.Fatalf("map scan = %v", items)
	}
	wrong := rs.Open("checkout", "order", config.CollectionMap, config.None[time.Duration]())
	if _, err := wrong.MapGet(ctx, "o1", []string{"x"}); !errors.Is(err, ErrUnregistered) {
		t.Fatalf("reading a value as a map: %v", err)
	}
	if _, _, err := rs.Open("nobody", "order", config.CollectionValue, config.None[time.Duration]()).Value(ctx, "o1"); !errors.Is(err, ErrUnregistered) {
		t.Fatalf("an unknown subsystem: %v", err)
	}

	// Retiring: registered, not published, subsystem kept.
	defs[0].Published = false
	check(t, NewService(store, "owners", "checkout", defs, true, nil).Register(ctx, []string{"topic"}))
	if _, ok, _ := store.Route(ctx, "checkout", "order"); ok {
		t.Fatal("the retired collection's routing record is still there")
	}
}

// A host may read published state on its own threads while the client
// closes: reads racing Readers.Close neither panic (ristretto's own Close
// does under them) nor fail, and go on from the store once the cache is
// gone.
func TestReadersRacingClose(t *testing.T) {
	store := statestore.NewMemory()
	f := publishing(t, store, []config.StateCollection{{Name: "order", Kind: config.CollectionValue, Payload: config.PayloadJSON, Published: true}})
	ctx := context.Background()
	a := f.attempt("o1")
	check(t, a.value("order").Set([]byte(`"open"`)))
	a.succeed(0)

	for round := 0; round < 20; round++ {
		rs := must(NewReaders(store, 1<<20, time.Minute))
		order := rs.Open("checkout", "order", config.CollectionValue, config.None[time.Duration]())
		start := make(chan struct{})
		errs := make(chan error, 4)
		var wg sync.WaitGroup
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for i := 0; i < 200; i++ {
					got, ok, err := order.Value(ctx, "o1")
					if err != nil || !ok || string(got) != `"open"` {
						errs <- fmt.Errorf("read %q, %v, %v", got, ok, err)
						return
					}
				}
			}()
		}
		close(start)
		rs.Close()
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
}
