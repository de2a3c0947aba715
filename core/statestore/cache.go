package statestore

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/ristretto/v2"

	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/internal/lfucache"
)

// Forgetter is implemented by the stores Cached returns. Forget drops
// every cached answer of a namespace: a process that regains a partition
// must not trust what it cached before another owner wrote the keys.
type Forgetter interface {
	Forget(namespace string)
}

// entryOverhead approximates what a cached answer costs beyond its key
// and value bytes: the entry struct and ristretto's bookkeeping.
const entryOverhead = 96

// Cached puts a read cache of about maxBytes in front of s: values,
// point reads of map entries (present and absent) and deque bounds.
// Scans, deque slots, markers, leases, routes and the registry pass
// through. It is meant to be one per process, shared by every consumer
// of s; Close (io.Closer) stops its goroutines. maxBytes <= 0 returns s.
//
// Answers are exact: a write is cached only after it succeeded (and
// forgotten when it failed, as its outcome is unknown), and a read's
// answer is cached only if no write of its key ran meanwhile (guard).
func Cached(s Store, maxBytes int64) Store {
	if maxBytes <= 0 {
		return s
	}
	rows, ok := s.(lifetimes)
	if !ok {
		rows = unknownLifetimes{s}
	}
	cache, err := lfucache.New(&ristretto.Config[string, cacheEntry]{
		// Ristretto wants ten counters per entry it can hold; entries are
		// rarely under ~64 bytes. The cap bounds the counters' memory
		// (about 3 bytes each).
		NumCounters:        min(max(maxBytes/64, 1<<10), 1<<24),
		MaxCost:            maxBytes,
		BufferItems:        64,
		IgnoreInternalCost: true,
	})
	if err != nil {
		// Only an invalid configuration fails, and this one is valid for
		// every maxBytes > 0.
		panic(fmt.Sprintf("statestore: create the state cache: %v", err))
	}
	return &cachedStore{Store: s, rows: rows, cache: cache, guard: newGuard()}
}

type cachedStore struct {
	Store // everything not cached passes through
	rows  lifetimes
	cache *lfucache.Cache[string, cacheEntry]
	guard *guard

	epochs sync.Map // namespace → *atomic.Uint64, bumped by Forget
}

// cacheEntry is one cached answer: a value or map entry (present or
// not), or a deque's bounds. exp is zero when only a write ends it.
type cacheEntry struct {
	value   []byte
	present bool
	bounds  Bounds
	exp     time.Time
}

func (c *cachedStore) Close() error {
	c.cache.Close()
	return nil
}

// InMemory reports whether the store behind the cache is in memory.
func (c *cachedStore) InMemory() bool {
	m, ok := c.Store.(interface{ InMemory() bool })
	return ok && m.InMemory()
}

func (c *cachedStore) Forget(namespace string) {
	e, _ := c.epochs.LoadOrStore(namespace, new(atomic.Uint64))
	e.(*atomic.Uint64).Add(1)
}

func (c *cachedStore) epoch(namespace string) uint64 {
	if e, ok := c.epochs.Load(namespace); ok {
		return e.(*atomic.Uint64).Load()
	}
	return 0
}

// Cache keys are kind ‖ epoch ‖ length-prefixed namespace, key and
// collection ‖ (map entries) generation ‖ map key. Length prefixes keep
// ("ab", "c") and ("a", "bc") apart.
const (
	kindValue  = 'v'
	kindBounds = 'b'
	kindEntry  = 'm'
)

func rowKey(kind byte, epoch uint64, k Key, collection string) []byte {
	b := make([]byte, 0, 1+10+3*4+len(k.Namespace)+len(k.Key)+len(collection)+10+16)
	b = append(b, kind)
	b = binary.AppendUvarint(b, epoch)
	for _, s := range [3]string{k.Namespace, k.Key, collection} {
		b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
		b = append(b, s...)
	}
	return b
}

// The key functions take the namespace's epoch: readers pass the current
// one, Apply the one it started under.

func valueKey(epoch uint64, k Key, collection string) string {
	return string(rowKey(kindValue, epoch, k, collection))
}

func boundsKey(epoch uint64, k Key, collection string) string {
	return string(rowKey(kindBounds, epoch, k, collection))
}

