package dedup

import (
	"encoding/binary"
	"testing"

	"github.com/zeebo/xxh3"
)

// idWithKey is an id whose key half is k and check half c.
func idWithKey(k, c uint64) ID {
	var id ID
	binary.LittleEndian.PutUint64(id[0:8], k)
	binary.LittleEndian.PutUint64(id[8:16], c)
	return id
}

// Two ids sharing the half that keys the cache are told apart: the cache
// holds the later one, and the earlier is a miss, never a false hit.
func TestCacheTellsCollisionsApart(t *testing.T) {
	c := newCache(16)
	a, b := idWithKey(7, 1), idWithKey(7, 2)
	c.add(a)
	if !c.has(a) || c.has(b) {
		t.Fatalf("after adding a: has(a) %v, has(b) %v", c.has(a), c.has(b))
	}
	c.add(b)
	if c.has(a) || !c.has(b) {
		t.Fatalf("after adding b: has(a) %v, has(b) %v", c.has(a), c.has(b))
	}
}

// A set holds its last four ids: a fifth replaces the oldest, and adding
// an id again does not take a second way.
func TestCacheSetReplacesTheOldest(t *testing.T) {
	for _, size := range []int{1, 4, 100, 8192} {
		c := newCache(size)
		// Keys that differ only above every shard and set bit share a set.
		stride := uint64(1) << 40
		ids := make([]ID, 6)
		for i := range ids {
			ids[i] = idWithKey(uint64(i+1)*stride+3, uint64(i))
		}
		for _, id := range ids[:4] {
			c.add(id)
		}
		c.add(ids[0]) // again: still one way
		for i, id := range ids[:4] {
			if !c.has(id) {
				t.Fatalf("size %d: id %d missing from a set holding four", size, i)
			}
		}
		c.add(ids[4])
		if c.has(ids[0]) || !c.has(ids[4]) || !c.has(ids[1]) {
			t.Fatalf("size %d: the fifth id replaces the oldest: has(0) %v has(4) %v has(1) %v",
				size, c.has(ids[0]), c.has(ids[4]), c.has(ids[1]))
		}
		c.add(ids[5])
		if c.has(ids[1]) || !c.has(ids[5]) {
			t.Fatalf("size %d: the sixth replaces the next oldest", size)
		}
	}
}

// The cache has room for its size: ids spread evenly over the sets all
// stay, and it holds most of the last size ids of a random stream.
func TestCacheHoldsItsSize(t *testing.T) {
	const size = 8192
	c := newCache(size)
	for k := uint64(1); k <= size; k++ {
		c.add(idWithKey(k, k))
	}
	for k := uint64(1); k <= size; k++ {
		if !c.has(idWithKey(k, k)) {
			t.Fatalf("id %d of %d evenly spread is missing", k, size)
		}
	}
	c = newCache(size)
	ids := make([]ID, 0, size)
	for i := 0; i < 3*size; i++ {
		id := spreadID(uint64(i))
		c.add(id)
		if i >= 2*size {
			ids = append(ids, id)
		}
	}
	held := 0
	for _, id := range ids {
		if c.has(id) {
			held++
		}
	}
	if held < size*6/10 {
		t.Fatalf("holds %d of the last %d random ids, want most", held, size)
	}
}

// spreadID is the nth of a stream of well-spread ids, as real ones are.
func spreadID(n uint64) ID {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], n)
	return fromDigest(xxh3.Hash128(b[:]))
}
