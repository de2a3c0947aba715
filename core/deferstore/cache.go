package deferstore

import (
	"container/list"
	"sync"
)

// cache is a small exact LRU of per-key state in front of one Cassandra
// segment. It must be exact: a stale "known empty" would let a message of
// a deferred key run ahead of the deferred ones. The segment therefore
// updates it only after a write succeeded, drops the key when a write
// failed (its outcome is unknown), and fills it from reads.
//
// Ristretto is not used here. Refusing an entry would be harmless (a miss
// costs one read), but its Set is applied asynchronously: a Set buffered
// before a newer write could land after it and bring back the older value.
// Guarding against that (versions, or Del before every write plus Wait)
// costs more than this list, which a mutex keeps exact.
type cache[V any] struct {
	mu    sync.Mutex
	cap   int
	order *list.List // front = most recently used; values are *cacheEntry[V]
	byKey map[string]*list.Element
}

type cacheEntry[V any] struct {
	key string
	val V
}

// newCache returns a cache of capacity entries; 0 disables it (every get
// misses and put does nothing).
func newCache[V any](capacity int) *cache[V] {
	return &cache[V]{cap: capacity, order: list.New(), byKey: map[string]*list.Element{}}
}

func (c *cache[V]) get(key string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[key]; ok {
		c.order.MoveToFront(el)
		return el.Value.(*cacheEntry[V]).val, true
	}
	var zero V
	return zero, false
}

func (c *cache[V]) put(key string, v V) {
	if c.cap <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[key]; ok {
		el.Value.(*cacheEntry[V]).val = v
		c.order.MoveToFront(el)
		return
	}
	c.byKey[key] = c.order.PushFront(&cacheEntry[V]{key: key, val: v})
	if c.order.Len() > c.cap {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.byKey, last.Value.(*cacheEntry[V]).key)
	}
}

func (c *cache[V]) del(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[key]; ok {
		c.order.Remove(el)
		delete(c.byKey, key)
	}
}

// len is the number of cached keys, for tests.
func (c *cache[V]) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
