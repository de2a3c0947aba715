// Package workload is the harness's side of Kafka: the producer of
// sequence-numbered events, the sampler of the group's committed offsets,
// and the reader of a topic's records for the checker.
package workload

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/prosody-events/prosody-go/core/client"
	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/internal/chaos/record"
)

// Mix says how often the producer asks for a timer or a handler fault.
type Mix struct {
	Keys                     int
	Rate                     float64 // events per second
	Timer                    float64 // share of events that schedule a timer
	Throw, Panic, Hang       float64 // shares of events whose first attempt fails
	TimerMin, TimerMaxSecond int     // a timer's delay after its send, in seconds
}

// Ack is one line of produced.log: an event the broker acknowledged.
type Ack struct {
	ID    string `json:"id"`
	Key   string `json:"key"`
	Seq   int64  `json:"seq"`
	Timer int64  `json:"timer,omitempty"`
	Time  int64  `json:"t"` // unix nanoseconds of the acknowledgement
}

// Producer sends events to one topic until stopped.
type Producer struct {
	c     *client.Client
	topic string
	mix   Mix
	rng   *rand.Rand
	out   *os.File
	next  map[string]int64
	sent  int64
	mu    sync.Mutex
	retry int64
}

// NewProducer opens a producer on bootstrap that writes its
// acknowledgements to path.
func NewProducer(bootstrap, topic, path string, mix Mix, seed uint64) (*Producer, error) {
	cfg, err := config.Load(func(c *config.Config) {
		c.BootstrapServers = []string{bootstrap}
		c.SourceSystem = "chaos-producer"
		c.ProbePort = config.None[int]()
		c.TelemetryEnabled = false
		c.SendTimeout = config.Some(5 * time.Second)
	})
	if err != nil {
		return nil, fmt.Errorf("workload: %w", err)
	}
	c, err := client.New(cfg, client.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return nil, fmt.Errorf("workload: %w", err)
	}
	out, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("workload: %w", err)
	}
	return &Producer{c: c, topic: topic, mix: mix, rng: rand.New(rand.NewPCG(seed, 1)), out: out, next: map[string]int64{}}, nil
}

// Run sends at the mix's rate until ctx ends. A failed send is retried
// with the same event (same id) before the next one, so each key's
// sequence numbers reach the topic in order.
func (p *Producer) Run(ctx context.Context) error {
	tick := time.NewTicker(time.Duration(float64(time.Second) / p.mix.Rate))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		key := "k" + strconv.Itoa(p.rng.IntN(p.mix.Keys))
		p.next[key]++
		pl := record.Payload{ID: fmt.Sprintf("%s-%d-%016x", key, p.next[key], p.rng.Uint64()), Seq: p.next[key]}
		if p.rng.Float64() < p.mix.Timer {
			delay := p.mix.TimerMin + p.rng.IntN(p.mix.TimerMaxSecond-p.mix.TimerMin+1)
			pl.Timer = time.Now().Add(time.Duration(delay) * time.Second).Unix()
		}
		switch f := p.rng.Float64(); {
		case f < p.mix.Throw:
			pl.Fault = record.FaultThrow
		case f < p.mix.Throw+p.mix.Panic:
			pl.Fault = record.FaultPanic
		case f < p.mix.Throw+p.mix.Panic+p.mix.Hang:
			pl.Fault = record.FaultHang
		}
		if err := p.send(ctx, key, pl); err != nil {
			return err
		}
	}
}

func (p *Producer) send(ctx context.Context, key string, pl record.Payload) error {
	b, err := json.Marshal(pl)
	if err != nil {
		return fmt.Errorf("workload: %w", err)
	}
	for {
		if err := p.c.Send(ctx, p.topic, key, b); err == nil {
			break
		}
		if ctx.Err() != nil {
			// Stopped mid-send: the event may or may not be in the topic,
			// and the checker reads the topic, not this log, for what
			// must be handled.
			return nil
		}
		p.mu.Lock()
		p.retry++
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(200 * time.Millisecond):
		}
	}
	line, err := json.Marshal(Ack{ID: pl.ID, Key: key, Seq: pl.Seq, Timer: pl.Timer, Time: time.Now().UnixNano()})
	if err != nil {
		return fmt.Errorf("workload: %w", err)
	}
	if _, err := p.out.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("workload: %w", err)
	}
	p.mu.Lock()
	p.sent++
	p.mu.Unlock()
	return nil
}

// Sent is the number of acknowledged events and of retried sends.
func (p *Producer) Sent() (sent, retried int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sent, p.retry
}

// Close closes the client and the log.
func (p *Producer) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := p.c.Close(ctx)
	if cerr := p.out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("workload: %w", err)
	}
	return nil
}
