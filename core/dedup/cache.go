package dedup

import (
	"math/bits"
	"sync"

	"github.com/prosody-events/prosody-go/core/dedupstore"
)

// cache is the in-memory tier: a bounded set of ids recently handled or
// found in the store, shared by every partition of a client.
//
// It is set-associative rather than ristretto on purpose. Nearly every id
// a consumer records is never asked for again, so an admission policy that
// counts accesses (ristretto's TinyLFU) only adds work: on the Cassandra
// benchmark it was about 5 µs of CPU per message, a sixth of the
// consumer's. Here an id goes into one of four ways of the set its hash
// picks, replacing the oldest. It is a cache in front of the store, so
// an id evicted early costs one store read when it comes again, never a
// wrong answer.
type cache struct {
	shards []cacheShard
	// shardBits and setMask pick an id's shard (its low bits) and its set
	// in the shard (the bits above).
	shardBits uint
	setMask   uint64
}

const cacheWays = 4

type cacheShard struct {
	mu   sync.Mutex
	sets []cacheSet
	_    [32]byte // keeps neighbouring shards' locks off one cache line
}

// cacheSet holds up to cacheWays ids; an entry whose key is 0 is empty (an
// id's key half is never 0: its version nibble is set). hand is the way
// the next new id replaces.
type cacheSet struct {
	keys, checks [cacheWays]uint64
	hand         uint8
}

const maxCacheShards = 64

// newCache has room for size ids: as many ways as that, rounded up to a
// power of two. Ids spread over the sets by their hash, so it holds most
// of the last size ids added, not necessarily every one.
func newCache(size int) *cache {
	sets := ceilPow2((max(size, 1) + cacheWays - 1) / cacheWays)
	shards := min(sets, maxCacheShards)
	c := &cache{
		shards:    make([]cacheShard, shards),
		shardBits: uint(bits.TrailingZeros(uint(shards))),
		setMask:   uint64(sets/shards - 1),
	}
	for i := range c.shards {
		c.shards[i].sets = make([]cacheSet, sets/shards)
	}
	return c
}

func ceilPow2(n int) int {
	if n <= 1 {
		return 1
	}
	return 1 << bits.Len(uint(n-1))
}

// set is the shard and set of the id whose key half is k.
func (c *cache) set(k uint64) (*cacheShard, *cacheSet) {
	sh := &c.shards[k&uint64(len(c.shards)-1)]
	return sh, &sh.sets[(k>>c.shardBits)&c.setMask]
}

// has reports whether id is in the cache. An entry is keyed by the id's
// first half and holds its second half, so two ids sharing a first half
// are told apart (the later one replaces the earlier: a miss, never a
// false hit).
func (c *cache) has(id ID) bool {
	k, check := dedupstore.Halves(id)
	sh, s := c.set(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for w := range s.keys {
		if s.keys[w] == k {
			return s.checks[w] == check
		}
	}
	return false
}

func (c *cache) add(id ID) {
	k, check := dedupstore.Halves(id)
	sh, s := c.set(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for w := range s.keys {
		if s.keys[w] == k || s.keys[w] == 0 {
			s.keys[w], s.checks[w] = k, check
			return
		}
	}
	w := s.hand
	s.keys[w], s.checks[w] = k, check
	s.hand = (w + 1) % cacheWays
}