// entryPrefix is the part of a map entry's key shared by the whole map
// at its current generation; the map key is appended to it.
func (c *cachedStore) entryPrefix(epoch uint64, k Key, collection string) []byte {
	b := rowKey(kindEntry, epoch, k, collection)
	return binary.AppendUvarint(b, c.guard.gen(k, collection).Load())
}

func entryKey(prefix []byte, key string) string { return string(append(prefix, key...)) }

func (c *cachedStore) get(key string) (cacheEntry, bool) {
	e, ok := c.cache.Get(key)
	if !ok || (!e.exp.IsZero() && !c.rows.now().Before(e.exp)) {
		return cacheEntry{}, false
	}
	return e, true
}

// set caches e unless its lifetime is over. Ristretto gets a TTL too so
// it can reclaim the space, but expiry is decided by get, on the store's
// clock.
func (c *cachedStore) set(key string, e cacheEntry) {
	cost := int64(len(key) + len(e.value) + entryOverhead)
	if e.exp.IsZero() {
		c.cache.Set(key, e, cost)
		return
	}
	if ttl := e.exp.Sub(c.rows.now()); ttl > 0 {
		c.cache.SetWithTTL(key, e, cost, ttl)
	}
}

func (c *cachedStore) Value(ctx context.Context, k Key, collection string) ([]byte, bool, error) {
	key := valueKey(c.epoch(k.Namespace), k, collection)
	if e, ok := c.get(key); ok {
		return slices.Clone(e.value), e.present, nil
	}
	st := c.guard.stripe(k)
	seq, fill := st.snapshot()
	v, ok, exp, err := c.rows.valueUntil(ctx, k, collection)
	if err != nil {
		return nil, false, err
	}
	if fill {
		st.fill(seq, func() { c.set(key, cacheEntry{value: slices.Clone(v), present: ok, exp: exp}) })
	}
	return v, ok, nil
}

func (c *cachedStore) DequeBounds(ctx context.Context, k Key, collection string) (Bounds, error) {
	key := boundsKey(c.epoch(k.Namespace), k, collection)
	if e, ok := c.get(key); ok {
		return e.bounds, nil
	}
	st := c.guard.stripe(k)
	seq, fill := st.snapshot()
	b, exp, err := c.rows.boundsUntil(ctx, k, collection)
	if err != nil {
		return Bounds{}, err
	}
	if fill {
		st.fill(seq, func() { c.set(key, cacheEntry{bounds: b, present: b != Bounds{}, exp: exp}) })
	}
	return b, nil
}

func (c *cachedStore) MapGet(ctx context.Context, k Key, collection string, keys []string) ([][]byte, error) {
	prefix := c.entryPrefix(c.epoch(k.Namespace), k, collection)
	out := make([][]byte, len(keys))
	var missing []string
	missed := map[string][]int{} // map key → positions in keys
	for i, mk := range keys {
		if e, ok := c.get(entryKey(prefix, mk)); ok {
			if e.present {
				out[i] = slices.Clone(e.value)
			}
			continue
		}
		if _, seen := missed[mk]; !seen {
			missing = append(missing, mk)
		}
		missed[mk] = append(missed[mk], i)
	}
	if len(missing) == 0 {
		return out, nil
	}
	st := c.guard.stripe(k)
	seq, fill := st.snapshot()
	vs, exps, err := c.rows.mapGetUntil(ctx, k, collection, missing)
	if err != nil {
		return nil, err
	}
	for j, mk := range missing {
		for _, i := range missed[mk] {
			out[i] = slices.Clone(vs[j])
		}
	}
	if fill {
		st.fill(seq, func() {
			for j, mk := range missing {
				c.set(entryKey(prefix, mk), cacheEntry{value: slices.Clone(vs[j]), present: vs[j] != nil, exp: exps[j]})
			}
		})
	}
	return out, nil
}

