// Command prosody-sched-bench measures the scheduler on a real broker, the
// fair scheduler beside the first-come-first-served baseline in the same
// run.
//
// Two workloads (-workload):
//
//   - ordered: a filled topic (-messages over -keys keys, 8 partitions)
//     read from the start by handlers that sleep -handler (5 ms), with
//     max_concurrency 32 and otherwise the default configuration. The
//     bound is max_concurrency / handler time; each reader's rate from
//     its first message is reported against it. Readers take turns,
//     rotating per round.
//
//   - fairness: a live topic written at -rate messages/s for -duration,
//     half of its keys failing transiently (the first -failures attempts
//     of each of their messages fail, and low-latency mode retries them
//     after its backoff), the other half fresh. Both readers consume the
//     same topic at the same time, each in its own group, so they see the
//     same traffic; each attempt sleeps -handler. It reports the latency
//     from a message's timestamp (its production; the readers keep up
//     with the broker, so this is the wait after the fetch plus a
//     fetch) to the start of its first attempt, for the fresh keys and
//     for the failing ones.
//
//     go run ./cmd/prosody-sched-bench -workload ordered -rounds 4
//     go run ./cmd/prosody-sched-bench -workload fairness -rounds 3
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"io"
	"log"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"

	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/consumer"
	"github.com/prosody-events/prosody-go/core/deferstore"
	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/fetch"
	"github.com/prosody-events/prosody-go/core/middleware"
	"github.com/prosody-events/prosody-go/core/scheduler"
	"github.com/prosody-events/prosody-go/core/timerstore"
	"github.com/prosody-events/prosody-go/core/timerwake"
	"github.com/prosody-events/prosody-go/internal/benchkit"
	"github.com/prosody-events/prosody-go/internal/benchreader"
)

var (
	brokers     = flag.String("brokers", "localhost:9094", "bootstrap servers")
	workload    = flag.String("workload", "ordered", "ordered or fairness")
	readers     = flag.String("readers", "fair,fifo", "schedulers to run: fair, fifo, fair-precise (fair with client.WithPreciseTimers' waker)")
	timerWake   = flag.Duration("timer-wake", 200*time.Microsecond, "fair-precise: the waker's period")
	rounds      = flag.Int("rounds", 3, "rounds")
	messages    = flag.Int("messages", 50_000, "ordered: messages in the topic")
	keys        = flag.Int("keys", 10_000, "distinct keys")
	handler     = flag.Duration("handler", 5*time.Millisecond, "how long each attempt sleeps")
	concurrency = flag.Int("max-concurrency", 32, "max_concurrency")
	uncommitted = flag.Int("max-uncommitted", 0, "max_uncommitted (0: the default configuration's)")
	rate        = flag.Int("rate", 3000, "fairness: messages per second written")
	duration    = flag.Duration("duration", 20*time.Second, "fairness: how long the topic is written")
	failures    = flag.Int("failures", 2, "fairness: failed attempts before a failing key's message succeeds")
	verbose     = flag.Bool("v", false, "print the permits in use and waiting every second")
	mode        = flag.String("mode", "pipeline", "fairness: the mode, pipeline (failures deferred) or low-latency (failures retried in place)")
	jsonOut     = flag.String("json", "", "also write the results to this file as JSON (benchkit.Report)")
)

func main() {
	flag.Parse()
	sarama.Logger = log.New(io.Discard, "", 0)
	addrs := strings.Split(*brokers, ",")
	names := strings.Split(*readers, ",")
	switch *workload {
	case "ordered":
		ordered(addrs, names)
	case "fairness":
		fairness(addrs, names)
	default:
		must(fmt.Errorf("-workload: %q is neither ordered nor fairness", *workload))
	}
}

func baseConfig() config.Config {
	cfg := config.Default()
	cfg.MaxConcurrency = *concurrency
	if *uncommitted > 0 {
		cfg.MaxUncommitted = *uncommitted
	}
	return cfg
}

// schedulerFor is the reader's scheduler.
func schedulerFor(name string, cfg *config.Config) *middleware.Scheduler {
	switch name {
	case "fair", "fair-precise":
		return nil // the stacks make the one cfg describes
	case "fifo":
		return middleware.NewFIFOScheduler(cfg.MaxConcurrency)
	}
	must(fmt.Errorf("-readers: %q is not one of fair, fair-precise, fifo", name))
	return nil
}

