package producer

import (
	"encoding/binary"
	"math"
	"sync"

	"github.com/zeebo/xxh3"
)

// idKey is the cache key of one (topic, key, event id) triple: XXH3-128,
// seed 0, over
//
//	u32le len(topic) ‖ topic ‖ u32le len(key) ‖ key ‖ u32le len(id) ‖ id
//
// exactly as the original computes it (core-behavior.md §6). The length
// prefixes keep ("ab","c") and ("a","bc") apart.
func idKey(topic, key, id string) xxh3.Uint128 {
	// Typical triples fit on the stack; longer ones spill to the heap.
	var stack [256]byte
	return xxh3.Hash128(appendIDKeyInput(stack[:0], topic, key, id))
}

// appendIDKeyInput appends the hash input of idKey to buf.
func appendIDKeyInput(buf []byte, topic, key, id string) []byte {
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(topic)))
	buf = append(buf, topic...)
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(key)))
	buf = append(buf, key...)
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(id)))
	buf = append(buf, id...)
	return buf
}

// idCache is the bounded set of recently delivered (topic, key, id) hashes.
//
// It is a plain LRU rather than ristretto on purpose. The spec calls for a
// set: once a send has succeeded, the next send of the same triple must be
// dropped, deterministically. Ristretto applies writes asynchronously and
// its TinyLFU admission policy may refuse a new key when the cache is full
// (a key seen once loses against frequently read ones), so a just-delivered
// id could be re-sent. An LRU admits every insert immediately and forgets
// only the least recently used entry when full. Its single mutex is held for
// a map operation and a few index updates, which is negligible next to the
// network round trip every Send waits for.
//
// Nodes live in one slice linked by index, so a full cache recycles the
// evicted node instead of allocating.
type idCache struct {
	mu       sync.Mutex
	capacity int
	index    map[xxh3.Uint128]int32
	nodes    []lruNode
	head     int32 // most recently used, or -1
	tail     int32 // least recently used, or -1
}

type lruNode struct {
	key        xxh3.Uint128
	prev, next int32
}

// newIDCache returns a cache for capacity entries, or nil if capacity is not
// positive (the cache is disabled).
func newIDCache(capacity int) *idCache {
	if capacity <= 0 {
		return nil
	}
	// Node links are int32; no realistic cache comes near that.
	capacity = min(capacity, math.MaxInt32)
	// Grow lazily: a large configured size should not cost memory up front.
	initial := min(capacity, 1024)
	return &idCache{
		capacity: capacity,
		index:    make(map[xxh3.Uint128]int32, initial),
		nodes:    make([]lruNode, 0, initial),
		head:     -1,
		tail:     -1,
	}
}

// contains reports whether k is present, marking it recently used.
func (c *idCache) contains(k xxh3.Uint128) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	i, ok := c.index[k]
	if ok {
		c.moveToFront(i)
	}
	return ok
}

// add inserts k, evicting the least recently used entry when full.
func (c *idCache) add(k xxh3.Uint128) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i, ok := c.index[k]; ok {
		c.moveToFront(i)
		return
	}
	var i int32
	if len(c.nodes) < c.capacity {
		i = int32(len(c.nodes))
		c.nodes = append(c.nodes, lruNode{key: k})
	} else {
		i = c.tail
		c.unlink(i)
		delete(c.index, c.nodes[i].key)
		c.nodes[i].key = k
	}
	c.pushFront(i)
	c.index[k] = i
}

// len returns the number of entries.
func (c *idCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.index)
}

func (c *idCache) moveToFront(i int32) {
	if c.head == i {
		return
	}
	c.unlink(i)
	c.pushFront(i)
}

func (c *idCache) unlink(i int32) {
	n := &c.nodes[i]
	if n.prev >= 0 {
		c.nodes[n.prev].next = n.next
	} else {
		c.head = n.next
	}
	if n.next >= 0 {
		c.nodes[n.next].prev = n.prev
	} else {
		c.tail = n.prev
	}
	n.prev, n.next = -1, -1
}

func (c *idCache) pushFront(i int32) {
	n := &c.nodes[i]
	n.prev, n.next = -1, c.head
	if c.head >= 0 {
		c.nodes[c.head].prev = i
	}
	c.head = i
	if c.tail < 0 {
		c.tail = i
	}
}