// Apply writes through: once the store has applied w, every row w
// touched is deleted from the cache and then set to its new answer. On
// failure the rows are only deleted: the write may or may not have
// landed, and the next read asks the store.
//
// Why no older answer can come back (ristretto v2.4.2, cache.go): Set
// updates a key already stored at once, but inserts a new one only when
// processItems takes it off setBuf; Del removes the stored key at once
// and also queues a delete on setBuf, behind any Set queued before it. So
// an older Set still in setBuf is applied after our Del, and stays
// visible until the queued delete is processed right after it: a window
// in which a reader would see the replaced answer after Apply returned.
// Wait closes it: it returns once every item queued before it, that
// older Set and our delete included, has been processed. The new answers
// are set only then, and no fill can queue another old answer meanwhile
// (the guard refuses fills while the write runs and for reads begun
// before it).
//
// The cache keys are computed before the store is called, with the
// namespace's epoch of then: a write that is in flight when the namespace
// is forgotten belongs to the time before, and caching its answers under
// the new epoch would hide what another owner wrote since. Its answers
// are not cached at all then.
func (c *cachedStore) Apply(ctx context.Context, k Key, w Write) error {
	st := c.guard.stripe(k)
	st.begin()
	defer st.end()
	epoch := c.epoch(k.Namespace)
	rows := c.touched(k, epoch, w.Changes, c.rows.now())
	err := c.Store.Apply(ctx, k, w)
	for key := range rows {
		c.cache.Del(key)
	}
	c.cache.Wait()
	if err != nil || c.epoch(k.Namespace) != epoch {
		return err
	}
	for key, e := range rows {
		if e != nil {
			c.set(key, *e)
		}
	}
	return nil
}

// Settle applies a write older than any that may have followed it: its
// rows' new answers are unknown, so they are only forgotten.
func (c *cachedStore) Settle(ctx context.Context, p Pending) error {
	st := c.guard.stripe(p.Key)
	st.begin()
	defer st.end()
	rows := c.touched(p.Key, c.epoch(p.Key.Namespace), p.Write.Changes, c.rows.now())
	err := c.Store.Settle(ctx, p)
	for key := range rows {
		c.cache.Del(key)
	}
	c.cache.Wait()
	return err
}

// touched returns the cache key of every cached row the changes affect
// and its answer after them (nil: not to be cached, only forgotten). A
// Clear first moves the map to a new generation, so its cached entries,
// which cannot be listed, are unreachable from then on; values and bounds
// have one row each and are simply replaced. As in the stores, deletions
// come before puts.
func (c *cachedStore) touched(k Key, epoch uint64, changes []Change, start time.Time) map[string]*cacheEntry {
	rows := map[string]*cacheEntry{}
	absent := &cacheEntry{}
	for _, ch := range changes {
		if ch.Clear {
			c.guard.gen(k, ch.Collection).Add(1)
			rows[valueKey(epoch, k, ch.Collection)] = absent
			rows[boundsKey(epoch, k, ch.Collection)] = absent
		}
	}
	for _, ch := range changes {
		if ch.Kind == config.CollectionMap {
			prefix := c.entryPrefix(epoch, k, ch.Collection)
			for _, mk := range ch.Removes {
				rows[entryKey(prefix, mk)] = absent
			}
		}
	}
	for _, ch := range changes {
		// A row with a TTL is trusted a second less than it lives: the
		// store rounds the TTL up to whole seconds but counts them from a
		// truncated now.
		var exp time.Time
		if ch.TTL > 0 {
			exp = start.Add(ch.TTL - time.Second)
		}
		put := func(key string, e cacheEntry) {
			if ch.TTL > 0 && !exp.After(start) {
				rows[key] = nil
				return
			}
			e.exp = exp
			rows[key] = &e
		}
		switch ch.Kind {
		case config.CollectionValue:
			if ch.Value != nil {
				put(valueKey(epoch, k, ch.Collection), cacheEntry{value: slices.Clone(ch.Value), present: true})
			}
		case config.CollectionMap:
			prefix := c.entryPrefix(epoch, k, ch.Collection)
			for _, e := range ch.Puts {
				v := e.Value
				if v == nil {
					v = []byte{}
				}
				put(entryKey(prefix, e.Key), cacheEntry{value: slices.Clone(v), present: true})
			}
		case config.CollectionDeque:
			if ch.Bounds != nil {
				put(boundsKey(epoch, k, ch.Collection), cacheEntry{bounds: *ch.Bounds, present: *ch.Bounds != Bounds{}})
			}
		}
	}
	return rows
}
