// Command prosody-bench measures consumer throughput on a real broker: the
// Prosody engine with a no-op handler against a raw sarama consumer group
// reading the same topic in the same run. Each reader uses a fresh consumer
// group and reads the topic from the start, so both do the same work; the
// order rotates across rounds so none always gets a warm cache.
//
// The readers (-readers) are:
//
//   - sarama: a raw sarama consumer group that marks each message;
//
//   - prosody: the engine as the client runs it at the default
//     configuration (pipeline mode with deferral and monopolization on,
//     durable timers, defer stores and deduplication ids in memory, or
//     in Cassandra with -cassandra);
//
//   - nodedup: prosody with idempotence_cache_size 0, which leaves
//     deduplication out (its cost is prosody against nodedup);
//
//   - traced: nodedup with the core's spans recorded by the OpenTelemetry
//     SDK and exported to a no-op exporter, or over OTLP when
//     OTEL_EXPORTER_OTLP_ENDPOINT is set (the cost of tracing is traced
//     against nodedup; OTEL_TRACES_SAMPLER applies);
//
//   - observed: nodedup with the observers a client subscribes by
//     default outside mock mode: the telemetry emitter (writing to a
//     topic of its own) and the metrics of the probe server;
//
//   - bare: the engine without the telemetry broadcast, timers,
//     deferral and deduplication (the layers' cost is prosody against
//     bare);
//
//   - failing: prosody with 1 % of the keys failing transiently for
//     -fail-for: its rate counts the healthy keys' messages, so it compares
//     with prosody's rate over the same messages, and it also reports when
//     the last deferred message was handled.
//
//     go run ./cmd/prosody-bench -brokers localhost:9094 -messages 1000000
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"runtime"
	runtimemetrics "runtime/metrics"
	"runtime/pprof"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prosody-events/prosody-go/core/emitter"
	"github.com/prosody-events/prosody-go/core/metrics"

	"github.com/prosody-events/prosody-go/core/tracing"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/IBM/sarama"

	"github.com/prosody-events/prosody-go/core/cassandra"
	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/consumer"
	"github.com/prosody-events/prosody-go/core/dedupstore"
	"github.com/prosody-events/prosody-go/core/deferstore"
	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/middleware"
	"github.com/prosody-events/prosody-go/core/timerstore"
	"github.com/prosody-events/prosody-go/internal/benchkit"
	"github.com/prosody-events/prosody-go/internal/benchreader"
)

var (
	verbose        = flag.Bool("v", false, "print details of each engine run")
	progress       = flag.Duration("progress", 0, "print each reader's message count at this interval (0: never)")
	maxUncommitted = flag.Int("max-uncommitted", 0, "max_uncommitted for the engine (0: the default configuration's)")
	readers        = flag.String("readers", "sarama,prosody", "readers to run each round, comma-separated: sarama, prosody, nodedup, traced, observed, bare, failing")
	failFor        = flag.Duration("fail-for", 30*time.Second, "how long the failing reader's failing keys fail")
	cassandraNodes = flag.String("cassandra", "", "Cassandra nodes for the engine's timer and defer stores (default: in memory)")
	jsonOut        = flag.String("json", "", "also write the results to this file as JSON (benchkit.Report)")
)

