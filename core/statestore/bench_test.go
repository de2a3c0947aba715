package statestore

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/prosody-events/prosody-go/core/config"
)

// A typical small write: a value, two map entries and the marker.
func smallWrite(i int) Write {
	v := []byte(fmt.Sprintf(`{"count":%d,"note":"a typical small JSON value"}`, i))
	return Write{Changes: []Change{
		{Collection: "total", Kind: config.CollectionValue, Value: v},
		{Collection: "items", Kind: config.CollectionMap, Puts: []Entry{{Key: fmt.Sprint(i % 50), Value: v}, {Key: "last", Value: v}}},
	}, Marker: &Marker{Source: "orders/0", Offset: int64(i)}}
}

// benchApply reports the median and 99th percentile besides the mean: a
// network store's tail is what a consumer's throughput feels.
func benchApply(b *testing.B, s Store) {
	ctx := testCtx(b)
	var took []time.Duration
	i := 0
	for b.Loop() {
		k := Key{Namespace: "bench", Key: fmt.Sprint(i % 1000)}
		w := smallWrite(i)
		start := time.Now()
		if err := s.Apply(ctx, k, w); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(start))
		i++
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(took[len(took)*99/100].Microseconds()), "p99-µs")
}

func BenchmarkCassandraApply(b *testing.B) { benchApply(b, cassandraEnv(b)(b)) }

func BenchmarkCassandraCachedApply(b *testing.B) {
	benchApply(b, cachedFor(b, cassandraEnv(b)(b), testCacheBytes))
}

func BenchmarkMemoryApply(b *testing.B) { benchApply(b, NewMemory()) }

func BenchmarkMemoryCachedApply(b *testing.B) {
	benchApply(b, cachedFor(b, NewMemory(), testCacheBytes))
}

// Reads of a hot key: the cache's reason to exist.
func BenchmarkCassandraValue(b *testing.B) {
	for _, cached := range []bool{false, true} {
		b.Run(map[bool]string{false: "plain", true: "cached"}[cached], func(b *testing.B) {
			var s Store = cassandraEnv(b)(b)
			if cached {
				s = cachedFor(b, s, testCacheBytes)
			}
			ctx := testCtx(b)
			k := Key{Namespace: "bench", Key: "hot"}
			if err := s.Apply(ctx, k, smallWrite(1)); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, ok, err := s.Value(ctx, k, "total"); err != nil || !ok {
					b.Fatal(ok, err)
				}
			}
		})
	}
}
