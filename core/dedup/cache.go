package dedup

import (
	"fmt"

	"github.com/dgraph-io/ristretto/v2"

	"github.com/prosody-events/prosody-go/core/dedupstore"
)

// cache is the in-memory tier: a bounded set of ids recently handled or
// found in the store, shared by every partition of a client. It is a
// cache in front of the store, so ristretto's ways are harmless here: a
// Set applied late, or refused by its admission policy, costs one store
// read when the id comes again, never a wrong answer.
type cache struct {
	c *ristretto.Cache[uint64, uint64]
}

func newCache(size int) *cache {
	c, err := ristretto.NewCache(&ristretto.Config[uint64, uint64]{
		NumCounters:        int64(size) * 10, // ristretto's advice: ten counters an entry
		MaxCost:            int64(size),      // one an entry
		BufferItems:        64,
		IgnoreInternalCost: true,
	})
	if err != nil {
		// Only an invalid configuration fails, and size ≥ 1 is valid.
		panic(fmt.Sprintf("dedup: the id cache: %v", err))
	}
	return &cache{c: c}
}

// has reports whether id is in the cache. An entry keyed by the id's first
// half holds its second half, so two ids sharing a first half are told
// apart (the later one replaces the earlier: a miss, never a false hit).
func (c *cache) has(id ID) bool {
	k, check := dedupstore.Halves(id)
	v, ok := c.c.Get(k)
	return ok && v == check
}

func (c *cache) add(id ID) {
	k, check := dedupstore.Halves(id)
	c.c.Set(k, check, 1)
}

// wait applies the adds under way (tests).
func (c *cache) wait() { c.c.Wait() }

func (c *cache) close() { c.c.Close() }
