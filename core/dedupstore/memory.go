package dedupstore

import (
	"encoding/binary"
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"
)

// Memory is the in-memory store of mock mode. It is keyed like the
// Cassandra table (ids include the group, topic and partition), so one
// set of ids serves every client of the process and a partition moving
// between them keeps its ids, as it would in Cassandra.
type Memory struct {
	ids *memoryIDs
	ttl time.Duration
}

// memoryIDs are sharded by the id's first half, so that partitions
// handled on different goroutines seldom wait for one another's lock.
type memoryIDs struct {
	now    func() time.Time
	epoch  time.Time // expiries count milliseconds from here
	shards [memoryShards]memoryShard
}

const memoryShards = 32

// A shard is an open-addressing table with linear probing, whose 16-byte
// slots sit four to a cache line: looking up a new id, and then recording
// it, touches one line. Nearly every id a consumer records is new, and a
// consumer records millions: in a Go map each lookup and record touched
// several lines all over a growing heap, which on the engine benchmark
// cost more than the rest of the consumer's work per message.
//
// Lookups take no lock, so that Touch can start a lookup's cache miss
// early without waiting for it (a lock's release would): they read the
// table through an atomic pointer and its words with atomic loads.
// Records hold the shard's lock, write a slot's meta before its key (a
// slot's key never changes once written), and publish a grown table only
// once it holds every id.
type memoryShard struct {
	mu    sync.Mutex
	table atomic.Pointer[memoryTable]
	used  int // slots taken in table
	// zeroMeta is the meta of the id whose first half is 0, which marks a
	// free slot (an id's first half is never 0 in practice: its version
	// nibble is set); 0 when there is none (a meta of 0 has expired).
	zeroMeta atomic.Uint64
	// earliest is the earliest expiry held, and sweepAt when the next
	// record may sweep the expired ids out; both in milliseconds from
	// the epoch.
	earliest, sweepAt uint64
	_                 [16]byte // a cache line of its own (TestMemoryShardSize)
}

// memoryTable holds a power of two of slots, at most half of them used.
type memoryTable struct {
	slots []memorySlot
	shift uint // 64 - log2(len(slots)): a mixed key's top bits are its home slot
}

// A slot holds an id's first half (0: the slot is free), and beside it 24
// bits of its second half, which tell a collision on the first half from
// a hit (two ids sharing a first half: the later replaces the earlier, a
// miss), and its expiry in milliseconds from the epoch (40 bits: 34
// years). Telling two ids apart by 88 of their bits rather than 128 makes
// a false hit need two ids among n that agree on 88 bits: about n² /
// 2^89, for a billion ids one chance in 600 million.
type memorySlot struct {
	key  uint64
	meta uint64 // check<<expiryBits | expires
}

const (
	expiryBits = 40
	expiryMask = 1<<expiryBits - 1
)

// Halves splits id in two: the first half keys a map or cache, the
// second tells a collision from a hit.
func Halves(id ID) (key, check uint64) {
	return binary.LittleEndian.Uint64(id[0:8]), binary.LittleEndian.Uint64(id[8:16])
}

// NewMemory returns an empty store whose ids expire ttl after they were
// recorded.
func NewMemory(ttl time.Duration) Memory {
	ids := &memoryIDs{now: time.Now}
	ids.epoch = ids.now()
	for i := range ids.shards {
		ids.shards[i].rehashLocked(minSlots, 0)
	}
	return Memory{ids: ids, ttl: ttl}
}

// minSlots is a shard's size when empty: 4 KiB.
const minSlots = 256

func (s *memoryIDs) shard(key uint64) *memoryShard { return &s.shards[key%memoryShards] }

// millis is t in milliseconds from the epoch, rounded down, never below 0.
func (s *memoryIDs) millis(t time.Time) uint64 {
	return uint64(max(t.Sub(s.epoch).Milliseconds(), 0))
}

// expiry is when a record made at t with ttl expires, in milliseconds
// from the epoch rounded up (an id lives out its TTL, and at most a
// millisecond longer), at most what a meta holds.
func (s *memoryIDs) expiry(t time.Time, ttl time.Duration) uint64 {
	d := t.Add(max(ttl, 0)).Sub(s.epoch) // saturates rather than overflows
	ms := d / time.Millisecond
	if d%time.Millisecond > 0 {
		ms++
	}
	return min(uint64(max(ms, 0)), expiryMask)
}

// WithTTL is the store over the same ids whose records expire after ttl
// (each client of a process has its own idempotence_ttl).
func (m Memory) WithTTL(ttl time.Duration) Memory { return Memory{ids: m.ids, ttl: ttl} }

// Exists implements Store.
func (m Memory) Exists(id ID, done func(bool, error)) { done(m.Found(id), nil) }

// Record implements Store.
func (m Memory) Record(id ID, done func(error)) {
	m.Put(id)
	done(nil)
}

