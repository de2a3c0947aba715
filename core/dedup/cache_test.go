package dedup

import "testing"

// Two ids sharing the half that keys the cache are told apart: the cache
// holds the later one, and the earlier is a miss, never a false hit.
func TestCacheTellsCollisionsApart(t *testing.T) {
	c := newCache(16)
	defer c.close()
	var a, b ID
	a[15], b[15] = 1, 2 // same first half, different second
	c.add(a)
	c.wait()
	if !c.has(a) || c.has(b) {
		t.Fatalf("after adding a: has(a) %v, has(b) %v", c.has(a), c.has(b))
	}
	c.add(b)
	c.wait()
	if c.has(a) || !c.has(b) {
		t.Fatalf("after adding b: has(a) %v, has(b) %v", c.has(a), c.has(b))
	}
}
