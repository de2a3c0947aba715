// Command prosody-timer-bench measures durable timers on a real Cassandra.
//
// Without a subcommand it drives the timer managers of several partitions
// directly: how many timers per second they schedule, and how late they
// fire (firing time minus the due second).
//
//	go run ./cmd/prosody-timer-bench -cassandra localhost:9042 -timers 10000
//
// The subcommand mixed runs whole consumers instead, in their own
// processes: message handlers schedule timers while messages still flow,
// so firing competes with message work (see mixed.go).
//
//	go run ./cmd/prosody-timer-bench mixed -readers go,python,node
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prosody-events/prosody-go/core/cassandra"
	"github.com/prosody-events/prosody-go/core/timers"
	"github.com/prosody-events/prosody-go/core/timerstore"
	"github.com/prosody-events/prosody-go/internal/benchkit"
)

func main() {
	args := os.Args[1:]
	if len(args) > 0 {
		switch args[0] {
		case "mixed":
			runMixed(args[1:])
			return
		case "read":
			runReader(args[1:])
			return
		}
	}
	runManagers(args)
}

func runManagers(args []string) {
	fs := flag.NewFlagSet("prosody-timer-bench", flag.ExitOnError)
	nodes := fs.String("cassandra", "localhost:9042", "Cassandra contact points")
	count := fs.Int("timers", 10_000, "timers to schedule")
	keys := fs.Int("keys", 1_000, "distinct keys")
	partitions := fs.Int("partitions", 8, "partitions (one timer manager each)")
	workers := fs.Int("concurrency", 32, "concurrent schedule calls (like max_concurrency)")
	spread := fs.Duration("spread", 20*time.Second, "timers are due between lead and lead+spread from the start")
	lead := fs.Duration("lead", 10*time.Second, "earliest due time after the start")
	jsonOut := fs.String("json", "", "also write the results to this file as JSON (benchkit.Report)")
	must(fs.Parse(args))
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))

	keyspace := "prosody_timer_bench_" + suffix()
	ctx := context.Background()
	session, err := cassandra.Connect(ctx, cassandra.Options{Nodes: strings.Split(*nodes, ","), Keyspace: keyspace, Logger: quiet})
	must(err)
	defer func() {
		_ = session.Query(ctx, "DROP KEYSPACE IF EXISTS "+keyspace).Exec()
		session.Close()
	}()
	store := timerstore.NewCassandra(session, 24*time.Hour)

	type fired struct {
		key string
		due timerstore.Time
		at  time.Time
	}
	var mu sync.Mutex
	var firings []fired
	managers := make([]*timers.Manager, *partitions)
	segments := make([]timerstore.Segment, *partitions)
	for p := range managers {
		seg, err := store.Segment(ctx, "bench", "timers", int32(p), 3600)
		must(err)
		segments[p] = seg
		var m *timers.Manager
		m = timers.Start(timers.Options{
			Segment: seg, MaxInFlight: 256, Logger: quiet,
			Fire: func(t timerstore.Trigger) {
				now := time.Now()
				mu.Lock()
				firings = append(firings, fired{t.Key, t.Time, now})
				mu.Unlock()
				go func() { // the partition would run the handler, then commit
					id := timers.ID{Key: t.Key, Time: t.Time, Type: t.Type}
					if m.Begin(id) {
						m.Commit(id)
					}
				}()
			},
		})
		managers[p] = m
	}
	defer func() {
		for _, m := range managers {
			m.Stop()
		}
	}()

	start := time.Now()
	jobs := make(chan int)
	var wg sync.WaitGroup
	var failures int
	for w := 0; w < *workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				key := fmt.Sprintf("key-%05d", i%*keys)
				due := start.Add(*lead + time.Duration(int64(*spread)*int64(i)/int64(*count)))
				m := managers[i%*keys%*partitions]
				if err := m.Schedule(ctx, timerstore.Trigger{Key: key, Time: timerstore.TimeOf(due), Type: timerstore.Application}); err != nil {
					mu.Lock()
					failures++
					mu.Unlock()
				}
			}
		}()
	}
	for i := 0; i < *count; i++ {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	scheduling := time.Since(start)
	fmt.Printf("scheduled %d timers over %d keys and %d partitions in %v: %.0f timers/s (%d failed)\n",
		*count, *keys, *partitions, scheduling.Round(time.Millisecond), float64(*count)/scheduling.Seconds(), failures)
	if scheduling > *lead {
		fmt.Printf("warning: scheduling took longer than the lead (%v); early timers were already due when scheduled\n", *lead)
	}

	deadline := start.Add(*lead + *spread + 30*time.Second)
	for {
		mu.Lock()
		n := len(firings)
		mu.Unlock()
		if n >= *count-failures || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	// Name the timers that never fired, with what the store holds for them.
	seen := map[string]bool{}
	for _, f := range firings {
		seen[fmt.Sprintf("%s@%d", f.key, f.due)] = true
	}
	missing := 0
	for i := 0; i < *count; i++ {
		key := fmt.Sprintf("key-%05d", i%*keys)
		due := timerstore.TimeOf(start.Add(*lead + time.Duration(int64(*spread)*int64(i)/int64(*count))))
		if !seen[fmt.Sprintf("%s@%d", key, due)] {
			missing++
			if missing <= 10 {
				p := i % *keys % *partitions
				stored, err := segments[p].KeyTimes(ctx, key, timerstore.Application)
				fmt.Printf("missing: %s due %v (partition %d); stored for key: %v %v\n", key, due.Std().Format(time.TimeOnly), p, stored, err)
			}
		}
	}
	late := make([]time.Duration, len(firings))
	early := 0
	for i, f := range firings {
		late[i] = f.at.Sub(f.due.Std())
		if late[i] < -500*time.Millisecond {
			early++
		}
	}
	sort.Slice(late, func(i, j int) bool { return late[i] < late[j] })
	pct := func(p float64) time.Duration { return late[int(p*float64(len(late)-1))] }
	fmt.Printf("fired %d of %d; lateness after the due second: p50 %v, p99 %v, max %v; %d fired more than 0.5 s early\n",
		len(firings), *count-failures, pct(0.5).Round(time.Millisecond), pct(0.99).Round(time.Millisecond),
		late[len(late)-1].Round(time.Millisecond), early)
	report := benchkit.NewReport("prosody-timer-bench", "", "", map[string]any{
		"timers": *count, "keys": *keys, "partitions": *partitions, "concurrency": *workers,
		"lead_s": lead.Seconds(), "spread_s": spread.Seconds(),
	})
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	for metric, v := range map[string]float64{
		"schedules_per_s": float64(*count) / scheduling.Seconds(), "schedule_failures": float64(failures),
		"fired": float64(len(firings)), "unfired": float64(*count - failures - len(firings)), "early": float64(early),
		"late_p50_ms": ms(pct(0.5)), "late_p99_ms": ms(pct(0.99)), "late_max_ms": ms(late[len(late)-1]),
	} {
		report.Add("managers", metric, v)
	}
	must(report.Write(*jsonOut))
}

// The shared pieces of the benchmark programs.
var (
	suffix       = benchkit.Suffix
	median       = benchkit.Median
	saramaConfig = benchkit.SaramaConfig
)

func must(err error) { benchkit.Must("prosody-timer-bench", err) }
