// Command prosody-tls-bench compares throughput over the test broker's
// plaintext, SASL_SSL (SCRAM-SHA-512) and mutual-TLS listeners: one topic
// is filled once over plaintext, then read from the start by the Prosody
// engine (pipeline stacks, in-memory stores, a handler that does nothing)
// with a fresh consumer group over each listener, and written by an
// idempotent LZ4 producer over each, in alternating order per round. The
// listeners are the ones scripts/services describes in listeners.json.
//
//	go run ./cmd/prosody-tls-bench -brokers localhost:9094 -messages 500000 -rounds 3
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"hash/crc32"
	"io"
	"log"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"

	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/consumer"
	"github.com/prosody-events/prosody-go/core/deferstore"
	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/kafkasec"
	"github.com/prosody-events/prosody-go/core/secret"
	"github.com/prosody-events/prosody-go/core/timerstore"
	"github.com/prosody-events/prosody-go/core/tlsconf"
	"github.com/prosody-events/prosody-go/internal/benchkit"
	"github.com/prosody-events/prosody-go/internal/benchreader"
)

type listener struct {
	name  string
	addrs []string
	sec   kafkasec.Settings
}

func main() {
	brokers := flag.String("brokers", "localhost:9094", "the plaintext listener")
	listenersFile := flag.String("listeners", "", "listeners.json of scripts/services (default: PROSODY_TEST_KAFKA_TLS or the default run directory)")
	messages := flag.Int("messages", 500_000, "messages to produce and consume")
	produceN := flag.Int("produce", 100_000, "messages each producer run writes")
	rounds := flag.Int("rounds", 3, "rounds; each runs every listener")
	jsonOut := flag.String("json", "", "also write the results to this file as JSON (benchkit.Report)")
	flag.Parse()
	sarama.Logger = log.New(io.Discard, "", 0)

	path := *listenersFile
	if path == "" {
		path = os.Getenv("PROSODY_TEST_KAFKA_TLS")
	}
	if path == "" {
		path = os.TempDir() + "/prosody-services/kafka/tls/listeners.json"
	}
	data, err := os.ReadFile(path)
	must(err)
	var l struct {
		SASLSSLAddr       string `json:"sasl_ssl"`
		SSLAddr           string `json:"ssl"`
		Username          string `json:"sasl_username"`
		Password          string `json:"sasl_password"`
		CA                string `json:"ca"`
		ClientCertificate string `json:"client_certificate"`
		ClientKey         string `json:"client_key"`
	}
	must(json.Unmarshal(data, &l))
	listeners := []listener{
		{name: "plaintext", addrs: strings.Split(*brokers, ",")},
		{name: "scram-sha-512", addrs: []string{l.SASLSSLAddr}, sec: kafkasec.Settings{
			Protocol: config.ProtocolSASLSSL, Mechanism: config.MechanismScramSHA512,
			Username: l.Username, Password: secret.New(l.Password), TLS: tlsconf.Files{CA: l.CA}}},
		{name: "mutual-tls", addrs: []string{l.SSLAddr}, sec: kafkasec.Settings{
			Protocol: config.ProtocolSSL, TLS: tlsconf.Files{CA: l.CA, Cert: l.ClientCertificate, Key: l.ClientKey}}},
	}

	topic := "prosody-tls-bench-" + benchkit.Suffix()
	start := time.Now()
	must(benchkit.Fill(listeners[0].addrs, topic, 8, *messages, 10_000, 200))
	fmt.Printf("filled %s with %d messages in %v\n", topic, *messages, time.Since(start).Round(time.Millisecond))

	consume, produce := map[string][]float64{}, map[string][]float64{}
	report := benchkit.NewReport("prosody-tls-bench", "msg/s", listeners[0].name, map[string]any{
		"messages": *messages, "produce": *produceN, "rounds": *rounds, "partitions": 8, "keys": 10_000,
	})
	for _, ls := range listeners {
		report.Reader(ls.name)
	}
	for r := 0; r < *rounds; r++ {
		order := append(slices.Clone(listeners[r%len(listeners):]), listeners[:r%len(listeners)]...)
		for _, ls := range order {
			el, err := engine(ls, topic, *messages)
			must(err)
			rate := float64(*messages) / el.Seconds()
			consume[ls.name] = append(consume[ls.name], rate)
			pel, err := producer(ls, topic+"-w-"+benchkit.Suffix(), *produceN)
			must(err)
			prate := float64(*produceN) / pel.Seconds()
			produce[ls.name] = append(produce[ls.name], prate)
			report.Add(ls.name, "consume", rate)
			report.Add(ls.name, "produce", prate)
			fmt.Printf("round %d %-14s consume %8.0f msg/s (%v)  produce %8.0f msg/s\n", r+1, ls.name, rate, el.Round(time.Millisecond), prate)
		}
	}
	base := listeners[0].name
	for _, what := range []struct {
		name string
		m    map[string][]float64
	}{{"consume", consume}, {"produce", produce}} {
		fmt.Printf("median %s:", what.name)
		for _, ls := range listeners {
			med := benchkit.Median(what.m[ls.name])
			fmt.Printf("  %s %.0f msg/s", ls.name, med)
			if ls.name != base {
				fmt.Printf(" (%.2f of %s)", med/benchkit.Median(what.m[base]), base)
			}
		}
		fmt.Println()
	}
	must(report.Write(*jsonOut))
}

