package producer

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/prosody-events/prosody-go/core/payload"
)

// Sequential awaited sends: one record in flight at a time, so this
// measures the round trip through sarama and the mock broker.
func BenchmarkSend(b *testing.B) {
	p := newMockProducer(b, nil)
	topic, _ := mockTopic(b, 8)
	payload := []byte(`{"type":"bench","value":12345}`)
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := p.Send(ctx, topic, strconv.Itoa(i%64), payload); err != nil {
			b.Fatal(err)
		}
	}
}

// Many goroutines sending at once share the producer; sarama batches their
// records, so throughput is far higher than BenchmarkSend's.
func BenchmarkSendParallel(b *testing.B) {
	p := newMockProducer(b, nil)
	topic, _ := mockTopic(b, 8)
	ctx := context.Background()
	var n atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(16)
	b.RunParallel(func(pb *testing.PB) {
		payload := []byte(`{"type":"bench","value":12345}`)
		for pb.Next() {
			i := n.Add(1)
			if _, err := p.Send(ctx, topic, strconv.FormatInt(i%64, 10), payload); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// The id path: validating the payload and extracting its id, hashing the triple and the cache
// lookup, without the network.
func BenchmarkIDCachePath(b *testing.B) {
	c := newIDCache(8192)
	doc := []byte(`{"type":"order.created","id":"4f1c2a9e-8d1b-4f5e-9a77-1d2c3b4a5f60","data":{"amount":12,"items":[1,2,3]}}`)
	b.ReportAllocs()
	for b.Loop() {
		f, err := payload.Meta(doc)
		if err != nil {
			b.Fatal(err)
		}
		k := idKey("orders", "customer-17", f.ID)
		if !c.contains(k) {
			c.add(k)
		}
	}
}
