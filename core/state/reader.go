package state

import (
	"context"
	"encoding/binary"
	"strings"
	"sync"
	"time"

	"github.com/dgraph-io/ristretto/v2"

	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/internal/lfucache"
	"github.com/prosody-events/prosody-go/core/statestore"
)

// DefaultReadCacheSize is the readers' cache when neither its size nor
// the owned cache's is configured.
const DefaultReadCacheSize = 1 << 20

// Readers read the published collections of other services (or of this
// one) through one store and one cache, for a whole client. A reader sees
// committed state only — the store holds nothing else — and an answer from
// the cache was the store's answer within the reader's cache window.
type Readers struct {
	store statestore.Store
	ttl   time.Duration // the process setting; 0: no cache
	cache *lfucache.Cache[string, cachedRead]
}

// cachedRead is a cached answer: an item (nil: absent) or a deque's bounds.
type cachedRead struct {
	item   []byte
	bounds statestore.Bounds
	// at is when the answer was read: readers of one collection share the
	// cache, and each serves an answer only within its own window.
	at time.Time
}

// NewReaders returns readers over store with a cache of cacheBytes whose
// entries live ttl by default (0: readers do not cache unless their
// collection says so).
func NewReaders(store statestore.Store, cacheBytes int64, ttl time.Duration) (*Readers, error) {
	cache, err := lfucache.New(&ristretto.Config[string, cachedRead]{
		NumCounters: max(cacheBytes/64, 1024), MaxCost: max(cacheBytes, 1), BufferItems: 64,
		IgnoreInternalCost: true,
	})
	if err != nil {
		return nil, err
	}
	return &Readers{store: store, ttl: ttl, cache: cache}, nil
}

// Close releases the cache.
func (rs *Readers) Close() { rs.cache.Close() }

// Reader reads one published collection.
type Reader struct {
	rs        *Readers
	subsystem string
	name      string
	kind      config.CollectionKind
	ttl       time.Duration

	mu      sync.Mutex
	rt      statestore.Route
	routeAt time.Time
}

// Open returns a reader of the collection name, of kind, that subsystem
// publishes. ttl overrides the process cache window (Some(0): no cache).
// The routing record is read by the first operation.
func (rs *Readers) Open(subsystem, name string, kind config.CollectionKind, ttl config.Optional[time.Duration]) *Reader {
	return &Reader{rs: rs, subsystem: subsystem, name: name, kind: kind, ttl: ttl.Or(rs.ttl)}
}

// where finds the rows of key's state, from the collection's routing
// record (kept as long as the reader's cache window, and at least a
// second): the owner's namespace, and the key within its topic.
func (r *Reader) where(ctx context.Context, key string) (statestore.Key, error) {
	ns, topic, err := r.route(ctx)
	if err != nil {
		return statestore.Key{}, err
	}
	return statestore.Key{Namespace: ns, Key: topic + "\x00" + key}, nil
}

func (r *Reader) route(ctx context.Context) (namespace, topic string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.rt.Namespace != "" && time.Since(r.routeAt) < max(r.ttl, time.Second) {
		return r.rt.Namespace, r.rt.Topic, nil
	}
	rt, ok, err := r.rs.store.Route(ctx, r.subsystem, r.name)
	if err != nil {
		return "", "", storeError("reading the routing record", err)
	}
	if !ok {
		return "", "", newError(ErrUnregistered, "subsystem %q publishes no collection %q", r.subsystem, r.name)
	}
	if rt.Kind != r.kind || rt.Payload != config.PayloadJSON {
		return "", "", newError(ErrUnregistered, "subsystem %q publishes %q as a %s of %s payloads, not a %s of JSON",
			r.subsystem, r.name, rt.Kind, rt.Payload, r.kind)
	}
	r.rt, r.routeAt = rt, time.Now()
	return rt.Namespace, rt.Topic, nil
}

func (r *Reader) cacheKey(k statestore.Key, parts ...string) string {
	var b strings.Builder
	for _, s := range append([]string{r.subsystem, r.name, k.Namespace, k.Key}, parts...) {
		var n [binary.MaxVarintLen64]byte
		b.Write(n[:binary.PutUvarint(n[:], uint64(len(s)))])
		b.WriteString(s)
	}
	return b.String()
}

