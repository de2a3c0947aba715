package main

// The mixed benchmark: for each reader and round, a fresh topic holds
// -messages JSON messages {"seq": i} over -keys keys; the reader (a whole
// consumer at its default configuration, in its own process) handles them,
// and each message handler schedules a timer due lead+1+(seq mod spread)
// whole seconds after the second it runs in. The first timers fall due
// while most messages are still queued, so firing competes with message
// work for the key queues, the permits and Cassandra. Each reader prints one
// JSON line (result); the driver rotates the readers' order between rounds
// and reports medians.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/IBM/sarama"

	"github.com/prosody-events/prosody-go/core/cassandra"
	"github.com/prosody-events/prosody-go/internal/benchkit"
)

func runMixed(args []string) {
	fs := flag.NewFlagSet("mixed", flag.ExitOnError)
	var f readerFlags
	f.register(fs)
	keys := fs.Int("keys", 2_000, "distinct keys")
	partitions := fs.Int("partitions", 8, "topic partitions")
	rounds := fs.Int("rounds", 3, "rounds; the readers' order rotates each round")
	readers := fs.String("readers", "go", "comma-separated readers: go, python, python-original, node")
	python := fs.String("python", "build/python-venv/bin/python", "Python with this project's package")
	original := fs.String("original-python", "build/original-venv/bin/python", "Python with prosody-events 0.4.0 (scripts/original-venv)")
	node := fs.String("node", "node", "Node.js")
	rate := fs.Int("rate", 0, "messages per second produced while the reader runs; 0: all of them before it starts (a backlog)")
	jsonOut := fs.String("json", "", "also write the results to this file as JSON (benchkit.Report)")
	must(fs.Parse(args))
	names := strings.Split(*readers, ",")
	self, err := os.Executable()
	must(err)
	commands := map[string][]string{
		"go":              {self, "read"},
		"python":          {*python, "bindings/python/bench/timer_bench.py"},
		"python-original": {*original, "bindings/python/bench/timer_bench.py"},
		"node":            {*node, "bindings/node/bench/timer-bench.js"},
	}
	for _, n := range names {
		if commands[n] == nil {
			must(fmt.Errorf("unknown reader %q: the readers are go, python, python-original, node", n))
		}
	}

	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	scratch := "prosody_timer_bench_" + benchkit.Suffix()
	session, err := cassandra.Connect(ctx, cassandra.Options{Nodes: []string{f.cassandra}, Keyspace: scratch, Logger: quiet})
	must(err)
	defer func() {
		_ = session.Query(ctx, "DROP KEYSPACE IF EXISTS "+scratch).Exec()
		session.Close()
	}()

	keyspaces := map[string]string{}
	for _, n := range names {
		keyspaces[n] = "timer_bench_" + strings.ReplaceAll(n, "-", "_") + "_" + benchkit.Suffix()
		must(session.Query(ctx, "CREATE KEYSPACE IF NOT EXISTS "+keyspaces[n]+
			" WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}").Exec())
	}
	defer func() {
		for _, ks := range keyspaces {
			_ = session.Query(ctx, "DROP KEYSPACE IF EXISTS "+ks).Exec()
		}
	}()
	pad := strings.Repeat("x", 150)
	all := map[string][]result{}
	report := benchkit.NewReport("prosody-timer-bench mixed", "", "", map[string]any{
		"messages": f.messages, "keys": *keys, "partitions": *partitions, "rounds": *rounds, "rate": *rate,
		"work_ms": f.work, "lead_s": f.lead, "spread_s": f.spread, "readers": names,
	})
	for _, n := range names {
		report.Reader(n)
	}
	flow := "all produced before the reader starts"
	if *rate > 0 {
		flow = fmt.Sprintf("produced at %d/s while the reader runs", *rate)
	}
	fmt.Printf("%d messages over %d keys, %d partitions, %s; handlers sleep %d ms after scheduling; timers due %d..%d s after their message; %d rounds\n",
		f.messages, *keys, *partitions, flow, f.work, f.lead+1, f.lead+f.spread, *rounds)
	for round := 0; round < *rounds; round++ {
		for i := range names {
			name := names[(i+round)%len(names)]
			run := f
			suffix := benchkit.Suffix()
			run.topic = "timer-bench-" + suffix
			run.group = "timer-bench-" + suffix
			// One keyspace per reader for the whole run (timers are kept
			// per group, so runs do not meet): Cassandra's prepared
			// statement cache (10 MiB) holds each keyspace's statements,
			// and a keyspace per run filled it within the hour, after
			// which every reader slowed down as statements were
			// re-prepared.
			run.keyspace = keyspaces[name]
			message := func(i int) (string, string) {
				k := fmt.Sprintf("key-%05d", i%*keys)
				return k, fmt.Sprintf(`{"id":"evt-%09d","type":"bench.timer","key":"%s","seq":%d,"pad":"%s"}`, i, k, i, pad)
			}
			backlog := f.messages
			if *rate > 0 {
				backlog = 0
			}
			must(benchkit.FillWith([]string{f.bootstrap}, run.topic, int32(*partitions), backlog, message))
			produced := make(chan error, 1)
			if *rate > 0 {
				go func() { produced <- produce(f.bootstrap, run.topic, f.messages, *rate, message) }()
			} else {
				produced <- nil
			}
			r, err := runOne(commands[name], run)
			if perr := <-produced; perr != nil && err == nil {
				err = perr
			}
			if err != nil {
				fmt.Printf("round %d %s: %v\n", round+1, name, err)
				continue
			}
			r.Reader = name
			all[name] = append(all[name], r)
			for metric, v := range map[string]float64{
				"schedule_p50_ms": r.ScheduleMs.P50, "schedule_p99_ms": r.ScheduleMs.P99,
				"late_p50_ms": r.LateMs.P50, "late_p99_ms": r.LateMs.P99, "late_max_ms": r.LateMs.Max,
				"early": float64(r.Early), "unfired": float64(r.Scheduled - r.Fired), "scheduled": float64(r.Scheduled),
				"duplicates": float64(r.Duplicates), "schedules_per_s": r.SchedulesPerS, "handling_s": r.HandlingS,
			} {
				report.Add(name, metric, v)
			}
			fmt.Printf("round %d %-15s schedule p50 %6.1f p99 %6.1f ms  late p50 %6.0f p99 %6.0f max %6.0f ms  early %d  fired %d/%d dup %d  %5.0f schedules/s  handled %d in %.1f s\n",
				round+1, name, r.ScheduleMs.P50, r.ScheduleMs.P99, r.LateMs.P50, r.LateMs.P99, r.LateMs.Max,
				r.Early, r.Fired, r.Scheduled, r.Duplicates, r.SchedulesPerS, r.Messages, r.HandlingS)
		}
	}

	fmt.Println("\nmedians over the rounds:")
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "reader\truns\tschedule p50 ms\tp99 ms\tlate p50 ms\tp99 ms\tmax ms\tearly\tunfired\tschedules/s\t")
	for _, name := range names {
		rs := all[name]
		if len(rs) == 0 {
			continue
		}
		med := func(get func(result) float64) float64 {
			xs := make([]float64, len(rs))
			for i, r := range rs {
				xs[i] = get(r)
			}
			return median(xs)
		}
		early, unfired := 0, 0
		for _, r := range rs {
			early += r.Early
			unfired += r.Scheduled - r.Fired
		}
		fmt.Fprintf(w, "%s\t%d\t%.1f\t%.1f\t%.0f\t%.0f\t%.0f\t%d\t%d\t%.0f\t\n", name, len(rs),
			med(func(r result) float64 { return r.ScheduleMs.P50 }), med(func(r result) float64 { return r.ScheduleMs.P99 }),
			med(func(r result) float64 { return r.LateMs.P50 }), med(func(r result) float64 { return r.LateMs.P99 }),
			med(func(r result) float64 { return r.LateMs.Max }), early, unfired,
			med(func(r result) float64 { return r.SchedulesPerS }))
	}
	must(w.Flush())
	must(report.Write(*jsonOut))
}

