package dedupstore

import (
	"encoding/binary"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

func idOf(key, check uint64) ID {
	var id ID
	binary.LittleEndian.PutUint64(id[0:8], key)
	binary.LittleEndian.PutUint64(id[8:16], check)
	return id
}

// fakeClock is a Memory whose clock the test moves.
func fakeClock(ttl time.Duration) (Memory, *time.Time) {
	clock := time.Unix(1_000_000, 0)
	m := NewMemory(ttl)
	m.ids.now = func() time.Time { return clock }
	m.ids.epoch = clock
	return m, &clock
}

// TestMemoryAgainstAMap runs random records (with TTLs of their own, as
// clients of one process have), lookups and clock steps against a map of
// each key's latest record, which is what the store must answer like,
// through enough records to grow, sweep and shrink the tables.
func TestMemoryAgainstAMap(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		rng := rand.New(rand.NewPCG(seed, seed))
		m, clock := fakeClock(time.Hour)
		type record struct {
			check   uint64
			expires time.Time
		}
		model := map[uint64]record{}
		ttls := []time.Duration{0, time.Second, time.Minute, time.Hour}
		// Keys fall in two shards and a small range (key 0 among them), so
		// that keys come back, some with another check half (a collision
		// on the first half: the later record replaces the earlier).
		key := func() uint64 { return uint64(rng.IntN(40_000))<<5 | uint64(rng.IntN(2)) }
		check := func() uint64 { return uint64(rng.IntN(2)+1) << 40 }
		for op := range 300_000 {
			switch r := rng.IntN(100); {
			case r < 55:
				k, c, ttl := key(), check(), ttls[rng.IntN(len(ttls))]
				m.WithTTL(ttl).Put(idOf(k, c))
				model[k] = record{check: c, expires: clock.Add(ttl)}
			case r < 98:
				k, c := key(), check()
				rec, ok := model[k]
				want := ok && rec.check == c && clock.Before(rec.expires)
				if got := m.Found(idOf(k, c)); got != want {
					t.Fatalf("seed %d, op %d: Found(%x, %x) = %v, want %v", seed, op, k, c, got, want)
				}
			default:
				*clock = clock.Add(time.Duration(rng.IntN(20_000)) * time.Millisecond)
			}
		}
	}
}

// TestMemorySweepDropsExpired checks that expired ids leave the store
// (not only the answers) once a sweep runs, and that live ones stay.
func TestMemorySweepDropsExpired(t *testing.T) {
	m, clock := fakeClock(time.Second)
	long := m.WithTTL(time.Hour)
	const n = 20_000
	for i := range n {
		m.Put(idOf(uint64(i+1)<<5, 1)) // all in shard 0
	}
	long.Put(idOf(uint64(n+1)<<5, 1))
	s := &m.ids.shards[0]
	if size := len(s.table.Load().slots); s.used != n+1 || size < 2*(n+1) {
		t.Fatalf("shard holds %d ids in %d slots, want %d in at least %d", s.used, size, n+1, 2*(n+1))
	}
	*clock = clock.Add(2 * time.Minute)
	long.Put(idOf(uint64(n+2)<<5, 1)) // a record after sweepAt sweeps
	if size := len(s.table.Load().slots); s.used != 2 || size != minSlots {
		t.Fatalf("after the sweep the shard holds %d ids in %d slots, want 2 in %d", s.used, size, minSlots)
	}
	for _, k := range []uint64{n + 1, n + 2} {
		if !m.Found(idOf(k<<5, 1)) {
			t.Fatalf("live id %d lost in the sweep", k)
		}
	}
	if m.Found(idOf(1<<5, 1)) {
		t.Fatal("an expired id is found")
	}
}

// TestMemoryLongTTL: a TTL beyond what a slot's expiry can count (34
// years) keeps the id for that long rather than wrapping around.
func TestMemoryLongTTL(t *testing.T) {
	m, clock := fakeClock(100 * 365 * 24 * time.Hour)
	m.Put(idOf(7, 7))
	*clock = clock.Add(30 * 365 * 24 * time.Hour)
	if !m.Found(idOf(7, 7)) {
		t.Fatal("an id with a 100-year TTL is gone after 30 years")
	}
}