// cached answers from the cache, or reads with load and caches the answer.
func (r *Reader) cached(ck string, load func() (cachedRead, error)) (cachedRead, error) {
	if r.ttl > 0 {
		if v, ok := r.rs.cache.Get(ck); ok && time.Since(v.at) < r.ttl {
			return v, nil
		}
	}
	return r.fill(ck, load)
}

// fill reads with load and caches the answer, whatever the cache holds.
func (r *Reader) fill(ck string, load func() (cachedRead, error)) (cachedRead, error) {
	at := time.Now()
	v, err := load()
	if err != nil {
		return cachedRead{}, err
	}
	v.at = at
	if r.ttl > 0 {
		r.rs.cache.SetWithTTL(ck, v, int64(len(ck)+len(v.item)+16), r.ttl)
	}
	return v, nil
}

// Value reads key's value.
func (r *Reader) Value(ctx context.Context, key string) ([]byte, bool, error) {
	k, err := r.where(ctx, key)
	if err != nil {
		return nil, false, err
	}
	v, err := r.cached(r.cacheKey(k), func() (cachedRead, error) {
		item, _, err := r.rs.store.Value(ctx, k, r.name)
		return cachedRead{item: item}, storeError("reading "+r.name, err)
	})
	return v.item, v.item != nil, err
}

// MapGet reads key's map entries at mapKeys, nil where absent.
func (r *Reader) MapGet(ctx context.Context, key string, mapKeys []string) ([][]byte, error) {
	k, err := r.where(ctx, key)
	if err != nil {
		return nil, err
	}
	out := make([][]byte, len(mapKeys))
	for i, mk := range mapKeys {
		v, err := r.cached(r.cacheKey(k, "m", mk), func() (cachedRead, error) {
			got, err := r.rs.store.MapGet(ctx, k, r.name, []string{mk})
			if err != nil {
				return cachedRead{}, storeError("reading "+r.name, err)
			}
			return cachedRead{item: got[0]}, nil
		})
		if err != nil {
			return nil, err
		}
		out[i] = v.item
	}
	return out, nil
}

// bounds reads a deque's bounds: from the cache, or with fresh set from
// the store whatever the cache holds (and then cached).
func (r *Reader) bounds(ctx context.Context, k statestore.Key, fresh bool) (statestore.Bounds, error) {
	load := func() (cachedRead, error) {
		b, err := r.rs.store.DequeBounds(ctx, k, r.name)
		return cachedRead{bounds: b}, storeError("reading "+r.name, err)
	}
	read := r.cached
	if fresh {
		read = r.fill
	}
	v, err := read(r.cacheKey(k, "b"), load)
	return v.bounds, err
}

// Len is the number of items in key's deque. In a deque whose items
// expire (a collection with a TTL) it counts the expired items still
// within its bounds, which the owner's view skips.
func (r *Reader) Len(ctx context.Context, key string) (uint64, error) {
	k, err := r.where(ctx, key)
	if err != nil {
		return 0, err
	}
	b, err := r.bounds(ctx, k, false)
	return uint64(max(b.Len(), 0)), err
}

// DequeGet reads the item at index of key's deque (0 is the front).
func (r *Reader) DequeGet(ctx context.Context, key string, index uint64) ([]byte, bool, error) {
	k, err := r.where(ctx, key)
	if err != nil {
		return nil, false, err
	}
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], index)
	v, err := r.cached(r.cacheKey(k, "s", string(buf[:])), func() (cachedRead, error) {
		return r.firstStored(ctx, k, statestore.Forward, func(b statestore.Bounds) (statestore.Range, bool) {
			if index >= uint64(max(b.Len(), 0)) {
				return statestore.Range{}, false
			}
			i := b.Head + int64(index)
			return statestore.Range{From: i, To: i + 1}, true
		})
	})
	return v.item, v.item != nil, err
}

// PeekFront reads the front item of key's deque.
func (r *Reader) PeekFront(ctx context.Context, key string) ([]byte, bool, error) {
	return r.end(ctx, key, statestore.Forward)
}

// PeekBack reads the back item of key's deque.
func (r *Reader) PeekBack(ctx context.Context, key string) ([]byte, bool, error) {
	return r.end(ctx, key, statestore.Backward)
}