func main() {
	brokers := flag.String("brokers", "localhost:9094", "bootstrap servers")
	messages := flag.Int("messages", 1_000_000, "messages to produce and consume")
	partitions := flag.Int("partitions", 8, "partitions of the benchmark topic")
	keys := flag.Int("keys", 10_000, "distinct keys")
	size := flag.Int("size", 200, "approximate payload size in bytes")
	rounds := flag.Int("rounds", 2, "rounds; each runs both readers")
	topic := flag.String("topic", "", "reuse this topic (already filled) instead of creating one")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the prosody runs to this file")
	memProfile := flag.String("memprofile", "", "write an allocation profile (cumulative since start, so it includes the raw sarama run before it) after the first prosody run to this file")
	profileRate := flag.Int("profilerate", 0, "CPU profile sampling rate in Hz (default 100)")
	peakHeap := flag.String("peakheap", "", "write the heap profile of the first prosody run's largest live heap (sampled every 100 ms) to this file, and print the live heap's peak")
	flag.Parse()
	sarama.Logger = log.New(io.Discard, "", 0)
	addrs := strings.Split(*brokers, ",")

	name := *topic
	if name == "" {
		name = "prosody-bench-" + suffix()
		start := time.Now()
		must(benchkit.Fill(addrs, name, int32(*partitions), *messages, *keys, *size))
		el := time.Since(start)
		fmt.Printf("produced %d messages (%d bytes each, %d keys) to %s in %v (%.0f msg/s)\n",
			*messages, *size, *keys, name, el.Round(time.Millisecond), float64(*messages)/el.Seconds())
	}

	if *cassandraNodes != "" {
		// The keyspace's migrations run now, not inside the first round.
		_, _, _, err := stores(config.Default())
		must(err)
	}
	results := map[string][]float64{}
	names := strings.Split(*readers, ",")
	report := benchkit.NewReport("prosody-bench", "msg/s", names[0], map[string]any{
		"messages": *messages, "partitions": *partitions, "keys": *keys, "size": *size, "rounds": *rounds,
		"readers": names, "stores_in_cassandra": *cassandraNodes != "",
	})
	if slices.Contains(names, "failing") {
		report.Params["fail_for_s"] = failFor.Seconds()
	}
	for r := 0; r < *rounds; r++ {
		order := append(slices.Clone(names[r%len(names):]), names[:r%len(names)]...)
		for _, reader := range order {
			var el, first time.Duration
			var err error
			cpu0, sys0 := benchkit.CPUTime()
			var ms0, ms1 runtime.MemStats
			runtime.ReadMemStats(&ms0)
			n := *messages
			healthy0 := len(healthyRates)
			lastDeferred = 0
			if reader == "sarama" {
				el, first, err = rawSarama(addrs, name, *messages)
			} else {
				stop := startProfile(*cpuProfile, *profileRate, r)
				stopPeak := startPeakHeap(*peakHeap, r)
				el, first, n, err = engine(addrs, name, *messages, *keys, reader)
				stopPeak()
				stop()
				if *memProfile != "" && r == 0 {
					f, ferr := os.Create(*memProfile)
					must(ferr)
					must(pprof.Lookup("allocs").WriteTo(f, 0))
					f.Close()
				}
			}
			cpu1, sys1 := benchkit.CPUTime()
			cpu, sys := cpu1-cpu0, sys1-sys0
			runtime.ReadMemStats(&ms1)
			if *verbose {
				fmt.Printf("  %s: cpu %v of which system %v\n", reader, cpu.Round(time.Millisecond), sys.Round(time.Millisecond))
				fmt.Printf("  %s: %.1f allocs/msg, %.0f bytes/msg, %d GCs\n", reader, float64(ms1.Mallocs-ms0.Mallocs)/float64(*messages),
					float64(ms1.TotalAlloc-ms0.TotalAlloc)/float64(*messages), ms1.NumGC-ms0.NumGC)
			}
			must(err)
			rate := float64(n) / el.Seconds()
			reading := float64(n-1) / (el - first).Seconds()
			results[reader] = append(results[reader], rate)
			results[reader+" reading"] = append(results[reader+" reading"], reading)
			report.Add(reader, "rate", rate)
			report.Add(reader, "rate_from_first", reading)
			report.Add(reader, "cpu_us_per_msg", float64(cpu.Nanoseconds())/float64(*messages)/1e3)
			report.Add(reader, "bytes_per_msg", float64(ms1.TotalAlloc-ms0.TotalAlloc)/float64(*messages))
			report.Add(reader, "allocs_per_msg", float64(ms1.Mallocs-ms0.Mallocs)/float64(*messages))
			if len(healthyRates) > healthy0 {
				report.Add(reader, "healthy_rate", healthyRates[len(healthyRates)-1])
			}
			if reader == "failing" {
				report.Add(reader, "healthy_rate", rate)
				if lastDeferred > 0 {
					report.Add(reader, "last_deferred_s", lastDeferred.Seconds())
				}
			}
			fmt.Printf("round %d %-8s %8.0f msg/s (%v, cpu %v = %.2f µs/msg; first message after %v, %.0f msg/s from there)\n", r+1, reader, rate,
				el.Round(time.Millisecond), cpu.Round(time.Millisecond), float64(cpu.Nanoseconds())/float64(*messages)/1e3,
				first.Round(time.Millisecond), reading)
		}
	}
	base := names[0]
	for _, suffix := range []string{"", " reading"} {
		what := "median"
		if suffix != "" {
			what = "median from the first message"
		}
		fmt.Printf("%s ", what)
		for _, reader := range names {
			fmt.Printf(" %s %.0f msg/s", reader, median(results[reader+suffix]))
			if reader != base {
				fmt.Printf(" (%.2f of %s)", median(results[reader+suffix])/median(results[base+suffix]), base)
			}
		}
		fmt.Println()
	}
	if slices.Contains(names, "failing") && slices.Contains(names, "prosody") {
		fmt.Printf("healthy keys with 1%% failing against none: %.2f\n", median(results["failing"])/median(healthyRates))
	}
	must(report.Write(*jsonOut))
}