// Found implements Immediate.
func (m Memory) Found(id ID) bool {
	key, check := Halves(id)
	s := m.ids.shard(key)
	var meta uint64
	if key == 0 {
		meta = s.zeroMeta.Load()
	} else {
		meta = s.table.Load().find(key)
	}
	// The clock is read only for a hit: a stream of new ids never needs it.
	return meta != 0 && meta>>expiryBits == check>>expiryBits &&
		m.ids.millis(m.ids.now()) < meta&expiryMask
}

// Touch implements Immediate: it reads the first slot where id would be,
// and nothing waits for the read, so the processor goes on while the
// line comes in from memory.
func (m Memory) Touch(id ID) {
	key, _ := Halves(id)
	t := m.ids.shard(key).table.Load()
	atomic.LoadUint64(&t.slots[t.home(key)].key)
}

// Put implements Immediate.
func (m Memory) Put(id ID) {
	t := m.ids.now()
	now, expires := m.ids.millis(t), m.ids.expiry(t, m.ttl)
	key, check := Halves(id)
	meta := check>>expiryBits<<expiryBits | expires
	s := m.ids.shard(key)
	s.mu.Lock()
	s.putLocked(key, meta)
	s.earliest = min(s.earliest, expires)
	if now >= s.sweepAt {
		s.sweepLocked(now)
	}
	s.mu.Unlock()
}

func newTable(size int) *memoryTable {
	return &memoryTable{slots: make([]memorySlot, size), shift: uint(64 - bits.TrailingZeros(uint(size)))}
}

func (t *memoryTable) home(key uint64) uint64 {
	// key is half of a hash already; the multiply only keeps the slot
	// apart from the shard, which the key's low bits pick. A table of one
	// slot would shift by 64, which is why there are at least minSlots.
	return (key * 0x9E3779B97F4A7C15) >> t.shift
}

// find is the meta of key (not 0), or 0 when the table does not hold it.
func (t *memoryTable) find(key uint64) uint64 {
	mask := uint64(len(t.slots) - 1)
	for i := t.home(key); ; i = (i + 1) & mask {
		switch atomic.LoadUint64(&t.slots[i].key) {
		case key:
			return atomic.LoadUint64(&t.slots[i].meta)
		case 0:
			return 0
		}
	}
}

// putLocked stores key's meta, replacing the record of key if there is
// one, and doubles the table when more than half of it is used.
func (s *memoryShard) putLocked(key, meta uint64) {
	if key == 0 {
		s.zeroMeta.Store(meta)
		return
	}
	t := s.table.Load()
	mask := uint64(len(t.slots) - 1)
	for i := t.home(key); ; i = (i + 1) & mask {
		sl := &t.slots[i]
		switch atomic.LoadUint64(&sl.key) {
		case key:
			atomic.StoreUint64(&sl.meta, meta)
			return
		case 0:
			atomic.StoreUint64(&sl.meta, meta)
			atomic.StoreUint64(&sl.key, key)
			s.used++
			if 2*s.used > len(t.slots) {
				s.rehashLocked(2*len(t.slots), 0)
			}
			return
		}
	}
}

// sweepLocked drops the expired ids, when any may be (every minute at
// most) and they are a quarter of the table's or more, by rehashing what
// is left into a table sized for it with room to grow; fewer wait for a
// later sweep rather than cost a new table each minute.
func (s *memoryShard) sweepLocked(now uint64) {
	s.sweepAt = now + uint64(time.Minute.Milliseconds())
	if s.earliest > now {
		return
	}
	if z := s.zeroMeta.Load(); z != 0 && z&expiryMask <= now {
		s.zeroMeta.Store(0)
	}
	live := 0
	for _, sl := range s.table.Load().slots {
		if sl.key != 0 && sl.meta&expiryMask > now {
			live++
		}
	}
	if 4*(s.used-live) < s.used {
		return
	}
	size := minSlots
	for 3*live > size {
		size *= 2
	}
	s.rehashLocked(size, now)
}

// rehashLocked moves the ids that expire after dropBefore into a new
// table of size slots (a power of two, at least minSlots), which lookups
// see once it holds them all.
func (s *memoryShard) rehashLocked(size int, dropBefore uint64) {
	old, t := s.table.Load(), newTable(size)
	mask := uint64(size - 1)
	s.used, s.earliest = 0, math.MaxUint64
	if old != nil {
		// Plain reads: only this shard's writers, under its lock, write old.
		for _, sl := range old.slots {
			if sl.key == 0 || sl.meta&expiryMask <= dropBefore {
				continue
			}
			i := t.home(sl.key)
			for t.slots[i].key != 0 { // keys are unique in old: no need to compare
				i = (i + 1) & mask
			}
			t.slots[i] = sl
			s.used++
			s.earliest = min(s.earliest, sl.meta&expiryMask)
		}
	}
	if z := s.zeroMeta.Load(); z != 0 {
		s.earliest = min(s.earliest, z&expiryMask)
	}
	s.table.Store(t)
}
