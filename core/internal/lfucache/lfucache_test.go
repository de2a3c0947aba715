package lfucache

import (
	"sync"
	"testing"
	"time"

	"github.com/dgraph-io/ristretto/v2"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newCache(t *testing.T) *Cache[uint64, int] {
	t.Helper()
	c, err := New(&ristretto.Config[uint64, int]{NumCounters: 1 << 12, MaxCost: 1 << 10, BufferItems: 64})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCache(t *testing.T) {
	c := newCache(t)
	defer c.Close()
	if !c.Set(1, 10, 1) {
		t.Fatal("a set into an empty cache was dropped")
	}
	c.SetWithTTL(2, 20, 1, time.Hour)
	c.Wait()
	if v, ok := c.Get(1); !ok || v != 10 {
		t.Fatalf("Get(1) = %d, %v", v, ok)
	}
	if v, ok := c.Get(2); !ok || v != 20 {
		t.Fatalf("Get(2) = %d, %v", v, ok)
	}
	c.Del(1)
	if _, ok := c.Get(1); ok {
		t.Fatal("a deleted entry is still there")
	}
}

// Calls of every kind race Close; none may panic, and after Close they do
// nothing. Run with -race: ristretto's own cache fails this (a send on a
// closed channel, or a data race on its closed flag).
func TestCallsRacingClose(t *testing.T) {
	for round := 0; round < 50; round++ {
		c := newCache(t)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for i := uint64(0); i < 500; i++ {
					c.Set(i, int(i), 1)
					c.Get(i)
					c.Del(i - 1)
					if i%50 == 0 {
						c.Wait()
					}
				}
			}()
		}
		close(start)
		c.Close()
		wg.Wait()
		c.Close()
		if c.Set(1, 1, 1) {
			t.Fatal("a set after Close was taken")
		}
		if _, ok := c.Get(1); ok {
			t.Fatal("a get after Close hit")
		}
		c.Wait()
	}
}