// failingKey reports whether key (benchkit's "key-%05d") is one of the
// failing reader's 1 % of keys.
func failingKey(key string) bool { return strings.HasSuffix(key, "00") }

// failingIndex is failingKey of the key benchkit.Fill writes for key
// number k ("key-%05d"), without formatting it.
func failingIndex(k int) bool { return k%100 == 0 }

// startProfile profiles the first prosody round when path is set.
func startProfile(path string, rate, round int) func() {
	if path == "" || round > 0 {
		return func() {}
	}
	if rate > 0 {
		// StartCPUProfile then warns that the rate is already set, and
		// keeps this one.
		runtime.SetCPUProfileRate(rate)
	}
	f, err := os.Create(path)
	must(err)
	must(pprof.StartCPUProfile(f))
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}

// startPeakHeap samples the live heap every 100 ms until the returned
// func is called, keeping the heap profile taken at its largest (a heap
// profile describes the heap as of the last collection, as the live-heap
// metric does), which it then writes to path. Only the first round is
// profiled.
func startPeakHeap(path string, round int) func() {
	if path == "" || round > 0 {
		return func() {}
	}
	done, finished := make(chan struct{}), make(chan struct{})
	var best bytes.Buffer
	var peak uint64
	sample := []runtimemetrics.Sample{{Name: "/gc/heap/live:bytes"}}
	go func() {
		defer close(finished)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			runtimemetrics.Read(sample)
			if live := sample[0].Value.Uint64(); live > peak {
				peak = live
				best.Reset()
				must(pprof.Lookup("heap").WriteTo(&best, 0))
			}
		}
	}()
	return func() {
		close(done)
		<-finished
		fmt.Printf("  peak live heap %.1f MiB\n", float64(peak)/(1<<20))
		must(os.WriteFile(path, best.Bytes(), 0o644))
	}
}

// rawSarama is the floor: a consumer group that marks every message and
// does nothing else.
//
// It returns the time from the start to the last message and to the first.
func rawSarama(addrs []string, topic string, n int) (el, first time.Duration, err error) {
	cfg := saramaConfig()
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyCooperativeSticky()}
	group, err := sarama.NewConsumerGroup(addrs, "bench-sarama-"+suffix(), cfg)
	if err != nil {
		return 0, 0, err
	}
	defer group.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := &countingHandler{target: int64(n), done: cancel}
	start := time.Now()
	defer printProgress(start, h.count.Load, func() int64 { return 0 })()
	for ctx.Err() == nil {
		if err := group.Consume(ctx, []string{topic}, h); err != nil {
			return 0, 0, err
		}
	}
	return h.elapsed(start), time.Unix(0, h.first.Load()).Sub(start), nil
}