func ordered(addrs []string, names []string) {
	topic := "prosody-sched-bench-" + benchkit.Suffix()
	must(benchkit.Fill(addrs, topic, 8, *messages, *keys, 200))
	bound := float64(*concurrency) / handler.Seconds()
	fmt.Printf("ordered: %d messages over %d keys, %v handlers, max_concurrency %d: bound %.0f msg/s\n",
		*messages, *keys, *handler, *concurrency, bound)
	rates, occupied := map[string][]float64{}, map[string][]float64{}
	var alone []float64
	report := benchkit.NewReport("prosody-sched-bench ordered", "msg/s", "", map[string]any{
		"workload": "ordered", "messages": *messages, "keys": *keys, "handler_ms": handler.Seconds() * 1e3,
		"max_concurrency": *concurrency, "rounds": *rounds, "bound": bound,
	})
	for r := 0; r < *rounds; r++ {
		a := sleepsAlone()
		alone = append(alone, a)
		report.Add("sleeps-alone", "rate", a)
		report.Add("sleeps-alone", "of_bound", a/bound)
		fmt.Printf("round %d the sleeps alone, %d goroutines, no engine: %.0f/s (%.2f of the bound)\n", r+1, *concurrency, a, a/bound)
		order := append(slices.Clone(names[r%len(names):]), names[:r%len(names)]...)
		for _, name := range order {
			cfg := baseConfig()
			var n, first, slept atomic.Int64
			done := make(chan time.Time, 1)
			// Every key is fresh here: no attempt fails.
			lat := newLatencies(*messages)
			h := event.HandlerFuncs{Message: func(_ *event.Context, m *event.Message) error {
				t0 := time.Now()
				wait := lat.sinceFetch(m, t0)
				lat.mu.Lock()
				lat.fresh = append(lat.fresh, wait)
				lat.mu.Unlock()
				time.Sleep(*handler)
				slept.Add(int64(time.Since(t0)))
				c := n.Add(1)
				if c == 1 {
					first.Store(time.Now().UnixNano())
				}
				if c == int64(*messages) {
					done <- time.Now()
				}
				return nil
			}}
			cpu0, _ := benchkit.CPUTime()
			c, stop := start(addrs, topic, cfg, h, lat.fetched, name)
			end := <-done
			cpu1, _ := benchkit.CPUTime()
			cpu := cpu1 - cpu0
			elapsed := end.Sub(time.Unix(0, first.Load()))
			rt := float64(*messages-1) / elapsed.Seconds()
			rates[name] = append(rates[name], rt)
			// The handlers' sleeps overshoot (timer resolution, wake-ups
			// on a busy machine): the bound they allow is lower.
			mean := time.Duration(slept.Load() / int64(*messages))
			sleptBound := float64(*concurrency) / mean.Seconds()
			occupied[name] = append(occupied[name], rt/sleptBound)
			report.Add(name, "rate", rt)
			report.Add(name, "of_bound", rt/bound)
			report.Add(name, "of_sleeps_bound", rt/sleptBound)
			report.Add(name, "of_sleeps_alone", rt/a)
			report.Add(name, "mean_sleep_ms", mean.Seconds()*1e3)
			report.Add(name, "cpu_us_per_msg", float64(cpu.Microseconds())/float64(*messages))
			lat.mu.Lock()
			q := quantiles(lat.fresh)
			lat.mu.Unlock()
			report.Add(name, "fetch_start_p50_ms", q[0].Seconds()*1e3)
			report.Add(name, "fetch_start_p99_ms", q[1].Seconds()*1e3)
			fmt.Printf("round %d %-5s %6.0f msg/s from the first message (%.2f of the bound; the sleeps took %v on average, %.2f of the bound they allow); fetch to handler start p50 %v p99 %v; CPU %.1f µs/msg\n",
				r+1, name, rt, rt/bound, mean.Round(time.Microsecond), rt/sleptBound, q[0].Round(time.Millisecond), q[1].Round(time.Millisecond),
				float64(cpu.Microseconds())/float64(*messages))
			stopConsumer(c, stop)
		}
	}
	a := benchkit.Median(alone)
	fmt.Printf("median  the sleeps alone %.0f/s (%.2f of the bound)", a, a/bound)
	for _, name := range names {
		m := benchkit.Median(rates[name])
		fmt.Printf("  %s %.0f msg/s (%.2f of the bound, %.2f of the sleeps' bound, %.2f of the sleeps alone)", name, m, m/bound, benchkit.Median(occupied[name]), m/a)
	}
	fmt.Println()
	must(report.Write(*jsonOut))
}

