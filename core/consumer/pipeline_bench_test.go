package consumer

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/deferral"
	"github.com/prosody-events/prosody-go/core/deferstore"
	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/fetch"
	"github.com/prosody-events/prosody-go/core/filter"
	"github.com/prosody-events/prosody-go/core/middleware"
	"github.com/prosody-events/prosody-go/internal/benchkit"
)

// BenchmarkPipeline measures the engine's own work per message, without
// Kafka: records already fetched go through admit, the key queues, the
// executor, the default middleware chain and a no-op handler, and their
// offsets are finished. One op is one message. cmd/prosody-bench gives the
// end-to-end figure against a real broker; this one isolates the code path
// this package owns, so that a change to it can be compared with
// `go test -bench Pipeline -count 6` and benchstat.
//
// default is the stack the client builds at the default configuration
// (pipeline mode with the telemetry broadcast, the failure-rate gate,
// monopolization, and every partition's deferral state); bare leaves out
// the broadcast and the deferral state, so the two compare what deferral
// and its trackers cost a message that never fails.
func BenchmarkPipeline(b *testing.B) {
	b.Run("default", func(b *testing.B) { benchmarkPipeline(b, true) })
	b.Run("bare", func(b *testing.B) { benchmarkPipeline(b, false) })
}

func benchmarkPipeline(b *testing.B, full bool) {
	const partitions, keys = 8, 10_000
	def := config.Default()
	var handled atomic.Int64
	done := make(chan struct{})
	target := int64(b.N)
	h := event.HandlerFuncs{Message: func(*event.Context, *event.Message) error {
		if handled.Add(1) == target {
			close(done)
		}
		return nil
	}}
	build := benchkit.BareStacks
	if full {
		build = benchkit.PipelineStacks
	}
	stacks, stop, limiter := build(def, h)
	defer stop()
	c := &Consumer{
		opts:       Options{GroupID: "bench", MaxUncommitted: def.MaxUncommitted, ShutdownTimeout: time.Second, Stacks: stacks, Scheduler: limiter},
		log:        slog.New(slog.NewTextHandler(io.Discard, nil)),
		eventTypes: filter.NewEventTypes(nil),
		exec:       newExecutor(),
		rescue:     newRescuer(),
		slowRun:    slowRun,
	}
	defer c.exec.close()
	defer c.rescue.close()

	// A pool of records per partition, made before the timer starts and
	// reused with fresh offsets: admit copies what it keeps, and a live heap
	// of b.N records would make the benchmark about the garbage collector.
	// Keys spread over the partitions as a key partitioner would.
	const pool = 4096
	filler := make([]byte, 120)
	for i := range filler {
		filler[i] = 'x'
	}
	records := make([][]fetch.Record, partitions)
	for i := 0; len(records[partitions-1]) < pool; i++ {
		k := i % keys
		part := k % partitions
		if len(records[part]) == pool {
			continue
		}
		records[part] = append(records[part], fetch.Record{
			Timestamp: time.Now(),
			Key:       fmt.Appendf(nil, "key-%d", k),
			// No id: a message's deduplication id then comes from its
			// offset, which is fresh at every use of the pool (a reused id
			// would be skipped as handled before, and its handler never
			// run).
			Value: fmt.Appendf(nil, `{"type":"bench","seq":%d,"data":"%s"}`, i, filler),
		})
	}

	ps := make([]*partition, partitions)
	store := deferstore.NewMemory()
	for i := range ps {
		ps[i] = newPartition(c, "bench", int32(i))
		if full {
			msgs, _ := store.Messages(context.Background(), "bench", "bench", int32(i))
			tms, _ := store.Timers(context.Background(), "bench", "bench", int32(i))
			dp := deferral.NewPartition(&deferral.Partition{Topic: "bench", ID: int32(i), Messages: msgs, Timers: tms}, nil, nil)
			ps[i].env.Deferral, ps[i].inlineEnv.Deferral = dp, dp
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	var feeders sync.WaitGroup
	for i, p := range ps {
		feeders.Add(1)
		go func(p *partition, pool []fetch.Record, share int) {
			defer feeders.Done()
			// The partition's driver, without sarama: bursts of up to
			// maxBurst, started inline, waiting for room when the
			// partition is full.
			burst := make([]fetch.Record, 0, maxBurst)
			way := new(middleware.Run)
			for off := 0; off < share; {
				burst = burst[:0]
				for k := off; k < share && len(burst) < maxBurst; k++ {
					r := pool[k%len(pool)]
					r.Offset = int64(k)
					burst = append(burst, r)
					if k%len(pool) == len(pool)-1 {
						break // the rest of the pool may still be in use
					}
				}
				n := p.admit(burst)
				p.runReady(0, way)
				off += n
				if n == 0 {
					<-p.room
				}
			}
		}(p, records[i], b.N/partitions+boolInt(i < b.N%partitions))
	}
	<-done
	b.StopTimer()
	feeders.Wait()
	for _, p := range ps {
		p.drain(time.Second, ErrStopped)
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