// engine reads the whole topic with a fresh group over ls.
func engine(ls listener, topic string, n int) (time.Duration, error) {
	def := config.Default()
	var count atomic.Int64
	done := make(chan time.Time, 1)
	h := event.HandlerFuncs{Message: func(*event.Context, *event.Message) error {
		if count.Add(1) == int64(n) {
			done <- time.Now()
		}
		return nil
	}}
	opts := benchreader.Options(def, ls.addrs, "bench-tls-"+benchkit.Suffix(), topic, slog.LevelWarn)
	opts.Security = ls.sec
	stacks, stop, sched := benchkit.PipelineStacks(def, h)
	defer stop()
	opts.Stacks, opts.Scheduler = stacks, sched
	opts.Timers, opts.Deferral = timerstore.NewMemory(), benchreader.Deferral(def, deferstore.NewMemory())
	start := time.Now()
	c, err := consumer.Start(opts)
	if err != nil {
		return 0, err
	}
	end := <-done
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return end.Sub(start), c.Stop(ctx)
}

// producer writes n messages to a new topic over ls with the settings of
// benchkit.Fill.
func producer(ls listener, topic string, n int) (time.Duration, error) {
	cfg := benchkit.SaramaConfig()
	if err := ls.sec.Apply(cfg); err != nil {
		return 0, err
	}
	cfg.Producer.Idempotent = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.Compression = sarama.CompressionLZ4
	cfg.Producer.Return.Successes = false
	cfg.Producer.Flush.Bytes = 512 * 1024
	cfg.Producer.Flush.Frequency = 5 * time.Millisecond
	cfg.Producer.Partitioner = sarama.NewCustomPartitioner(sarama.WithAbsFirst(), sarama.WithCustomHashFunction(crc32.NewIEEE))
	p, closeProducer, err := benchkit.AsyncProducer(ls.addrs, cfg)
	if err != nil {
		return 0, err
	}
	pad := strings.Repeat("x", 90)
	start := time.Now()
	for i := 0; i < n; i++ {
		k := fmt.Sprintf("key-%05d", i%10_000)
		p.Input() <- &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(k),
			Value: sarama.StringEncoder(fmt.Sprintf(`{"id":"evt-%09d","type":"bench.event","seq":%d,"pad":"%s"}`, i, i, pad))}
	}
	err = closeProducer()
	return time.Since(start), err
}

func must(err error) { benchkit.Must("prosody-tls-bench", err) }