// firstStored reads the first slot stored, in direction dir, in the
// range within the deque's bounds that at gives (false: none, the answer
// is absent). The bounds are read from the store, not the cache, before
// and after the slot: bounds cached earlier, or changed in between, could
// pair a slot with a state of the deque it was never part of. A deque
// that changes between every read gets the last answer read.
func (r *Reader) firstStored(ctx context.Context, k statestore.Key, dir statestore.Direction,
	at func(statestore.Bounds) (statestore.Range, bool)) (cachedRead, error) {
	b, err := r.bounds(ctx, k, true)
	var v cachedRead
	for range 3 {
		if err != nil {
			return cachedRead{}, err
		}
		rg, ok := at(b)
		if !ok {
			return cachedRead{}, nil
		}
		got, err := r.rs.store.DequeSlots(ctx, k, r.name, rg, dir, 1)
		if err != nil {
			return cachedRead{}, storeError("reading "+r.name, err)
		}
		v = cachedRead{}
		if len(got) > 0 {
			v.item = got[0].Value
		}
		after, err := r.bounds(ctx, k, true)
		if err == nil && after == b {
			return v, nil
		}
		b = after
	}
	return v, err
}

// end reads the first item stored within the deque's bounds from one end
// (dir): an item expired at that end is passed over, as the owner's view
// passes it over.
func (r *Reader) end(ctx context.Context, key string, dir statestore.Direction) ([]byte, bool, error) {
	k, err := r.where(ctx, key)
	if err != nil {
		return nil, false, err
	}
	side := "front"
	if dir == statestore.Backward {
		side = "back"
	}
	v, err := r.cached(r.cacheKey(k, side), func() (cachedRead, error) {
		return r.firstStored(ctx, k, dir, func(b statestore.Bounds) (statestore.Range, bool) {
			return statestore.Range{From: b.Head, To: b.Tail}, b.Len() > 0
		})
	})
	return v.item, v.item != nil, err
}

// Scan returns a cursor over key's map entries or deque items in order
// (dir), read from the store (scans are not cached); its chunks are read
// with ctx.
func (r *Reader) Scan(ctx context.Context, key string, dir statestore.Direction, keysOnly bool) (*Cursor, error) {
	k, err := r.where(ctx, key)
	if err != nil {
		return nil, err
	}
	if r.kind == config.CollectionMap {
		s := &storeMapScan{store: r.rs.store, k: k, name: r.name, dir: dir, keysOnly: keysOnly}
		return &Cursor{ctx: ctx, next: s.chunk}, nil
	}
	b, err := r.rs.store.DequeBounds(ctx, k, r.name)
	if err != nil {
		return nil, storeError("reading "+r.name, err)
	}
	s := &storeDequeScan{store: r.rs.store, k: k, name: r.name, dir: dir, b: b}
	return &Cursor{ctx: ctx, next: s.chunk}, nil
}

// storeMapScan walks a map in the store alone.
type storeMapScan struct {
	store    statestore.Store
	k        statestore.Key
	name     string
	dir      statestore.Direction
	keysOnly bool
	last     string
	hasLast  bool
}

func (s *storeMapScan) chunk(ctx context.Context) ([]Item, error) {
	got, err := s.store.MapScan(ctx, s.k, s.name, s.dir, s.last, s.hasLast, ChunkSize, s.keysOnly)
	if err != nil {
		return nil, storeError("scanning "+s.name, err)
	}
	out := make([]Item, len(got))
	for i, e := range got {
		out[i] = Item{Key: e.Key, Value: e.Value}
	}
	if len(got) > 0 {
		s.last, s.hasLast = got[len(got)-1].Key, true
	}
	return out, nil
}

// storeDequeScan walks a deque in the store alone, within the bounds it
// had when the scan began.
type storeDequeScan struct {
	store statestore.Store
	k     statestore.Key
	name  string
	dir   statestore.Direction
	b     statestore.Bounds
}

func (s *storeDequeScan) chunk(ctx context.Context) ([]Item, error) {
	if s.b.Len() <= 0 {
		return nil, nil
	}
	got, err := s.store.DequeSlots(ctx, s.k, s.name, statestore.Range{From: s.b.Head, To: s.b.Tail}, s.dir, ChunkSize)
	if err != nil {
		return nil, storeError("scanning "+s.name, err)
	}
	if len(got) == 0 {
		s.b = statestore.Bounds{}
		return nil, nil
	}
	out := make([]Item, len(got))
	for i, sl := range got {
		out[i] = Item{Value: sl.Value}
	}
	if s.dir == statestore.Forward {
		s.b.Head = got[len(got)-1].Index + 1
	} else {
		s.b.Tail = got[len(got)-1].Index
	}
	return out, nil
}
