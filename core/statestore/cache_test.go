package statestore

import (
	"context"
	"errors"
	"io"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prosody-events/prosody-go/core/config"
)

// probeStore is a memory store that counts the reads reaching it, can
// slow them down (so fills race with writes) and can fail an Apply after
// applying it (an outcome the caller cannot know).
type probeStore struct {
	*memoryStore
	reads     atomic.Int64
	yield     bool
	failAfter atomic.Bool
	// afterApply, when set, runs once an Apply is applied and before it
	// returns: what happens while the reply is on its way.
	afterApply func()
}

var errLost = errors.New("reply lost")

func newProbe() *probeStore { return &probeStore{memoryStore: newMemory(time.Now)} }

func (p *probeStore) slow() {
	if p.yield {
		for range 3 {
			runtime.Gosched()
		}
	}
}

func (p *probeStore) valueUntil(ctx context.Context, k Key, c string) ([]byte, bool, time.Time, error) {
	p.reads.Add(1)
	v, ok, exp, err := p.memoryStore.valueUntil(ctx, k, c)
	p.slow()
	return v, ok, exp, err
}

func (p *probeStore) mapGetUntil(ctx context.Context, k Key, c string, keys []string) ([][]byte, []time.Time, error) {
	p.reads.Add(1)
	v, exp, err := p.memoryStore.mapGetUntil(ctx, k, c, keys)
	p.slow()
	return v, exp, err
}

func (p *probeStore) boundsUntil(ctx context.Context, k Key, c string) (Bounds, time.Time, error) {
	p.reads.Add(1)
	b, exp, err := p.memoryStore.boundsUntil(ctx, k, c)
	p.slow()
	return b, exp, err
}

func (p *probeStore) Apply(ctx context.Context, k Key, w Write) error {
	if err := p.memoryStore.Apply(ctx, k, w); err != nil {
		return err
	}
	if p.afterApply != nil {
		p.afterApply()
	}
	if p.failAfter.Load() {
		return errLost
	}
	return nil
}

func newCachedProbe(t *testing.T) (*probeStore, *harness) {
	p := newProbe()
	c := cachedFor(t, p, testCacheBytes)
	return p, &harness{t: t, ctx: testCtx(t), store: c, ns: "ns"}
}

// waitCached reads until the cache answers (ristretto admits a new entry
// asynchronously), failing if it never does.
func waitCached(h *harness, p *probeStore, read func()) {
	h.t.Helper()
	for range 1000 {
		before := p.reads.Load()
		read()
		if p.reads.Load() == before {
			return
		}
		time.Sleep(time.Millisecond)
	}
	h.t.Fatal("the cache never answered")
}

func TestCacheWritesThrough(t *testing.T) {
	p, h := newCachedProbe(t)
	k := h.key("k")
	h.change(k, valueChange("v", "1"), mapPuts("m", "a", "1"),
		Change{Collection: "d", Kind: config.CollectionDeque, Bounds: &Bounds{0, 1}, Slots: slots(0)})
	waitCached(h, p, func() {
		h.wantValue(h.store, k, "v", []byte("1"), true)
		h.wantMap(h.store, k, "m", map[string]string{"a": "1"})
		h.wantBounds(h.store, k, "d", Bounds{0, 1})
	})
	// Absence is cached too.
	waitCached(h, p, func() { h.wantMap(h.store, k, "m", nil, "missing") })
	waitCached(h, p, func() { h.wantValue(h.store, k, "absent", nil, false) })
}

func TestCacheForgetsFailedWrites(t *testing.T) {
	p, h := newCachedProbe(t)
	k := h.key("k")
	h.change(k, valueChange("v", "old"), mapPuts("m", "a", "old"))
	waitCached(h, p, func() {
		h.wantValue(h.store, k, "v", []byte("old"), true)
		h.wantMap(h.store, k, "m", map[string]string{"a": "old"})
	})
	p.failAfter.Store(true)
	ch := mapPuts("m", "b", "new")
	ch.Clear = true
	if err := h.store.Apply(h.ctx, k, Write{Changes: []Change{valueChange("v", "new"), ch}}); !errors.Is(err, errLost) {
		t.Fatalf("Apply = %v", err)
	}
	p.failAfter.Store(false)
	// The write landed although it failed: the cache must not hide it.
	h.wantValue(h.store, k, "v", []byte("new"), true)
	h.wantMap(h.store, k, "m", map[string]string{"b": "new"}, "a")
}

func TestCacheForgetsANamespace(t *testing.T) {
	p, h := newCachedProbe(t)
	k, other := h.key("k"), Key{Namespace: "other", Key: "k"}
	for _, key := range []Key{k, other} {
		h.change(key, valueChange("v", "mine"))
		waitCached(h, p, func() { h.wantValue(h.store, key, "v", []byte("mine"), true) })
	}
	// Another process writes both keys behind the cache's back.
	for _, key := range []Key{k, other} {
		if err := p.memoryStore.Apply(h.ctx, key, Write{Changes: []Change{valueChange("v", "theirs")}}); err != nil {
			t.Fatal(err)
		}
	}
	h.wantValue(h.store, k, "v", []byte("mine"), true) // still cached: nothing told the cache
	h.store.(Forgetter).Forget(k.Namespace)
	h.wantValue(h.store, k, "v", []byte("theirs"), true)
	h.wantValue(h.store, other, "v", []byte("mine"), true)
}

