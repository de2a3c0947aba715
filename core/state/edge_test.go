package state

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/fault"
	"github.com/prosody-events/prosody-go/core/internal/invocation"
	"github.com/prosody-events/prosody-go/core/statestore"
)

// fakeClock is a clock a test steps by hand.
type fakeClock struct{ now atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.now.Store(time.Unix(1_700_000_000, 0).UnixNano())
	return c
}

func (c *fakeClock) Now() time.Time          { return time.Unix(0, c.now.Load()) }
func (c *fakeClock) advance(d time.Duration) { c.now.Add(int64(d)) }
func (c *fakeClock) store() statestore.Store { return statestore.NewMemoryClock(c.Now) }
func fixtureOf(t *testing.T, store statestore.Store, defs ...config.StateCollection) *fixture {
	t.Helper()
	svc := NewService(store, "group", "", defs, true, nil)
	ctx := context.Background()
	check(t, svc.Register(ctx, []string{"topic"}))
	return &fixture{t: t, store: store, svc: svc, p: must(svc.Partition(ctx, "topic", 0))}
}

// Items of a deque with a TTL expire one by one (each write refreshes the
// bounds, not the older items): once an old item is gone, Len counts and
// PopFront reaches only the items still there.
func TestDequeItemsExpireOneByOne(t *testing.T) {
	clock := newFakeClock()
	f := fixtureOf(t, clock.store(),
		config.StateCollection{Name: "q", Kind: config.CollectionDeque, Payload: config.PayloadJSON, TTL: config.Some(time.Second)})
	pushExpiring(t, f, clock)
	d := f.attempt("k").deque("q")
	n := must(d.Len())
	v, ok, err := d.PopFront()
	if err != nil || n != 1 || !ok || string(v) != `"b"` {
		t.Errorf("Len %d and PopFront %s %v %v with one live item left", n, v, ok, err)
	}
}

// Model-checked map scans across chunk boundaries, staged puts/removes,
// clears and both directions.
func TestMapScanFuzz(t *testing.T) {
	for seed := 0; seed < 40; seed++ {
		store := statestore.NewMemory()
		f := newFixture(t, store)
		model := map[string]string{}
		r := newRand(uint64(seed))
		a := f.attempt("k")
		m := a.mapOf("m")
		for i := 0; i < 600; i++ {
			k := keyN(r.IntN(900))
			check(t, m.Set(k, []byte(`1`)))
			model[k] = "1"
		}
		a.succeed(int64(seed))
		b := f.attempt("k")
		m = b.mapOf("m")
		if seed%5 == 0 {
			check(t, m.Clear())
			model = map[string]string{}
		}
		for i := 0; i < 400; i++ {
			k := keyN(r.IntN(900))
			if r.IntN(2) == 0 {
				check(t, m.Remove(k))
				delete(model, k)
			} else {
				check(t, m.Set(k, []byte(`2`)))
				model[k] = "2"
			}
		}
		for _, dir := range []statestore.Direction{statestore.Forward, statestore.Backward} {
			cur := must(m.Scan(dir, false))
			var got []Item
			for {
				ch := must(cur.Next())
				if ch == nil {
					break
				}
				if len(ch) > ChunkSize {
					t.Fatal("chunk too big")
				}
				got = append(got, ch...)
			}
			if len(got) != len(model) {
				t.Fatalf("seed %d dir %d: %d items, want %d", seed, dir, len(got), len(model))
			}
			for i, it := range got {
				if model[it.Key] != string(it.Value) {
					t.Fatalf("seed %d: %q = %s, want %s", seed, it.Key, it.Value, model[it.Key])
				}
				if i > 0 && !before(dir, got[i-1].Key, it.Key) {
					t.Fatalf("seed %d: out of order at %d", seed, i)
				}
			}
		}
		b.fail()
	}
}

func newRand(s uint64) *rand.Rand { return rand.New(rand.NewPCG(s, 99)) }
func keyN(n int) string           { return fmt.Sprintf("k%04d", n) }

