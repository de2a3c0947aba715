package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/prosody-events/prosody-go/core/client"
	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/event"
)

// readerFlags are the flags every reader of the mixed benchmark takes, in
// any language: the driver starts each reader with them.
type readerFlags struct {
	bootstrap, topic, group, cassandra, keyspace string
	messages, lead, spread, timeout              int
	work                                         int // ms a message handler sleeps after scheduling
}

func (f *readerFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.bootstrap, "bootstrap", "localhost:9094", "Kafka bootstrap server")
	fs.StringVar(&f.topic, "topic", "", "topic to read")
	fs.StringVar(&f.group, "group", "", "consumer group")
	fs.StringVar(&f.cassandra, "cassandra", "localhost:9042", "Cassandra contact point")
	fs.StringVar(&f.keyspace, "keyspace", "", "Cassandra keyspace")
	fs.IntVar(&f.messages, "messages", 20_000, "messages on the topic")
	fs.IntVar(&f.lead, "lead", 1, "a timer is due lead+1+(seq mod spread) whole seconds after the second its message is handled in")
	fs.IntVar(&f.spread, "spread", 10, "see lead")
	fs.IntVar(&f.timeout, "timeout", 300, "give up after this many seconds")
	fs.IntVar(&f.work, "work", 0, "ms each message handler then sleeps (I/O it waits for)")
}

// quantiles are nearest-rank percentiles in milliseconds.
type quantiles struct {
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

func quantilesOf(ms []float64) quantiles {
	if len(ms) == 0 {
		return quantiles{}
	}
	s := append([]float64(nil), ms...)
	sort.Float64s(s)
	rank := func(p float64) float64 { return s[max(0, int(math.Ceil(p*float64(len(s))))-1)] }
	return quantiles{P50: rank(0.50), P99: rank(0.99), Max: s[len(s)-1]}
}

// result is the JSON line a reader prints last on stdout.
type result struct {
	Reader         string    `json:"reader"`
	Messages       int       `json:"messages"`
	Scheduled      int       `json:"scheduled"`
	ScheduleErrors int       `json:"schedule_errors"`
	Fired          int       `json:"fired"`
	Duplicates     int       `json:"duplicates"`
	Early          int       `json:"early"`
	ScheduleMs     quantiles `json:"schedule_ms"`
	LateMs         quantiles `json:"late_ms"`
	SchedulesPerS  float64   `json:"schedules_per_s"`
	HandlingS      float64   `json:"handling_s"`
}

// tally is what a reader's handlers record.
type tally struct {
	mu             sync.Mutex
	seen           map[[2]int64]bool // (partition, offset) handled
	scheduled      map[string]bool   // key@second scheduled (two messages of a key may ask for the same second)
	fired          map[string]bool   // key@second fired
	scheduleMs     []float64
	lateMs         []float64
	scheduleErrors int
	duplicates     int
	early          int
	firstStart     time.Time
	lastEnd        time.Time
	firstSchedule  time.Time
	lastSchedule   time.Time
	done           chan struct{}
	want           int
}

func (t *tally) finishedLocked() bool {
	return len(t.seen) >= t.want && len(t.fired) >= len(t.scheduled)
}

func (t *tally) checkLocked() {
	if t.finishedLocked() {
		select {
		case <-t.done:
		default:
			close(t.done)
		}
	}
}

// runReader is the Go reader: a consumer with the default configuration
// whose message handler schedules one timer per message.
func runReader(args []string) {
	fs := flag.NewFlagSet("read", flag.ExitOnError)
	var f readerFlags
	f.register(fs)
	must(fs.Parse(args))
	cfg, err := config.Load(func(c *config.Config) {
		c.BootstrapServers = []string{f.bootstrap}
		c.GroupID = f.group
		c.SubscribedTopics = []string{f.topic}
		c.CassandraNodes = []string{f.cassandra}
		c.CassandraKeyspace = f.keyspace
		c.ProbePort = config.None[int]()
	})
	must(err)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	cl, err := client.New(cfg, client.WithLogger(quiet))
	must(err)
	t := &tally{seen: map[[2]int64]bool{}, scheduled: map[string]bool{}, fired: map[string]bool{}, done: make(chan struct{}), want: f.messages}
	type payload struct {
		Seq int `json:"seq"`
	}
	handler := event.HandlerFuncs{
		Message: func(ctx *event.Context, m *event.Message) error {
			start := time.Now()
			var p payload
			if err := json.Unmarshal(m.Payload, &p); err != nil {
				return err
			}
			due := time.Unix(start.Unix()+int64(f.lead+1+p.Seq%f.spread), 0)
			t0 := time.Now()
			err := ctx.Schedule(due)
			t1 := time.Now()
			if f.work > 0 {
				time.Sleep(time.Duration(f.work) * time.Millisecond)
			}
			t.mu.Lock()
			defer t.mu.Unlock()
			if t.firstStart.IsZero() || start.Before(t.firstStart) {
				t.firstStart, t.firstSchedule = start, t0
			}
			if t1.After(t.lastEnd) {
				t.lastEnd, t.lastSchedule = t1, t1
			}
			if err != nil {
				t.scheduleErrors++
			} else {
				t.scheduleMs = append(t.scheduleMs, float64(t1.Sub(t0))/1e6)
				t.scheduled[fmt.Sprintf("%s@%d", m.Key, due.Unix())] = true
			}
			t.seen[[2]int64{int64(m.Partition), m.Offset}] = true
			t.checkLocked()
			return nil
		},
		Timer: func(ctx *event.Context, tm *event.Timer) error {
			late := float64(time.Since(tm.Time)) / 1e6
			id := fmt.Sprintf("%s@%d", tm.Key, tm.Time.Unix())
			t.mu.Lock()
			defer t.mu.Unlock()
			if t.fired[id] {
				t.duplicates++
				return nil
			}
			t.fired[id] = true
			t.lateMs = append(t.lateMs, late)
			if late < 0 {
				t.early++
			}
			t.checkLocked()
			return nil
		},
	}
	must(cl.Subscribe(handler))
	select {
	case <-t.done:
	case <-time.After(time.Duration(f.timeout) * time.Second):
		fmt.Fprintln(os.Stderr, "read: timed out")
	}
	stop, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.Close(stop); err != nil {
		fmt.Fprintln(os.Stderr, "read: close:", err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	r := result{
		Reader: "go", Messages: len(t.seen), Scheduled: len(t.scheduled), ScheduleErrors: t.scheduleErrors,
		Fired: len(t.fired), Duplicates: t.duplicates, Early: t.early,
		ScheduleMs: quantilesOf(t.scheduleMs), LateMs: quantilesOf(t.lateMs),
		HandlingS: t.lastEnd.Sub(t.firstStart).Seconds(),
	}
	if d := t.lastSchedule.Sub(t.firstSchedule).Seconds(); d > 0 {
		r.SchedulesPerS = float64(len(t.scheduleMs)) / d
	}
	line, err := json.Marshal(r)
	must(err)
	fmt.Println(string(line))
}