// A write in flight when its namespace is forgotten belongs to the time
// before: what it wrote must not be cached as an answer of the time after,
// when another owner may have written the key since.
func TestCacheForgetDuringAWrite(t *testing.T) {
	p, h := newCachedProbe(t)
	k := h.key("k")
	p.afterApply = func() {
		h.store.(Forgetter).Forget(k.Namespace)
		// The partition's next owner writes the key.
		if err := p.memoryStore.Apply(h.ctx, k, Write{Changes: []Change{valueChange("v", "theirs"), mapPuts("m", "a", "theirs"),
			{Collection: "d", Kind: config.CollectionDeque, Bounds: &Bounds{0, 2}}}}); err != nil {
			t.Error(err)
		}
	}
	h.change(k, valueChange("v", "mine"), mapPuts("m", "a", "mine"),
		Change{Collection: "d", Kind: config.CollectionDeque, Bounds: &Bounds{0, 1}})
	p.afterApply = nil
	time.Sleep(10 * time.Millisecond) // let the cache admit whatever it was given
	for range 3 {
		h.wantValue(h.store, k, "v", []byte("theirs"), true)
		h.wantMap(h.store, k, "m", map[string]string{"a": "theirs"})
		h.wantBounds(h.store, k, "d", Bounds{0, 2})
	}
}

// TTL'd answers end with the row even when the cache holds them.
func TestCacheExpiresWithTheRow(t *testing.T) {
	clock := newFakeClock()
	mem := newMemory(clock.Now)
	c := cachedFor(t, mem, testCacheBytes)
	h := &harness{t: t, ctx: testCtx(t), store: c, clock: clock, ns: "ns"}
	k := h.key("k")
	h.change(k, Change{Collection: "v", Kind: config.CollectionValue, TTL: 10 * time.Second, Value: []byte("x")})
	// A fill carries the row's expiry too, not only a write-through.
	if err := mem.Apply(h.ctx, k, Write{Changes: []Change{{Collection: "w", Kind: config.CollectionValue, TTL: 10 * time.Second, Value: []byte("y")}}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	for range 3 {
		h.wantValue(c, k, "v", []byte("x"), true)
		h.wantValue(c, k, "w", []byte("y"), true)
	}
	clock.Advance(9 * time.Second)
	h.wantValue(c, k, "w", []byte("y"), true) // the fill holds until the row's end, not the write-through's
	clock.Advance(time.Second)
	h.wantValue(c, k, "v", nil, false)
	h.wantValue(c, k, "w", nil, false)
}

// Readers racing a writer of the same key never see an answer older than
// the last write that returned before they started reading, however
// fills and write-throughs interleave in the cache.
func TestCacheNeverGoesBackInTime(t *testing.T) {
	p := newProbe()
	p.yield = true
	c := Cached(p, testCacheBytes)
	defer c.(io.Closer).Close()
	ctx := testCtx(t)
	k := Key{Namespace: "ns", Key: "k"}

	const writes = 3000
	var committed atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	report := func(err error) {
		select {
		case errs <- err:
		default: // enough reported already
		}
	}
	check := func(what string, got []byte, present bool, floor int64) {
		if !present {
			if floor > 0 {
				report(errors.New(what + " absent after a write"))
			}
			return
		}
		n, err := strconv.ParseInt(string(got), 10, 64)
		if err != nil || n < floor {
			report(errors.New(what + " went back in time: " + string(got) + " < " + strconv.FormatInt(floor, 10)))
		}
	}
	// Readers are stopped before the test ends, however it ends.
	defer func() {
		stop.Store(true)
		wg.Wait()
	}()
	for range 4 {
		wg.Go(func() {
			for !stop.Load() {
				floor := committed.Load()
				v, ok, err := c.Value(ctx, k, "v")
				if err != nil {
					report(err)
					return
				}
				check("value", v, ok, floor)
				m, err := c.MapGet(ctx, k, "m", []string{"a"})
				if err != nil {
					report(err)
					return
				}
				check("map entry", m[0], m[0] != nil, floor)
				b, err := c.DequeBounds(ctx, k, "d")
				if err != nil {
					report(err)
					return
				}
				check("bounds", []byte(strconv.FormatInt(b.Tail, 10)), b.Tail != 0, floor)
			}
		})
	}
	for i := int64(1); i <= writes; i++ {
		s := strconv.FormatInt(i, 10)
		m := mapPuts("m", "a", s)
		m.Clear = i%7 == 0
		w := Write{Changes: []Change{valueChange("v", s), m,
			{Collection: "d", Kind: config.CollectionDeque, Bounds: &Bounds{0, i}}}}
		if err := c.Apply(ctx, k, w); err != nil {
			t.Fatal(err)
		}
		committed.Store(i)
		if i%100 == 0 {
			select {
			case err := <-errs:
				t.Fatal(err)
			default:
			}
		}
	}
	stop.Store(true)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
}