// sleepsAlone is the rate at which -max-concurrency goroutines, started a
// little apart as handlers are, get through sleeps of -handler one after
// another for two seconds, with no engine: what the machine's timers allow
// the ordered workload at best.
func sleepsAlone() float64 {
	var n atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(2 * time.Second)
	for g := 0; g < *concurrency; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				time.Sleep(*handler)
				n.Add(1)
			}
		}()
		time.Sleep(*handler / time.Duration(*concurrency))
	}
	wg.Wait()
	return float64(n.Load()) / time.Since(start).Seconds()
}

// errTransient is what a failing key's attempts return.
var errTransient = errors.New("a transient failure")

// latencies collects one reader's first-attempt latencies: from the fetch
// that delivered the record (consumer.Options.Fetched) and from its
// production (its timestamp) to the start of its first attempt.
type latencies struct {
	fetchedAt [partitions][]atomic.Int64 // by partition and offset: monotonic ns of the fetch, 0 before it

	mu       sync.Mutex
	fresh    []time.Duration // from the fetch
	failing  []time.Duration
	produced []time.Duration // fresh keys, from the production
	attempts map[int64]int   // by partition<<40 | offset: attempts so far
	handled  atomic.Int64
}

// partitions is the fairness topic's partition count.
const partitions = 8

var epoch = time.Now()

func newLatencies(total int) *latencies {
	l := &latencies{attempts: map[int64]int{}}
	for i := range l.fetchedAt {
		l.fetchedAt[i] = make([]atomic.Int64, total+1)
	}
	return l
}

// fetched is the reader's consumer.Options.Fetched: the first fetch of
// each offset counts.
func (l *latencies) fetched(_ string, partition int32, rs []fetch.Record) {
	now := int64(time.Since(epoch))
	for _, r := range rs {
		if r.Offset < int64(len(l.fetchedAt[partition])) {
			l.fetchedAt[partition][r.Offset].CompareAndSwap(0, now)
		}
	}
}

// sinceFetch is how long before started the fetch that delivered m was.
func (l *latencies) sinceFetch(m *event.Message, started time.Time) time.Duration {
	return started.Sub(epoch) - time.Duration(l.fetchedAt[m.Partition][m.Offset].Load())
}

func (l *latencies) handler() event.Handler {
	return event.HandlerFuncs{Message: func(ctx *event.Context, m *event.Message) error {
		started := time.Now()
		failing := strings.HasPrefix(m.Key, "failing-")
		l.mu.Lock()
		id := int64(m.Partition)<<40 | m.Offset
		attempt := l.attempts[id]
		l.attempts[id] = attempt + 1
		if attempt == 0 {
			wait := l.sinceFetch(m, started)
			if failing {
				l.failing = append(l.failing, wait)
			} else {
				l.fresh = append(l.fresh, wait)
				l.produced = append(l.produced, started.Sub(m.Timestamp))
			}
		}
		l.mu.Unlock()
		time.Sleep(*handler)
		if failing && attempt < *failures {
			return errTransient
		}
		l.handled.Add(1)
		return nil
	}}
}