// TestMemorySweepsUnderReaders: lookups (and touches) without the lock
// keep finding long-lived ids, each recorded before its lookup started,
// while two goroutines record short-lived ones into the same shards and
// the clock jumps past them, so that tables grow, are swept and shrink
// under the readers; the race detector sees the lock-free reads.
func TestMemorySweepsUnderReaders(t *testing.T) {
	base := time.Unix(1_000_000, 0)
	var offset atomic.Int64
	m := NewMemory(time.Hour)
	m.ids.now = func() time.Time { return base.Add(time.Duration(offset.Load())) }
	m.ids.epoch = base
	short := m.WithTTL(time.Second)
	const n = 100_000
	long := func(i int64) ID { return idOf(uint64(i+1)<<5|uint64(i&1), uint64(i)*0x9E3779B97F4A7C15) }
	var recorded atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 9))
			for {
				select {
				case <-stop:
					return
				default:
				}
				short.Put(idOf(rng.Uint64()<<5|uint64(w), rng.Uint64()))
				// Jumps of a minute, while the long-lived ids have well
				// over ten left to live.
				if rng.IntN(5000) == 0 && offset.Load() < int64(45*time.Minute) {
					offset.Add(int64(61 * time.Second))
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range int64(n) {
			m.Put(long(i))
			recorded.Store(i + 1)
		}
	}()
	rng := rand.New(rand.NewPCG(5, 5))
	for recorded.Load() < n {
		upto := recorded.Load()
		if upto == 0 {
			continue
		}
		i := rng.Int64N(upto)
		m.Touch(long(i))
		if !m.Found(long(i)) {
			t.Fatalf("id %d, recorded before the lookup, not found (clock +%v)", i, time.Duration(offset.Load()))
		}
	}
	close(stop)
	wg.Wait()
	if offset.Load() == 0 {
		t.Fatal("the clock never moved: no sweep was tested")
	}
}

// TestMemoryFewExpiredWait: a sweep that would drop less than a quarter
// of a table leaves it as it is (no new table every minute); the expired
// ids are still never found.
func TestMemoryFewExpiredWait(t *testing.T) {
	m, clock := fakeClock(time.Hour)
	short := m.WithTTL(time.Second)
	for i := range 1000 {
		m.Put(idOf(uint64(i+1)<<5, 1))
	}
	for i := range 100 {
		short.Put(idOf(uint64(i+5000)<<5, 1))
	}
	s := &m.ids.shards[0]
	before := s.table.Load()
	*clock = clock.Add(2 * time.Minute)
	m.Put(idOf(9999<<5, 1)) // sweeps
	if s.table.Load() != before {
		t.Fatal("a sweep dropping under a quarter of the ids made a new table")
	}
	if m.Found(idOf(5000<<5, 1)) {
		t.Fatal("an expired id is found")
	}
	if !m.Found(idOf(1<<5, 1)) {
		t.Fatal("a live id is lost")
	}
}

// TestMemoryTTLRoundsUp: expiries count whole milliseconds, rounded up,
// so an id lives out its TTL, and at most a millisecond longer.
func TestMemoryTTLRoundsUp(t *testing.T) {
	m, clock := fakeClock(1500 * time.Microsecond)
	start := *clock
	*clock = start.Add(900 * time.Microsecond)
	m.Put(idOf(7<<5, 7)) // lives until 2.4 ms, kept until 3 ms
	for _, c := range []struct {
		at    time.Duration
		found bool
	}{{1100 * time.Microsecond, true}, {2399 * time.Microsecond, true}, {2999 * time.Microsecond, true}, {3 * time.Millisecond, false}} {
		*clock = start.Add(c.at)
		if got := m.Found(idOf(7<<5, 7)); got != c.found {
			t.Fatalf("at %v: found %v, want %v", c.at, got, c.found)
		}
	}
}

// TestMemoryShardSize: a shard is one cache line, so that the locks of
// neighbouring shards do not share one.
func TestMemoryShardSize(t *testing.T) {
	if size := unsafe.Sizeof(memoryShard{}); size != 64 {
		t.Fatalf("a shard is %d bytes, want 64", size)
	}
}

// BenchmarkMemoryNewIDs is a consumer's stream of new ids: a lookup, then
// a record, of ids never seen, in a store that grows with them.
func BenchmarkMemoryNewIDs(b *testing.B) {
	m := NewMemory(time.Hour)
	rng := rand.New(rand.NewPCG(1, 1))
	b.ReportAllocs()
	for b.Loop() {
		id := idOf(rng.Uint64(), rng.Uint64())
		if m.Found(id) {
			b.Fatal("a new id was found")
		}
		m.Put(id)
	}
}
