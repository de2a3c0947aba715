// Command benchgo is `make bench-c`: it fills a real-Kafka topic, then
// reads it with the same client configuration twice per round, once with a
// no-op Go handler (the Go engine alone) and once through the C ABI with a
// no-op C handler (build/c/prosody_bench_c: poll a batch, complete the
// batch), each with a fresh consumer group, and prints both rates and
// their ratio. It is a benchmark, not a test: nothing fails on slowness.
//
// Every reader runs in a process of its own, started for it: the C
// benchmark is one, and the Go engine runs in a copy of this program
// (-go-reader), so that no reader inherits a heap, threads or caches
// warmed by the fill or by the rounds before it (-go-in-process runs it
// here instead, as the first versions did).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"

	"github.com/prosody-events/prosody-go/core/client"
	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/internal/benchkit"
)

func main() {
	brokers := flag.String("brokers", "localhost:9094", "bootstrap servers")
	messages := flag.Int("messages", 200_000, "messages to produce and consume")
	partitions := flag.Int("partitions", 8, "partitions")
	keys := flag.Int("keys", 10_000, "distinct keys")
	rounds := flag.Int("rounds", 2, "rounds; each runs both readers")
	extra := flag.String("config", "", `extra options merged into the client JSON, e.g. "max_concurrency":256`)
	cBench := flag.String("cbench", "build/c/prosody_bench_c", "the C benchmark binary")
	goReader := flag.String("go-reader", "", "read with the Go engine and this client JSON, print the rate and exit (what each Go round runs)")
	goInProcess := flag.Bool("go-in-process", false, "run the Go rounds in this process rather than each in a fresh one")
	jsonOut := flag.String("json", "", "also write the results to this file as JSON (benchkit.Report)")
	flag.Parse()
	sarama.Logger = log.New(io.Discard, "", 0)
	if *goReader != "" {
		fmt.Printf("go %f\n", goEngine(*goReader, *messages))
		return
	}

	topic := "prosody-bench-c-" + suffix()
	start := time.Now()
	must(benchkit.Fill(strings.Split(*brokers, ","), topic, int32(*partitions), *messages, *keys, 200))
	fmt.Printf("produced %d messages (%d partitions, %d keys) to %s in %v\n", *messages, *partitions, *keys, topic,
		time.Since(start).Round(time.Millisecond))

	cfg := func() string {
		js := fmt.Sprintf(`{"bootstrap_servers":%q,"group_id":"bench-%s","subscribed_topics":%q,"probe_port":null,`+
			`"cassandra_nodes":"localhost:9042","cassandra_keyspace":"prosody_bench","telemetry_enabled":false`, *brokers, suffix(), topic)
		if *extra != "" {
			js += "," + *extra
		}
		return js + "}"
	}
	rates := map[string][]float64{}
	report := benchkit.NewReport("bench-c", "events/s", "go", map[string]any{
		"messages": *messages, "partitions": *partitions, "keys": *keys, "rounds": *rounds, "config": *extra,
	})
	for _, name := range []string{"go", "c-abi", "c-direct"} {
		report.Reader(name) // in this order whichever runs first
	}
	for r := 0; r < *rounds; r++ {
		order := []string{"go", "c-abi", "c-direct"}
		if r%2 == 1 {
			order = []string{"c-direct", "c-abi", "go"}
		}
		for _, reader := range order {
			var rate float64
			switch reader {
			case "go":
				if *goInProcess {
					rate = goEngine(cfg(), *messages)
				} else {
					rate = goFresh(cfg(), *messages)
				}
			case "c-abi":
				rate = cABI(*cBench, cfg(), *messages)
			default:
				rate = cABI(*cBench, cfg(), *messages, "direct")
			}
			rates[reader] = append(rates[reader], rate)
			report.Add(reader, "rate", rate)
			fmt.Printf("round %d %-8s %9.0f events/s\n", r+1, reader, rate)
		}
	}
	g, c, d := median(rates["go"]), median(rates["c-abi"]), median(rates["c-direct"])
	fmt.Printf("median  go engine %.0f events/s, C ABI poll %.0f events/s (ratio C/Go %.2f), "+
		"C ABI on_event %.0f events/s (ratio %.2f)\n", g, c, c/g, d, d/g)
	must(report.Write(*jsonOut))
}

// goEngine reads the topic with a no-op Go handler through client.Client,
// the object the C ABI wraps, with the same configuration.
func goEngine(js string, n int) float64 {
	cfg, err := config.FromJSON([]byte(js))
	must(err)
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c, err := client.New(cfg, client.WithLogger(quiet))
	must(err)
	var count atomic.Int64
	finished := make(chan time.Time, 1)
	start := time.Now()
	must(c.Subscribe(event.HandlerFuncs{Message: func(*event.Context, *event.Message) error {
		if count.Add(1) == int64(n) {
			finished <- time.Now()
		}
		return nil
	}}))
	end := <-finished
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	must(c.Close(ctx))
	return float64(n) / end.Sub(start).Seconds()
}

// goFresh runs goEngine in a new process (this program with -go-reader).
func goFresh(js string, n int) float64 {
	self, err := os.Executable()
	must(err)
	cmd := exec.Command(self, "-go-reader", js, "-messages", fmt.Sprint(n))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	must(err)
	var rate float64
	_, err = fmt.Sscanf(string(out), "go %f", &rate)
	must(err)
	return rate
}

// cABI runs the C benchmark (mode: nothing for polling, "direct" for an
// on_event callback) and parses its "c-abi N SECONDS RATE" line.
func cABI(bin, js string, n int, mode ...string) float64 {
	cmd := exec.Command(bin, append([]string{js, fmt.Sprint(n)}, mode...)...)
	cmd.Env = append(os.Environ(), "PROSODY_LOG=warn")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	must(err)
	var got int
	var secs, rate float64
	_, err = fmt.Sscanf(string(out), "c-abi %d %f %f", &got, &secs, &rate)
	must(err)
	fmt.Printf("         %s", out)
	return rate
}

// The shared pieces of the benchmark programs.
var (
	suffix       = benchkit.Suffix
	median       = benchkit.Median
	saramaConfig = benchkit.SaramaConfig
)

func must(err error) { benchkit.Must("benchgo", err) }