func fairness(addrs []string, names []string) {
	total := int(float64(*rate) * duration.Seconds())
	bound := float64(*concurrency) / handler.Seconds()
	attempts := float64(*rate) * (2 + float64(*failures)) / 2
	fmt.Printf("fairness: %d msg/s for %v over %d keys, half failing %d times, %s mode; %v attempts, max_concurrency %d: %.0f attempts/s wanted of a nominal %.0f per reader (%.0f %%); the readers consume the same topic at once\n",
		*rate, *duration, *keys, *failures, *mode, *handler, *concurrency, attempts, bound, 100*attempts/bound)
	p99 := map[string][]float64{}
	p50 := map[string][]float64{}
	baseline := ""
	if len(names) == 2 {
		baseline = names[1]
	}
	report := benchkit.NewReport("prosody-sched-bench fairness", "", baseline, map[string]any{
		"workload": "fairness", "rate": *rate, "duration_s": duration.Seconds(), "keys": *keys, "failures": *failures,
		"mode": *mode, "handler_ms": handler.Seconds() * 1e3, "max_concurrency": *concurrency, "rounds": *rounds,
		"attempts_per_s": attempts, "bound": bound,
	})
	for r := 0; r < *rounds; r++ {
		res := fairnessRound(addrs, names, total)
		for _, name := range names {
			q := res[name]
			ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
			report.Add(name, "fresh_p50_ms", ms(q.fresh[0]))
			report.Add(name, "fresh_p99_ms", ms(q.fresh[1]))
			report.Add(name, "fresh_max_ms", ms(q.fresh[2]))
			report.Add(name, "produced_p99_ms", ms(q.produced[1]))
			report.Add(name, "failing_p50_ms", ms(q.failing[0]))
			report.Add(name, "failing_p99_ms", ms(q.failing[1]))
			report.Add(name, "handled", float64(q.handled))
			fmt.Printf("round %d %-5s fresh keys p50 %v p99 %v max %v (from production p99 %v); failing keys p50 %v p99 %v max %v; %d of %d handled\n",
				r+1, name, q.fresh[0], q.fresh[1], q.fresh[2], q.produced[1], q.failing[0], q.failing[1], q.failing[2], q.handled, total)
			p50[name] = append(p50[name], q.fresh[0].Seconds())
			p99[name] = append(p99[name], q.fresh[1].Seconds())
		}
	}
	fmt.Print("median of the rounds, fresh keys from fetch to handler start:")
	for _, name := range names {
		fmt.Printf("  %s p50 %v p99 %v", name, secs(benchkit.Median(p50[name])), secs(benchkit.Median(p99[name])))
	}
	if len(names) == 2 {
		fmt.Printf("  (p99 %s/%s = %.3f)", names[0], names[1], benchkit.Median(p99[names[0]])/benchkit.Median(p99[names[1]]))
	}
	fmt.Println()
	report.Params["messages"] = total
	must(report.Write(*jsonOut))
}

// roundResult is one reader's latency quantiles (p50, p99, max) in a round.
type roundResult struct {
	fresh, failing, produced [3]time.Duration
	handled                  int64
}

// fairnessRound writes a topic of its own at -rate while every named
// reader consumes it, each in a group of its own, and returns their
// latency quantiles.
func fairnessRound(addrs []string, names []string, total int) map[string]roundResult {
	topic := "prosody-sched-fair-" + benchkit.Suffix()
	must(createTopic(addrs, topic))
	cfg := baseConfig()
	switch *mode {
	case "pipeline":
		cfg.Mode = config.ModePipeline
	case "low-latency":
		cfg.Mode = config.ModeLowLatency
	default:
		must(fmt.Errorf("-mode: %q is neither pipeline nor low-latency", *mode))
	}
	type reader struct {
		l    *latencies
		c    *consumer.Consumer
		stop func()
	}
	rs := map[string]*reader{}
	for _, name := range names {
		l := newLatencies(total)
		c, stop := start(addrs, topic, cfg, l.handler(), l.fetched, name)
		rs[name] = &reader{l: l, c: c, stop: stop}
	}
	// The readers own every partition before the traffic starts.
	for _, r := range rs {
		for r.c.AssignedPartitions() < partitions {
			time.Sleep(50 * time.Millisecond)
		}
	}
	must(produce(addrs, topic, total))
	out := map[string]roundResult{}
	for name, r := range rs {
		for deadline := time.Now().Add(5 * time.Minute); r.l.handled.Load() < int64(total) && time.Now().Before(deadline); {
			time.Sleep(100 * time.Millisecond)
		}
		stopConsumer(r.c, r.stop)
		r.l.mu.Lock()
		out[name] = roundResult{fresh: quantiles(r.l.fresh), failing: quantiles(r.l.failing), produced: quantiles(r.l.produced), handled: r.l.handled.Load()}
		r.l.mu.Unlock()
	}
	return out
}

func secs(s float64) time.Duration {
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond)
}

// quantiles are the p50, p99 and max of ds.
func quantiles(ds []time.Duration) [3]time.Duration {
	if len(ds) == 0 {
		return [3]time.Duration{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	at := func(q float64) time.Duration { return s[min(len(s)-1, int(q*float64(len(s))))].Round(time.Millisecond) }
	return [3]time.Duration{at(0.5), at(0.99), s[len(s)-1].Round(time.Millisecond)}
}

func createTopic(addrs []string, topic string) error {
	admin, err := sarama.NewClusterAdmin(addrs, benchkit.SaramaConfig())
	if err != nil {
		return err
	}
	defer admin.Close()
	if err := admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: 1}, false); err != nil {
		return err
	}
	time.Sleep(time.Second) // let leaders settle
	return nil
}