type countingHandler struct {
	target   int64
	count    atomic.Int64
	first    atomic.Int64 // unix nanos of the first message
	finished atomic.Int64 // unix nanos when the target was reached
	done     context.CancelFunc
}

func (h *countingHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *countingHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h *countingHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for m := range c.Messages() {
		s.MarkMessage(m, "")
		n := h.count.Add(1)
		if n == 1 {
			h.first.Store(time.Now().UnixNano())
		}
		if n == h.target {
			h.finished.Store(time.Now().UnixNano())
			h.done()
		}
	}
	return nil
}

func (h *countingHandler) elapsed(start time.Time) time.Duration {
	return time.Unix(0, h.finished.Load()).Sub(start)
}

// engine runs the Prosody consumer as the client runs it at the default
// configuration (or, for the bare reader, without the telemetry
// broadcast, timers and deferral), with a handler that does nothing. It
// returns the time from the start to the last message and to the first,
// and how many messages that counts: for the failing reader, the healthy
// keys' messages.
func engine(addrs []string, topic string, n, keys int, reader string) (el, first time.Duration, counted int, err error) {
	def := config.Default()
	if *maxUncommitted > 0 {
		def.MaxUncommitted = *maxUncommitted
	}
	// The prosody reader also times the healthy keys' messages alone, the
	// failing reader's measure.
	// Counted, not formatted: the run's CPU and allocation figures are
	// measured around this call, and a million key strings made here
	// showed up in both.
	healthyTarget := int64(0)
	for i := 0; i < n; i++ {
		if !failingIndex(i % keys) {
			healthyTarget++
		}
	}
	counted = n
	failing := reader == "failing"
	if failing {
		counted = int(healthyTarget)
	}
	var count, all, healthy atomic.Int64
	finished := make(chan time.Time, 1)
	allDone := make(chan time.Time, 1)
	var firstAt, healthyAt atomic.Int64
	start := time.Now()
	h := event.HandlerFuncs{Message: func(_ *event.Context, m *event.Message) error {
		bad := failingKey(m.Key)
		if failing && bad && time.Since(start) < *failFor {
			return errFailing
		}
		if !bad && healthy.Add(1) == healthyTarget {
			healthyAt.Store(time.Now().UnixNano())
		}
		if a := all.Add(1); a == int64(n) {
			allDone <- time.Now()
		}
		if failing && bad {
			return nil
		}
		c := count.Add(1)
		if c == 1 {
			firstAt.Store(time.Now().UnixNano())
		}
		if c == int64(counted) {
			finished <- time.Now()
		}
		return nil
	}}
	def.GroupID = "bench-prosody-" + suffix()
	opts := benchreader.Options(def, addrs, def.GroupID, topic, slog.LevelWarn)
	var stacks middleware.Stacks
	var stop func()
	if reader == "bare" {
		stacks, stop, opts.Scheduler = benchkit.BareStacks(def, h)
	} else {
		if reader == "nodedup" || reader == "traced" || reader == "observed" {
			def.IdempotenceCacheSize = 0
		}
		if reader == "traced" {
			tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
			if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" {
				// Exported for real, as the OTEL_* variables say.
				if tp, err = tracing.NewProvider(context.Background()); err != nil {
					return 0, 0, 0, err
				}
			}
			tracing.SetProvider(tp)
			defer func() {
				tracing.SetProvider(nil)
				_ = tp.Shutdown(context.Background())
			}()
		}
		var ids dedupstore.Store
		opts.Timers, opts.Deferral, ids, err = stores(def)
		if err != nil {
			return 0, 0, 0, err
		}
		if reader == "observed" {
			em, err := emitter.New(emitter.Options{Brokers: addrs, Topic: "prosody-bench-telemetry-" + suffix(), Group: def.GroupID,
				Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
			if err != nil {
				return 0, 0, 0, err
			}
			defer func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				_ = em.Close(ctx)
				s := em.Stats()
				fmt.Printf("  observed: telemetry events accepted %d, delivered %d, dropped %d, failed %d\n", s.Accepted, s.Delivered, s.Dropped, s.Failed)
			}()
			stacks, stop, opts.Scheduler = benchkit.ObservedStacks(def, h, ids, em, metrics.New(metrics.Sources{}).Observer())
		} else {
			stacks, stop, opts.Scheduler = benchkit.PipelineStacksWith(def, h, ids)
		}
	}
	opts.Stacks = stacks
	defer stop()
	c, err := consumer.Start(opts)
	if err != nil {
		return 0, 0, 0, err
	}
	defer printProgress(start, count.Load, c.Stats().Pauses)()
	end := <-finished
	if failing {
		select {
		case last := <-allDone:
			lastDeferred = last.Sub(start)
			fmt.Printf("  failing: the last deferred message handled %v after the start\n", lastDeferred.Round(time.Millisecond))
		case <-time.After(*failFor + 5*time.Minute):
			fmt.Printf("  failing: %d of %d messages handled when the wait ended\n", all.Load(), n)
		}
	} else if at := healthyAt.Load(); at != 0 {
		healthyRate := float64(healthyTarget) / time.Unix(0, at).Sub(start).Seconds()
		healthyRates = append(healthyRates, healthyRate)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if *verbose {
		fmt.Printf("  engine: pauses %d, offloads %d, handovers %d\n", c.Stats().Pauses(), c.Stats().Offloads(), c.Stats().Handovers())
	}
	return end.Sub(start), time.Unix(0, firstAt.Load()).Sub(start), counted, c.Stop(ctx)
}

var errFailing = errors.New("a failing key")

// healthyRates are the prosody reader's rates over the healthy keys'
// messages, one per round.
var healthyRates []float64

// lastDeferred is when the failing reader's last run handled its last
// deferred message, from its start (0 when the wait ended first).
var lastDeferred time.Duration

// stores are the engine's timer and defer stores: in memory, or in
// Cassandra (a fresh keyspace) with -cassandra.
func stores(def config.Config) (timerstore.Store, *consumer.Deferral, dedupstore.Store, error) {
	if *cassandraNodes == "" {
		return timerstore.NewMemory(), benchreader.Deferral(def, deferstore.NewMemory()), dedupstore.NewMemory(def.IdempotenceTTL), nil
	}
	if benchSession == nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		s, err := cassandra.Connect(ctx, cassandra.Options{Nodes: strings.Split(*cassandraNodes, ","), Keyspace: "prosody_bench_" + suffix()})
		if err != nil {
			return nil, nil, nil, err
		}
		benchSession = s
	}
	return timerstore.NewCassandra(benchSession, def.CassandraRetention),
		benchreader.Deferral(def, deferstore.NewCassandra(benchSession, def.CassandraRetention, def.DeferStoreCacheSize)),
		dedupstore.NewCassandra(benchSession, def.IdempotenceTTL), nil
}

var benchSession *cassandra.Session

// printProgress prints a reader's message count every -progress interval
// until the returned function is called; pauses is its count of partition
// pauses (raw sarama never pauses).
func printProgress(start time.Time, count, pauses func() int64) (stop func()) {
	if *progress <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(*progress)
		defer t.Stop()
		last := int64(0)
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				n := count()
				fmt.Printf("    %6dms %8d (+%d) pauses %d\n", now.Sub(start).Milliseconds(), n, n-last, pauses())
				last = n
			}
		}
	}()
	return func() { close(done) }
}

// The shared pieces of the benchmark programs.
var (
	suffix       = benchkit.Suffix
	median       = benchkit.Median
	saramaConfig = benchkit.SaramaConfig
)

func must(err error) { benchkit.Must("prosody-bench", err) }
