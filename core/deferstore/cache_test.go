package deferstore

import "testing"

func TestCacheEvictsLeastRecentlyUsed(t *testing.T) {
	c := newCache[int](2)
	c.put("a", 1)
	c.put("b", 2)
	if v, ok := c.get("a"); !ok || v != 1 { // a is now the most recent
		t.Fatalf("get(a) = %d, %v", v, ok)
	}
	c.put("c", 3)
	if _, ok := c.get("b"); ok {
		t.Fatal("b survived eviction")
	}
	c.put("a", 10)
	if v, _ := c.get("a"); v != 10 || c.len() != 2 {
		t.Fatalf("get(a) = %d, len %d", v, c.len())
	}
	c.del("a")
	if _, ok := c.get("a"); ok {
		t.Fatal("a survived del")
	}
}

func TestCacheOfZeroCapacityHoldsNothing(t *testing.T) {
	c := newCache[int](0)
	c.put("a", 1)
	if _, ok := c.get("a"); ok || c.len() != 0 {
		t.Fatal("a disabled cache kept an entry")
	}
}
