// Package lfucache holds the ristretto cache the core keeps in front of
// its stores and the Kafka log, made safe to close while other goroutines
// still use it.
//
// Ristretto's Close closes the channels its Set, Del, Wait and Get hand
// their work to, and a call already past its own is-closed check when
// that happens panics on the closed channel; a Wait that comes after its
// goroutine stopped and before the channel closed blocks for ever. The
// core closes its caches as a client closes, when a host thread may still
// be reading published state or a deferred message may still be loading;
// the panic would crash a Go program, and fail the call through the C
// library. Here every call holds a read lock and Close the write lock, so
// a call made after Close does nothing: a get misses, a set is dropped,
// as a cache may drop any set.
package lfucache

import (
	"sync"
	"time"

	"github.com/dgraph-io/ristretto/v2"
)

// Cache is a ristretto cache whose Close may come at any time.
type Cache[K ristretto.Key, V any] struct {
	mu     sync.RWMutex
	c      *ristretto.Cache[K, V]
	closed bool // under mu
}

// New makes a cache of cfg (see ristretto.NewCache).
func New[K ristretto.Key, V any](cfg *ristretto.Config[K, V]) (*Cache[K, V], error) {
	c, err := ristretto.NewCache(cfg)
	if err != nil {
		return nil, err
	}
	return &Cache[K, V]{c: c}, nil
}

// Get returns k's value, if the cache holds it (never once closed).
func (c *Cache[K, V]) Get(k K) (V, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		var zero V
		return zero, false
	}
	return c.c.Get(k)
}

// Set offers v for k at cost; the cache may drop it (always once closed).
func (c *Cache[K, V]) Set(k K, v V, cost int64) bool {
	return c.SetWithTTL(k, v, cost, 0)
}

// SetWithTTL is Set for an entry that expires after ttl (0: never).
func (c *Cache[K, V]) SetWithTTL(k K, v V, cost int64, ttl time.Duration) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return false
	}
	return c.c.SetWithTTL(k, v, cost, ttl)
}

// Del removes k.
func (c *Cache[K, V]) Del(k K) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if !c.closed {
		c.c.Del(k)
	}
}

// Wait returns once the sets made before it are applied (or dropped).
func (c *Cache[K, V]) Wait() {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if !c.closed {
		c.c.Wait()
	}
}

// Close stops the cache's goroutines and drops what it holds, once the
// calls under way have returned (new calls wait for it meanwhile). Later
// calls, and Close again, do nothing.
func (c *Cache[K, V]) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.closed = true
		c.c.Close()
	}
}