func TestDequeCommitRollbackFuzz(t *testing.T) {
	for _, name := range []string{"d", "capped"} {
		for seed := uint64(0); seed < 30; seed++ {
			f := newFixture(t, statestore.NewMemory())
			limit := 0
			if name == "capped" {
				limit = 3
			}
			rng := newRand(seed)
			var committed []string
			n := 0
			for round := 0; round < 15; round++ {
				a := f.attempt("k")
				d := a.deque(name)
				q := &dequeModel{t: t, d: d, view: slices.Clone(committed), limit: limit}
				last := slices.Clone(committed) // at the last handle commit
				for range 40 {
					n++
					v := strconv.Itoa(n)
					switch r := rng.IntN(16); {
					case r < 4:
						q.pushBack(v)
					case r < 6:
						q.pushFront(v)
					case r < 8:
						q.popFront()
					case r < 10:
						q.popBack()
					case r < 11:
						q.clear()
					case r < 13:
						check(t, d.Commit())
						last = slices.Clone(q.view)
					case r < 14:
						check(t, d.Rollback())
						q.view = slices.Clone(last)
					default:
						checkDeque(t, d, q.view)
					}
				}
				view := q.view
				checkDeque(t, d, view)
				if rng.IntN(3) == 0 {
					a.fail()
					committed = last
				} else {
					a.succeed(int64(round))
					committed = view
				}
				checkDeque(t, f.attempt("k").deque(name), committed)
			}
		}
	}
}

// Keyed state is kept per topic: the same key on two topics of one group
// (whose partitions run it concurrently) has two states, and neither
// attempt's increment is lost.
func TestStateIsPerTopic(t *testing.T) {
	store := statestore.NewMemory()
	f := newFixture(t, store)
	ctx := context.Background()
	pb := must(f.svc.Partition(ctx, "other-topic", 0))
	a := f.attempt("k")
	b := &attempt{f: &fixture{t: t, store: store, svc: f.svc, p: pb}, ctx: nil}
	b.ctx = invocationFor(pb, "k")
	incr := func(x *attempt) {
		v := x.value("counter")
		item, ok, _ := v.Get()
		n := 0
		if ok {
			n, _ = strconv.Atoi(string(item))
		}
		check(t, v.Set([]byte(strconv.Itoa(n+1))))
	}
	incr(a)
	incr(b) // concurrently, on the other topic's partition
	a.succeed(1)
	b.succeed(1)
	if got := f.attempt("k").get("counter"); got != "1" {
		t.Errorf("the first topic's count is %s, want 1", got)
	}
	if got := (&attempt{f: b.f, ctx: invocationFor(pb, "k")}).get("counter"); got != "1" {
		t.Errorf("the other topic's count is %s, want 1", got)
	}
}

func invocationFor(p *Partition, key string) *invocation.Context {
	ctx := invocation.NewContext(context.Background(), key)
	ctx.SetEnv(&invocation.Env{State: p}, nil)
	return ctx
}

// A key's marker lives as long as the longest lived collection it
// protects: a later marked write of only a short-lived collection must not
// let the marker of an earlier write to a lasting one expire.
func TestMarkerOutlivesAShortLivedWrite(t *testing.T) {
	clock := newFakeClock()
	f := fixtureOf(t, clock.store(),
		config.StateCollection{Name: "forever", Kind: config.CollectionValue, Payload: config.PayloadJSON},
		config.StateCollection{Name: "short", Kind: config.CollectionValue, Payload: config.PayloadJSON, TTL: config.Some(time.Second)})
	a := f.attempt("k")
	check(t, a.value("forever").Set([]byte("1")))
	a.succeed(10)
	b := f.attempt("k")
	check(t, b.value("short").Set([]byte("1")))
	b.succeed(11)
	clock.advance(2 * time.Second)
	if got := f.attempt("k").get("short"); got != "<absent>" {
		t.Fatalf("the short-lived value is still there: %s", got)
	}
	if !must(f.p.Applied(context.Background(), "k", 10)) {
		t.Error("offset 10's non-TTL write is no longer marked applied after offset 11's TTL'd marker expired")
	}
}

// A handler whose writes all went through an explicit Commit succeeds
// with nothing left staged, and is still marked applied, so that its
// redelivery does not apply again.
func TestExplicitCommitIsMarked(t *testing.T) {
	f := newFixture(t, statestore.NewMemory())
	a := f.attempt("k")
	v := a.value("counter")
	check(t, v.Set([]byte("1")))
	check(t, v.Commit())
	a.succeed(3)
	if !must(f.p.Applied(context.Background(), "k", 3)) {
		t.Error("a succeeded message whose writes were committed explicitly is not marked applied")
	}
}

