package timerstore

import (
	"container/list"
	"math"
	"sync"
)

// keyCacheSize bounds the key partitions one segment keeps in memory (the
// spec's 8192 per partition): a few hundred bytes each for a key with a
// timer or two, so a partition's cache stays near a few megabytes however
// many keys it sees.
const keyCacheSize = 8192

// keyCacheLifetime bounds how long a key's state is trusted without being
// read again, and failedKeyPause how long a key whose write failed is read
// again before every operation: a write that timed out may still land
// after the next read, and rows read back carry TTLs written by an earlier
// owner, perhaps with a shorter retention than ours.
const (
	keyCacheLifetime = 10 * 60 // seconds
	failedKeyPause   = 60      // seconds
)

// keyCache keeps the key partitions of timer_typed_keys that this segment
// read or wrote, so that scheduling or removing a timer does not first read
// the key's state back from Cassandra. It is exact, not a hint: the
// partition's owner is the only writer of its keys, and every write through
// the segment stores the state it leaves behind. Each operation takes a
// version when it starts (begin) and stores its result only if no other
// operation on the key stored one in between (put); otherwise, and after a
// failed write, the key is dropped and the next operation reads it again.
type keyCache struct {
	mu   sync.Mutex
	max  int
	next uint64
	lru  *list.List // of *cachedKey, most recently used first
	keys map[string]*list.Element
}

type cachedKey struct {
	key     string
	kp      keyPartition
	version uint64 // changes whenever kp is replaced or dropped
	// validUntil is when kp stops being trusted (epoch seconds): when a
	// row of it may expire in Cassandra (each lives until its timer's
	// time plus the retention), or keyCacheLifetime after it was stored;
	// 0 while the entry holds only a version.
	validUntil int64
	// failedUntil: a write to the key failed; until then its state is
	// read before every operation and not kept.
	failedUntil int64
}

func newKeyCache(max int) *keyCache {
	return &keyCache{max: max, lru: list.New(), keys: map[string]*list.Element{}}
}

// begin returns the key's cached state, if known and still valid at now
// (epoch seconds), and the version a later put must match.
func (c *keyCache) begin(key string, now int64) (keyPartition, bool, uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.keys[key]; ok {
		c.lru.MoveToFront(el)
		e := el.Value.(*cachedKey)
		if now < e.validUntil {
			return e.kp, true, e.version
		}
		return keyPartition{}, false, e.version
	}
	c.next++
	c.keys[key] = c.lru.PushFront(&cachedKey{key: key, version: c.next})
	if c.lru.Len() > c.max {
		old := c.lru.Remove(c.lru.Back()).(*cachedKey)
		delete(c.keys, old.key)
	}
	return keyPartition{}, false, c.next
}

// put stores kp as the key's state if the key is still at version; else
// another operation ran on the key meanwhile and the key is dropped.
func (c *keyCache) put(key string, version uint64, kp keyPartition, retention, now int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.keys[key]
	if !ok {
		return // evicted meanwhile
	}
	e := el.Value.(*cachedKey)
	if e.version != version || now < e.failedUntil {
		c.forget(e)
		return
	}
	c.next++
	e.kp, e.version = kp, c.next
	e.validUntil = min(kp.validUntil(retention), now+keyCacheLifetime)
}

// forget leaves e holding only a new version.
func (c *keyCache) forget(e *cachedKey) {
	c.next++
	e.kp, e.version, e.validUntil = keyPartition{}, c.next, 0
}

// drop forgets the key's state: a write failed, so what Cassandra holds is
// not known.
func (c *keyCache) drop(key string, now int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.keys[key]; ok {
		e := el.Value.(*cachedKey)
		c.forget(e)
		e.failedUntil = now + failedKeyPause
	}
}

// validUntil is the first moment a row of kp may have expired: the earliest
// timer's time plus the retention.
func (kp keyPartition) validUntil(retention int64) int64 {
	earliest := int64(math.MaxInt64)
	for _, st := range kp.state {
		earliest = min(earliest, int64(uint32(st.Time)))
	}
	for _, rows := range kp.rows {
		for _, r := range rows {
			earliest = min(earliest, int64(r.time))
		}
	}
	if earliest == math.MaxInt64 {
		return earliest
	}
	return earliest + retention
}

// with returns a copy of kp in which typ has the given state (nil: none)
// and rows (nil: none). The cache never shares maps with a caller that
// could change them.
func (kp keyPartition) with(typ Type, st *keyTimerState, rows []keyEntry) keyPartition {
	out := keyPartition{state: make(map[int8]keyTimerState, len(kp.state)+1), rows: make(map[Type][]keyEntry, len(kp.rows)+1)}
	for t, s := range kp.state {
		out.state[t] = s
	}
	for t, r := range kp.rows {
		out.rows[t] = r
	}
	if st != nil {
		out.state[int8(typ)] = *st
	} else {
		delete(out.state, int8(typ))
	}
	if len(rows) > 0 {
		out.rows[typ] = rows
	} else {
		delete(out.rows, typ)
	}
	return out
}
