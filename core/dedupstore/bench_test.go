package dedupstore

import (
	"sync"
	"testing"
	"time"
)

// BenchmarkCassandra looks up and then records b.N fresh ids with up to
// 4,096 calls under way, as a busy consumer makes them, and reports the
// rate of each.
func BenchmarkCassandra(b *testing.B) {
	s := cassandraBackend(b)(b, time.Hour)
	ids := make([]ID, b.N)
	for i := range ids {
		ids[i] = newID()
	}
	slots := make(chan struct{}, 4096)
	var wg sync.WaitGroup
	run := func(call func(id ID, done func())) time.Duration {
		start := time.Now()
		for _, id := range ids {
			slots <- struct{}{}
			wg.Add(1)
			call(id, func() { <-slots; wg.Done() })
		}
		wg.Wait()
		return time.Since(start)
	}
	b.ResetTimer()
	reads := run(func(id ID, done func()) { s.Exists(id, func(bool, error) { done() }) })
	writes := run(func(id ID, done func()) { s.Record(id, func(error) { done() }) })
	b.ReportMetric(float64(b.N)/reads.Seconds(), "lookups/s")
	b.ReportMetric(float64(b.N)/writes.Seconds(), "records/s")
}
