package dedupstore

import (
	"os"
	"sync"
	"testing"
	"time"
)

// TestCassandraThroughput (run with DEDUP_THROUGHPUT=n) looks up and then
// records n fresh ids with up to 4,096 calls under way, as a busy consumer
// makes them, and prints the rates.
func TestCassandraThroughput(t *testing.T) {
	if os.Getenv("DEDUP_THROUGHPUT") == "" {
		t.Skip("set DEDUP_THROUGHPUT to run")
	}
	n := 200_000
	s := cassandraBackend(t)(t, time.Hour)
	ids := make([]ID, n)
	for i := range ids {
		ids[i] = newID()
	}
	slots := make(chan struct{}, 4096)
	var wg sync.WaitGroup
	start := time.Now()
	for _, id := range ids {
		slots <- struct{}{}
		wg.Add(1)
		s.Exists(id, func(bool, error) { <-slots; wg.Done() })
	}
	wg.Wait()
	reads := time.Since(start)
	start = time.Now()
	for _, id := range ids {
		slots <- struct{}{}
		wg.Add(1)
		s.Record(id, func(error) { <-slots; wg.Done() })
	}
	wg.Wait()
	writes := time.Since(start)
	t.Logf("lookups %.0f/s, records %.0f/s", float64(n)/reads.Seconds(), float64(n)/writes.Seconds())
}