// An entry the store would refuse as too large (its key counts with its
// item) is refused when it is staged, as permanent; and a permanent
// failure of the store keeps its class through the state error, so that
// the event is not retried, or deferred, for ever (found in review).
func TestOversizeEntriesArePermanent(t *testing.T) {
	f := newFixture(t, statestore.NewMemory())
	a := f.attempt("k")
	key := strings.Repeat("k", 600<<10)
	item := []byte(`"` + strings.Repeat("v", 600<<10) + `"`)
	err := a.mapOf("m").Set(key, item)
	if !errors.Is(err, ErrTooLarge) || fault.ClassOf(err) != fault.ClassPermanent {
		t.Fatalf("Set of a %d-byte entry: %v (class %v), want ErrTooLarge, permanent", len(key)+len(item), err, fault.ClassOf(err))
	}
	for _, c := range []struct {
		cause error
		want  fault.Class
	}{
		{errors.New("timeout"), fault.ClassTransient},
		{fault.Permanent(errors.New("refused")), fault.ClassPermanent},
		{fault.Terminal(errors.New("undecodable row")), fault.ClassTransient},
	} {
		err := storeError("apply", c.cause)
		if fault.ClassOf(err) != c.want || !errors.Is(err, ErrStore) || !errors.Is(err, c.cause) {
			t.Errorf("storeError(%v): class %v, is ErrStore %v, want class %v", c.cause, fault.ClassOf(err), errors.Is(err, ErrStore), c.want)
		}
	}
}

// Readers of one collection share the cache, and each answers from it
// only within its own read_cache window: a reader with a short one does
// not get what a reader with a long one cached an hour's worth ago
// (found in review).
func TestReadersKeepTheirOwnCacheWindow(t *testing.T) {
	store := statestore.NewMemory()
	defs := []config.StateCollection{{Name: "order", Kind: config.CollectionValue, Payload: config.PayloadJSON, Published: true}}
	f := publishing(t, store, defs)
	ctx := context.Background()
	a := f.attempt("o1")
	check(t, a.value("order").Set([]byte(`"v1"`)))
	a.succeed(0)
	rs := must(NewReaders(store, 1<<20, 0))
	defer rs.Close()
	long := rs.Open("checkout", "order", config.CollectionValue, config.Some(time.Hour))
	short := rs.Open("checkout", "order", config.CollectionValue, config.Some(20*time.Millisecond))
	must2(t)(long.Value(ctx, "o1"))
	rs.cache.Wait()
	b := f.attempt("o1")
	check(t, b.value("order").Set([]byte(`"v2"`)))
	b.succeed(1)
	time.Sleep(200 * time.Millisecond) // ten of the short reader's windows: what the test is about
	if got, _ := must2(t)(short.Value(ctx, "o1")); string(got) != `"v2"` {
		t.Errorf("the 20 ms reader read %s 200 ms after v2 was committed, from the 1 h reader's cache", got)
	}
}

// A reader's deque answers come from one state of the deque: bounds from
// its cache that the deque has moved past since are not combined with a
// slot read now (found in review: the front of a deque that was never
// empty read as absent, or as an item that was never at the front).
func TestReaderDequeAnswersAreNotTorn(t *testing.T) {
	store := statestore.NewMemory()
	defs := []config.StateCollection{{Name: "log", Kind: config.CollectionDeque, Payload: config.PayloadJSON, Published: true}}
	f := publishing(t, store, defs)
	ctx := context.Background()
	a := f.attempt("o1")
	for _, s := range []string{`"a"`, `"b"`, `"c"`} {
		check(t, a.deque("log").PushBack([]byte(s)))
	}
	a.succeed(0)
	rs := must(NewReaders(store, 1<<20, time.Minute))
	defer rs.Close()
	r := rs.Open("checkout", "log", config.CollectionDeque, config.None[time.Duration]())
	if n := must(r.Len(ctx, "o1")); n != 3 {
		t.Fatalf("length %d, want 3", n)
	}
	rs.cache.Wait() // the bounds [a b c] are cached
	b := f.attempt("o1")
	d := b.deque("log")
	if _, _, err := d.PopFront(); err != nil {
		t.Fatal(err)
	}
	check(t, d.PushBack([]byte(`"d"`)))
	check(t, d.PushFront([]byte(`"x"`)))
	check(t, d.PushFront([]byte(`"y"`)))
	b.succeed(1) // [y x b c d]: slot 0, the cached head, now holds x
	for _, read := range []struct {
		name string
		get  func() ([]byte, bool, error)
		want []string // the answers of one state or the other
	}{
		{"front", func() ([]byte, bool, error) { return r.PeekFront(ctx, "o1") }, []string{`"a"`, `"y"`}},
		{"index 0", func() ([]byte, bool, error) { return r.DequeGet(ctx, "o1", 0) }, []string{`"a"`, `"y"`}},
		{"index 2", func() ([]byte, bool, error) { return r.DequeGet(ctx, "o1", 2) }, []string{`"c"`, `"b"`}},
		{"back", func() ([]byte, bool, error) { return r.PeekBack(ctx, "o1") }, []string{`"c"`, `"d"`}},
	} {
		v, ok, err := read.get()
		if err != nil || !ok || !slices.Contains(read.want, string(v)) {
			t.Errorf("%s: %s %v %v, want one of %v", read.name, v, ok, err, read.want)
		}
	}
}

