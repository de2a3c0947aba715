package dedupstore

import (
	"encoding/binary"
	"sync"
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

// memoryIDs are sharded by the id's first byte, so that partitions
// handled on different goroutines seldom wait for one another's lock.
type memoryIDs struct {
	now    func() time.Time
	shards [memoryShards]memoryShard
}

const memoryShards = 32

// A shard's map is keyed by the id's first half and holds the second,
// which tells a collision from a hit (two ids sharing a first half: the
// later replaces the earlier, a miss, never a false hit). Neither holds a
// pointer, so the collector never scans the map, and its lookups take the
// runtime's fast path for 64-bit keys.
type memoryShard struct {
	mu      sync.Mutex
	expires map[uint64]memoryEntry
	// sweepAt is when the next record sweeps out expired ids, which keeps
	// the map from holding what no lookup would return.
	sweepAt time.Time
	_       [24]byte // a cache line of its own
}

type memoryEntry struct {
	check   uint64
	expires int64 // unix nanoseconds
}

// Halves splits id in two: the first half keys a map or cache, the
// second tells a collision from a hit.
func Halves(id ID) (key, check uint64) {
	return binary.LittleEndian.Uint64(id[0:8]), binary.LittleEndian.Uint64(id[8:16])
}

// NewMemory returns an empty store whose ids expire ttl after they were
// recorded.
func NewMemory(ttl time.Duration) Memory {
	ids := &memoryIDs{now: time.Now}
	for i := range ids.shards {
		ids.shards[i].expires = make(map[uint64]memoryEntry)
	}
	return Memory{ids: ids, ttl: ttl}
}

func (s *memoryIDs) shard(key uint64) *memoryShard { return &s.shards[key%memoryShards] }

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
	s.mu.Lock()
	e, ok := s.expires[key]
	s.mu.Unlock()
	// The clock is read only for a hit: a stream of new ids never needs it.
	return ok && e.check == check && m.ids.now().UnixNano() < e.expires
}

// Put implements Immediate.
func (m Memory) Put(id ID) {
	now := m.ids.now()
	key, check := Halves(id)
	s := m.ids.shard(key)
	s.mu.Lock()
	s.expires[key] = memoryEntry{check: check, expires: now.Add(m.ttl).UnixNano()}
	if now.After(s.sweepAt) {
		s.sweepLocked(now)
	}
	s.mu.Unlock()
}

func (s *memoryShard) sweepLocked(now time.Time) {
	for key, e := range s.expires {
		if now.UnixNano() >= e.expires {
			delete(s.expires, key)
		}
	}
	s.sweepAt = now.Add(time.Minute)
}