// produce writes total messages at -rate, alternating fresh and failing
// keys, each message's timestamp the time it was handed to the producer.
func produce(addrs []string, topic string, total int) error {
	cfg := benchkit.SaramaConfig()
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = false
	cfg.Producer.Flush.Frequency = time.Millisecond
	cfg.Producer.Partitioner = sarama.NewCustomPartitioner(sarama.WithAbsFirst(), sarama.WithCustomHashFunction(crc32.NewIEEE))
	p, closeProducer, err := benchkit.AsyncProducer(addrs, cfg)
	if err != nil {
		return err
	}
	startAt := time.Now()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	sent := 0
	for sent < total {
		<-tick.C
		due := min(total, int(time.Since(startAt).Seconds()*float64(*rate)))
		for ; sent < due; sent++ {
			kind := "fresh"
			if sent%2 == 1 {
				kind = "failing"
			}
			k := fmt.Sprintf("%s-%05d", kind, (sent/2)%(*keys/2))
			v := fmt.Sprintf(`{"id":"evt-%09d","type":"bench.event","seq":%d}`, sent, sent)
			p.Input() <- &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(k), Value: sarama.StringEncoder(v), Timestamp: time.Now()}
		}
	}
	return closeProducer()
}

// start runs the engine on topic from its start in a group of its own,
// with the named scheduler.
func start(addrs []string, topic string, cfg config.Config, h event.Handler, fetched func(string, int32, []fetch.Record), name string) (*consumer.Consumer, func()) {
	stacks, stopStacks, sched := benchkit.StacksWith(cfg, h, schedulerFor(name, &cfg), refuseSink{})
	stop := stopStacks
	if *verbose {
		quit := make(chan struct{})
		go func() {
			t := time.NewTicker(time.Second)
			defer t.Stop()
			for {
				select {
				case <-quit:
					return
				case <-t.C:
					fmt.Printf("    %s: permits in use %d, waiting %d", name, sched.InUse(), sched.Waiting())
					if f, ok := sched.Policy().(*scheduler.Fair[middleware.Waiter]); ok {
						fmt.Printf(" (normal %d, failure %d); handler time normal %.1fs, failure %.1fs",
							f.WaitingFor(scheduler.Normal), f.WaitingFor(scheduler.Failure), f.ClassTime(scheduler.Normal), f.ClassTime(scheduler.Failure))
					}
					fmt.Println()
				}
			}
		}()
		stop = func() { close(quit); stopStacks() }
	}
	opts := benchreader.Options(cfg, addrs, "bench-sched-"+name+"-"+benchkit.Suffix(), topic, slog.LevelError)
	opts.Stacks, opts.Scheduler, opts.Fetched = stacks, sched, fetched
	if cfg.Mode == config.ModePipeline {
		// Durable timers and deferred keys in memory, as in mock mode.
		opts.Timers, opts.Deferral = timerstore.NewMemory(), benchreader.Deferral(cfg, deferstore.NewMemory())
	}
	c, err := consumer.Start(opts)
	must(err)
	if name == "fair-precise" {
		// What client.WithPreciseTimers does.
		w := timerwake.Start(*timerWake, func() bool { return sched.InUse() > 0 })
		stopStacks := stop
		stop = func() { w.Stop(); stopStacks() }
	}
	return c, stop
}

func stopConsumer(c *consumer.Consumer, stop func()) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	must(c.Stop(ctx))
	stop()
}

// refuseSink is the failure topic of the fairness workload, which no
// message reaches (each succeeds within max_retries): one that does is a
// mistake in the benchmark, and it says so.
type refuseSink struct{}

func (refuseSink) SendJSON(context.Context, string, string, []byte, []event.Header) error {
	return errors.New("prosody-sched-bench: a message reached the failure topic; -failures must stay below max_retries")
}

func (refuseSink) SendRaw(context.Context, string, []byte, []byte, []event.Header) error {
	return errors.New("prosody-sched-bench: an undecodable record reached the failure topic")
}

func must(err error) { benchkit.Must("prosody-sched-bench", err) }