// An item expired at the front of a deque whose items expire is passed
// over by the reader's front, as by the owner's.
func TestReaderFrontPassesOverExpiredItems(t *testing.T) {
	clock := newFakeClock()
	store := clock.store()
	defs := []config.StateCollection{{Name: "q", Kind: config.CollectionDeque, Payload: config.PayloadJSON, Published: true, TTL: config.Some(time.Second)}}
	f := publishing(t, store, defs)
	ctx := context.Background()
	pushExpiring(t, f, clock)
	rs := must(NewReaders(store, 1<<20, 0))
	defer rs.Close()
	r := rs.Open("checkout", "q", config.CollectionDeque, config.None[time.Duration]())
	owner, _, err := f.attempt("k").deque("q").PeekFront()
	check(t, err)
	if v, ok, err := r.PeekFront(ctx, "k"); err != nil || !ok || string(v) != string(owner) {
		t.Fatalf("reader's front %s %v %v, owner's %s", v, ok, err, owner)
	}
}

// pushExpiring leaves key k's deque q, whose items live a second,
// holding "a", expired, then "b", not.
func pushExpiring(t *testing.T, f *fixture, clock *fakeClock) {
	t.Helper()
	a := f.attempt("k")
	check(t, a.deque("q").PushBack([]byte(`"a"`)))
	a.succeed(0)
	clock.advance(600 * time.Millisecond)
	b := f.attempt("k")
	check(t, b.deque("q").PushBack([]byte(`"b"`)))
	b.succeed(1)
	clock.advance(700 * time.Millisecond)
}

// pendingStore lists cut-short writes it was given and records which are
// settled.
type pendingStore struct {
	statestore.Store
	pending []statestore.Pending
	settled []string // their keys
}

func (s *pendingStore) Pending(context.Context, string) ([]statestore.Pending, error) {
	return s.pending, nil
}

func (s *pendingStore) Settle(_ context.Context, p statestore.Pending) error {
	s.settled = append(s.settled, p.Key.Key)
	return nil
}

// A partition's opening settles the cut-short writes of its own source and
// those with no marker (a timer's, a handle's Commit) of its topic, whose
// partition the record does not name; not another partition's, nor
// another topic's (found in review: the writes with no marker were left to
// the recovery sweep, and their keys ran on half-applied state until it).
func TestOpeningAPartitionSettlesItsTopicsUnmarkedWrites(t *testing.T) {
	store := &pendingStore{Store: statestore.NewMemory(), pending: []statestore.Pending{
		{Key: statestore.Key{Namespace: "group", Key: "topic\x00mine"}, Source: "topic/0"},
		{Key: statestore.Key{Namespace: "group", Key: "topic\x00unmarked"}},
		{Key: statestore.Key{Namespace: "group", Key: "topic\x00theirs"}, Source: "topic/1"},
		{Key: statestore.Key{Namespace: "group", Key: "other\x00unmarked"}},
	}}
	svc := NewService(store, "group", "", nil, true, nil)
	must(svc.Partition(context.Background(), "topic", 0))
	if want := []string{"topic\x00mine", "topic\x00unmarked"}; !slices.Equal(store.settled, want) {
		t.Fatalf("settled %q, want %q", store.settled, want)
	}
}