// runOne starts a reader process and parses the last line it printed.
func runOne(command []string, f readerFlags) (result, error) {
	args := append(append([]string(nil), command[1:]...),
		"--bootstrap", f.bootstrap, "--topic", f.topic, "--group", f.group,
		"--cassandra", f.cassandra, "--keyspace", f.keyspace,
		"--messages", fmt.Sprint(f.messages), "--lead", fmt.Sprint(f.lead),
		"--spread", fmt.Sprint(f.spread), "--timeout", fmt.Sprint(f.timeout), "--work", fmt.Sprint(f.work))
	cmd := exec.Command(command[0], args...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = os.Stderr
	deadline := time.AfterFunc(time.Duration(f.timeout+120)*time.Second, func() { _ = cmd.Process.Kill() })
	defer deadline.Stop()
	if err := cmd.Run(); err != nil {
		return result{}, fmt.Errorf("%s: %w", command[0], err)
	}
	var last string
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" {
			last = line
		}
	}
	var r result
	if err := json.Unmarshal([]byte(last), &r); err != nil {
		return result{}, fmt.Errorf("%s printed no result line (last line %q): %w", command[0], last, err)
	}
	return r, nil
}

// produce writes n messages to topic at rate per second, in bursts every
// 10 ms, as Prosody's producer writes them.
func produce(bootstrap, topic string, n, rate int, message func(i int) (string, string)) error {
	p, closeProducer, err := benchkit.AsyncProducer([]string{bootstrap}, benchkit.ProducerConfig())
	if err != nil {
		return err
	}
	start := time.Now()
	for i := 0; i < n; i++ {
		if ahead := time.Duration(i)*time.Second/time.Duration(rate) - time.Since(start); ahead > 10*time.Millisecond {
			time.Sleep(ahead)
		}
		k, v := message(i)
		p.Input() <- &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(k), Value: sarama.StringEncoder(v)}
	}
	return closeProducer()
}
