package producer

import (
	"bytes"
	"encoding/hex"
	"testing"

	"github.com/zeebo/xxh3"
)

func TestIDKeyInputLayout(t *testing.T) {
	got := appendIDKeyInput(nil, "orders", "k1", "evt-9")
	want, _ := hex.DecodeString(
		"06000000" + hex.EncodeToString([]byte("orders")) +
			"02000000" + hex.EncodeToString([]byte("k1")) +
			"05000000" + hex.EncodeToString([]byte("evt-9")))
	if !bytes.Equal(got, want) {
		t.Fatalf("input = %x, want %x", got, want)
	}
	if idKey("orders", "k1", "evt-9") != xxh3.Hash128(want) {
		t.Error("idKey is not XXH3-128 of its input")
	}
	// Length prefixes separate the fields.
	if idKey("ab", "c", "x") == idKey("a", "bc", "x") {
		t.Error("field boundaries do not change the key")
	}
}

// Known-answer test: XXH3-128 of the empty input with seed 0, from the
// xxHash reference implementation's test vectors. It pins the library to
// the reference algorithm the original uses.
func TestXXH3128KnownAnswer(t *testing.T) {
	got := xxh3.Hash128(nil).Bytes()
	if h := hex.EncodeToString(got[:]); h != "99aa06d3014798d86001c324468d497f" {
		t.Fatalf("XXH3-128(\"\") = %s", h)
	}
}

func TestIDCache(t *testing.T) {
	k := func(s string) xxh3.Uint128 { return idKey("t", "k", s) }

	t.Run("disabled", func(t *testing.T) {
		if c := newIDCache(0); c != nil {
			t.Fatal("size 0 should disable the cache")
		}
	})

	t.Run("evicts least recently used", func(t *testing.T) {
		c := newIDCache(3)
		for _, id := range []string{"a", "b", "c"} {
			c.add(k(id))
		}
		if !c.contains(k("a")) { // a becomes most recent
			t.Fatal("a missing")
		}
		c.add(k("d")) // evicts b
		for id, want := range map[string]bool{"a": true, "b": false, "c": true, "d": true} {
			if got := c.contains(k(id)); got != want {
				t.Errorf("contains(%s) = %v, want %v", id, got, want)
			}
		}
		if c.len() != 3 {
			t.Errorf("len = %d, want 3", c.len())
		}
	})

	t.Run("re-adding refreshes without growing", func(t *testing.T) {
		c := newIDCache(2)
		c.add(k("a"))
		c.add(k("b"))
		c.add(k("a")) // a most recent
		c.add(k("c")) // evicts b
		if !c.contains(k("a")) || c.contains(k("b")) || !c.contains(k("c")) || c.len() != 2 {
			t.Error("unexpected contents after refresh")
		}
	})

	t.Run("capacity one", func(t *testing.T) {
		c := newIDCache(1)
		for _, id := range []string{"a", "b", "c"} {
			c.add(k(id))
			if !c.contains(k(id)) || c.len() != 1 {
				t.Fatalf("after add(%s): contains=%v len=%d", id, c.contains(k(id)), c.len())
			}
		}
	})

	t.Run("long churn keeps exactly the newest", func(t *testing.T) {
		const size = 100
		c := newIDCache(size)
		for i := range 10 * size {
			c.add(idKey("t", "k", string(rune('a'+i%26))+string(rune(i))))
		}
		for i := 9 * size; i < 10*size; i++ {
			if !c.contains(idKey("t", "k", string(rune('a'+i%26))+string(rune(i)))) {
				t.Fatalf("recent entry %d evicted", i)
			}
		}
		if c.len() != size {
			t.Errorf("len = %d, want %d", c.len(), size)
		}
	})
}
